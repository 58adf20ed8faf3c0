package shellcmd

import "testing"

const project = "/home/dev/shop"

// TestRunOfAsPeopleWriteIt: what a command an agent ran, and its exit
// status, say of the feature's test. Each row is a form seen in real runs
// or a way around the rule; P = passed, F = failed, U = ran, outcome
// unknown, N = not a run.
func TestRunOfAsPeopleWriteIt(t *testing.T) {
	const (
		sh     = "sh tests/F-001.sh"
		gopkg  = "go test ./pkg/"
		npm    = "npm test"
		pytest = "python -m pytest"
		node   = "node --test"
		cargo  = "cargo test"
	)
	N, U, F, P := NotRun, Unknown, Failed, Passed
	tests := []struct {
		test, cmd string
		exit      int
		want      Outcome
	}{
		// The test as written.
		{sh, "sh tests/F-001.sh", 0, P},
		{sh, "sh tests/F-001.sh", 1, F},
		{sh, `sh "tests/F-001.sh"`, 0, P},
		// The seven forms refused before.
		{sh, "sh tests/F-001.sh 2>&1", 0, P},
		{sh, "sh tests/F-001.sh 2>&1", 2, F},
		{sh, "sh tests/F-001.sh 2>&1 | tail -20", 0, U},
		{sh, "sh tests/F-001.sh 2>&1 | tail -20", 1, U},
		{sh, "mkdir -p ev && sh tests/F-001.sh > ev/run.log 2>&1; cat ev/run.log", 0, U},
		{sh, "cd /home/dev/shop && sh tests/F-001.sh 2>&1", 0, P},
		{sh, "cd /home/dev/shop && sh tests/F-001.sh 2>&1", 1, F},
		{sh, "timeout 120 sh tests/F-001.sh", 0, P},
		{sh, "timeout 120 sh tests/F-001.sh", 124, F},
		{sh, "bash ./tests/F-001.sh", 0, P},
		{gopkg, "go test -v ./pkg/ 2>&1 | tail -30", 0, U},
		// More forms models write.
		{sh, "./tests/F-001.sh", 0, P},
		{sh, "tests/F-001.sh > .claude/progress/evidence/F-001/run.log 2>&1", 0, P},
		{sh, "/home/dev/shop/tests/F-001.sh &> out.log", 1, F},
		{sh, "FOO=1 timeout 60 bash tests/F-001.sh > ev/out.log 2>&1; echo exit=$?", 0, U},
		{sh, "env CI=1 nice -n 5 sh tests/F-001.sh", 0, P},
		{sh, "time sh tests/F-001.sh", 0, P},
		{sh, "export CI=1; cd . && sh tests/F-001.sh", 0, P},
		{sh, "bash -c 'sh tests/F-001.sh 2>&1'", 0, P},
		{sh, "sh tests/F-001.sh 2>&1 | tee .claude/progress/evidence/F-001/run.log", 0, U},
		{sh, "sh tests/F-001.sh && echo PASS", 0, P},
		{sh, "sh tests/F-001.sh && echo PASS", 1, F},
		{sh, "sh tests/F-001.sh && grep -q ok log", 1, U},
		{npm, "cd /home/dev/shop && npm test 2>&1 | tail -40", 0, U},
		{npm, "npm run test", 0, P},
		{npm, "npm test -- --reporter spec", 0, U},
		{gopkg, "go test ./... 2>&1 | tail -40", 0, U},
		{gopkg, "go test ./... -count=1", 0, P},
		{gopkg, "go test ./... -count=1", 1, U}, // another package may have failed
		{"go test ./...", "go test ./... -count=1 2>&1 | tee ev/log", 0, U},
		{gopkg, "set -o pipefail; go test ./pkg 2>&1 | tail", 0, P},
		{gopkg, "set -o pipefail; go test ./pkg 2>&1 | tail", 1, F},
		{gopkg, "set -o pipefail; go test -v ./pkg/ | head -50", 141, U}, // SIGPIPE from head
		{gopkg, "set -o pipefail; go test -v ./pkg/ | head -50", 1, F},
		{gopkg, "set -o pipefail; go test ./pkg/ | grep -v ok", 1, U}, // grep fails on no match
		{gopkg, "bash -o pipefail -c 'go test ./pkg/ 2>&1 | tail'", 0, P},
		{gopkg, "go test -v -count=1 -race ./pkg/", 0, P},
		{gopkg, "go test -v -run TestCart -count=1 ./pkg/", 0, U}, // -run may select nothing
		{gopkg, "go test -v -run TestCart -count=1 ./pkg/", 1, F},
		{pytest, "cd /home/dev/shop && python -m pytest -xvs 2>&1 | head -100", 0, U},
		{pytest, "pytest -xvs", 0, P},
		{pytest, "python3 -m pytest -q --tb=short", 1, F},
		{pytest, "pytest -xvs -k checkout", 0, U},
		{pytest, "pytest -xvs -k checkout", 1, F},
		{pytest, "pytest -k XXX_NONE", 5, N}, // nothing collected
		{node, "node --test --test-reporter=spec", 0, P},
		{node, "node --test --test-name-pattern=cart", 0, U},
		{cargo, "cargo test -- --nocapture", 0, P},
		{cargo, "cargo test -- --nocapture", 101, F},
		{"make test", "make -s test 2>&1", 0, P},
		{"cd web && npm test", "cd web && npm test", 0, P},
		{"npx vitest run tests/a.test.ts", "npx vitest run tests/a.test.ts --reporter=verbose", 0, U},
		// Not a run: the test's text, a listing, another target, a hidden
		// status, a test that may not have been reached.
		{sh, "echo sh tests/F-001.sh", 0, N},
		{sh, "printf 'sh tests/F-001.sh passed\\n'", 0, N},
		{sh, "cat <<EOF\nsh tests/F-001.sh\nEOF", 0, N},
		{sh, "# sh tests/F-001.sh", 0, N},
		{sh, "true # sh tests/F-001.sh", 0, N},
		{sh, "sh tests/F-001.sh || true", 0, N},
		{sh, "sh tests/F-001.sh || :", 0, N},
		{sh, "sh tests/F-001.sh || echo failed", 1, F},
		{sh, "sh -c 'echo sh tests/F-001.sh'", 0, N},
		{sh, "false && sh tests/F-001.sh", 1, N},
		{sh, "go build ./... && sh tests/F-001.sh", 0, P},
		{sh, "go build ./... && sh tests/F-001.sh", 1, N}, // the build's failure, maybe
		{sh, "sh tests/F-001.sh &", 0, N},
		{sh, "if sh tests/F-001.sh; then echo ok; fi", 0, N},
		{sh, "! sh tests/F-001.sh", 0, F},
		{sh, "cat tests/F-001.sh", 0, N},
		{sh, "sh tests/F-002.sh", 0, N},
		{sh, "sh tests/F-001.sh extra", 0, N},
		{sh, "cd /tmp/elsewhere && sh tests/F-001.sh", 0, N},
		{sh, "sh tests/F-001.sh && (", 0, N},
		{sh, "", 0, N},
		{pytest, "python -m pytest --collect-only", 0, N},
		{pytest, "pytest --version", 0, N},
		{gopkg, "go test -list . ./pkg/", 0, N},
		{gopkg, "go test ./other/", 0, N},
		{gopkg, "go test ./pkg/sub/", 0, N},
		{gopkg, "go vet ./pkg/", 0, N},
		{npm, "npm run lint", 0, N},
		{cargo, "cargo test --no-run", 0, N},
		{"make test", "make -n test", 0, N},
		{"npx vitest run tests/a.test.ts", "npx vitest run tests/a.test.ts --version", 0, N},
		// Tests of several commands run as written.
		{"go vet ./...; go test ./...", "go vet ./... ; go test ./...", 0, P},
		{"go vet ./...; go test ./...", "go test ./...", 0, N},
		{"go vet ./... && go test ./...", "cd . && go vet ./... && go test ./...", 0, P},
	}
	for _, tt := range tests {
		if got := RunOf(tt.cmd, tt.test, project, tt.exit); got != tt.want {
			t.Errorf("RunOf(%q, test %q, exit %d) = %v, want %v", tt.cmd, tt.test, tt.exit, got, tt.want)
		}
	}
	if RunOf("anything", "", project, 0) != NotRun || RunOf("anything", "(", project, 0) != NotRun {
		t.Error("no test, or a test that is not shell, is never run")
	}
	if RunOf("cd /home/dev/shop && sh tests/F-001.sh", sh, "", 0) != NotRun {
		t.Error("with the project's directory unknown, an absolute cd leads nowhere known")
	}
}
