package scriptedmodel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// breaksScenario: F-002 breaks F-001's test (its victim: the first, since
// F-002 is the last), and waits for F-001's end before its work.
func breaksScenario() Scenario {
	return Scenario{Name: "breaks", Features: []FeatureScript{
		{ID: "F-001", Title: "Greeting", Behavior: Pass},
		{ID: "F-002", Title: "Farewell", Behavior: BreaksAnother, After: "F-001"},
	}}
}

// A breaks-another feature's work passes its own test, and the victim's
// alone; on a tree that holds both, the victim's test fails and says
// which file of which feature broke it.
func TestBreaksAnotherBreaksOnlyTogether(t *testing.T) {
	sc := breaksScenario()
	if got := sc.Victim("F-002"); got != "F-001" {
		t.Fatalf("F-002's victim is %q, want F-001", got)
	}
	if got := sc.Victim("F-001"); got != "F-002" {
		t.Fatalf("F-001's other feature is %q, want F-002 (the next)", got)
	}
	dir := t.TempDir()
	if code, out := runTest(t, dir, New(sc, nil).testScripts()); code != 0 {
		t.Fatalf("the initializer's scripts: exit %d: %s", code, out)
	}
	put := func(rel, content string) {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	test := func(id string) (int, string) { return runTest(t, dir, testCommand(id)) }

	if code, out := test("F-001"); code == 0 {
		t.Fatalf("F-001's test passes without its code: %s", out)
	}
	put(sourcePath("F-001"), workingLine("F-001")+"\n")
	if code, out := test("F-001"); code != 0 {
		t.Fatalf("F-001's test fails on its working code alone: exit %d: %s", code, out)
	}
	put(sourcePath("F-002"), workingLine("F-002")+"\n")
	put(BreakingFile("F-002"), "F-002 overrides F-001\n")
	if code, out := test("F-002"); code != 0 {
		t.Fatalf("F-002's test fails on its work: exit %d: %s", code, out)
	}
	code, out := test("F-001")
	if code == 0 || strings.TrimSpace(out) != Overridden("F-001", "F-002") {
		t.Fatalf("F-001's test beside F-002's override: exit %d, %q; want a failure that says %q", code, out, Overridden("F-001", "F-002"))
	}
	// Without its own code, the victim's test fails for that, not for
	// the override: a reader of the failure can tell the two apart.
	os.Remove(filepath.Join(dir, sourcePath("F-001")))
	if code, out := test("F-001"); code == 0 || strings.Contains(out, "overridden") {
		t.Fatalf("F-001's test without its code, beside the override: exit %d, %q; want a failure that does not blame the override", code, out)
	}
	// A feature nobody breaks keeps the plain test.
	if body := New(sc, nil).testScripts(); !strings.Contains(body, "cat > tests/F-002.sh <<'EOF'\n"+testBody("F-002", Text)+"EOF\n") {
		t.Errorf("F-002, which nobody breaks, has not the plain test:\n%s", body)
	}
}

func TestBreaksAnotherScope(t *testing.T) {
	l, err := initialFeatureList(breaksScenario())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(l, fmt.Sprintf("%q", BreakingFile("F-002"))); n != 1 {
		t.Errorf("the list names F-002's override %d times, want once, in F-002's scope:\n%s", n, l)
	}
	if strings.Contains(l, BreakingFile("F-001")) {
		t.Errorf("F-001, which breaks nothing, has an override in its scope:\n%s", l)
	}
}

// breaksResults answers as the CLI does when every call goes through.
func breaksResults(t *testing.T) func(move) (string, bool) {
	l, err := initialFeatureList(breaksScenario())
	if err != nil {
		t.Fatal(err)
	}
	return func(m move) (string, bool) {
		switch {
		case m.tool == "Read" && strings.HasSuffix(m.in["file_path"].(string), featureListPath):
			return numbered(l), false
		case m.tool == "Read":
			return missing, true
		case m.tool == "Bash":
			return EndedMark("F-001"), false
		}
		return written, false
	}
}

func TestBreaksAnotherCoder(t *testing.T) {
	for _, tt := range []struct {
		attempt int
		want    string
	}{
		{1, "Bash wait, Read src/F-002.txt, Write src/F-002.txt, Write src/F-002-override.txt, Read " + featureListPath + ", Write " + featureListPath},
		// Honest, and waiting for nobody: F-001 ended long ago.
		{2, "Read src/F-002.txt, Write src/F-002.txt, Read " + featureListPath + ", Write " + featureListPath},
	} {
		t.Run(fmt.Sprint("attempt ", tt.attempt), func(t *testing.T) {
			moves, final := playOut(t, New(breaksScenario(), nil), newConvo(codeCmd("F-002", tt.attempt)), breaksResults(t))
			var got []string
			for _, m := range moves {
				if m.tool == "Bash" {
					if m.in["command"] != awaitEnd("F-001") || m.in["timeout"] != float64(awaitTimeout) {
						t.Errorf("the Bash call %v, want the wait for F-001 with the longest timeout", m.in)
					}
					got = append(got, "Bash wait")
					continue
				}
				got = append(got, m.String())
			}
			if strings.Join(got, ", ") != tt.want {
				t.Errorf("calls %s, want %s", strings.Join(got, ", "), tt.want)
			}
			for _, m := range moves {
				if m.tool == "Write" && m.in["file_path"] == abs(sourcePath("F-002")) && m.in["content"] != workingLine("F-002")+"\n" {
					t.Errorf("wrote %q to its source, want its working line", m.in["content"])
				}
			}
			if final != "Implemented F-002: wrote src/F-002.txt" {
				t.Errorf("final text %q", final)
			}
		})
	}
}

// A feature with After waits for the other's end on its first attempt,
// whatever its behavior, and not when its wait is over.
func TestAfterWaitsFirst(t *testing.T) {
	sc := Scenario{Name: "after", Features: []FeatureScript{
		{ID: "F-001", Title: "A", Behavior: NeverPass},
		{ID: "F-002", Title: "B", Behavior: StopEarly, After: "F-001"},
	}}
	s := New(sc, nil)
	name, in := ask(t, s, newConvo(codeCmd("F-002", 1))).tool(t)
	if name != "Bash" || in["command"] != awaitEnd("F-001") {
		t.Fatalf("first call %s %v, want the wait", name, in)
	}
	check(t, ask(t, s, newConvo(codeCmd("F-002", 1)).bash(awaitEnd("F-001"), EndedMark("F-001"), false)), want{text: "I could not finish."})
	// A wait that gave up: the coder goes on.
	check(t, ask(t, s, newConvo(codeCmd("F-002", 1)).bash(awaitEnd("F-001"), "Exit code 1\nF-001 has not ended", true)), want{text: "I could not finish."})
	check(t, ask(t, s, newConvo(codeCmd("F-001", 1))), want{tool: "Read", target: abs("src/F-001.txt")})
}

// The wait ends once git in the project shows the other feature's end:
// its verdict's commit on the branch, or its work kept as blocked; in a
// lane (a clone of the project) as in the project itself.
func TestAwaitEndSeesTheProjectsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	project := func() string {
		dir := t.TempDir()
		git(dir, "init", "-q")
		git(dir, "commit", "-q", "--allow-empty", "-m", "start\n\nctxgraphd-feature: F-0011")
		return dir
	}
	lane := func(project string) string {
		dir := filepath.Join(t.TempDir(), "wt")
		git(filepath.Dir(dir), "clone", "-q", "--shared", project, dir)
		return dir
	}
	for _, tt := range []struct {
		name  string
		ended func(project string)
		in    func(project string) string
	}{
		{"tested, from a lane", func(p string) {
			git(p, "commit", "-q", "--allow-empty", "-m", "F-001 tested\n\nctxgraphd-feature: F-001")
		}, lane},
		{"blocked, from a lane", func(p string) {
			git(p, "update-ref", "refs/ctxgraphd/blocked/F-001", git(p, "commit-tree", "-m", "kept", git(p, "rev-parse", "HEAD^{tree}")))
		}, lane},
		{"tested, in the project", func(p string) {
			git(p, "commit", "-q", "--allow-empty", "-m", "F-001 tested\n\nctxgraphd-feature: F-001")
		}, func(p string) string { return p }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := project()
			dir := tt.in(p) // made before the end: a lane sees the project as it is now
			tt.ended(p)
			if code, out := runTest(t, dir, awaitEnd("F-001")); code != 0 || strings.TrimSpace(out) != EndedMark("F-001") {
				t.Errorf("exit %d, %q; want %q", code, out, EndedMark("F-001"))
			}
		})
	}
}

func TestBreaksAnotherAndAfterScenarios(t *testing.T) {
	for _, tt := range []struct{ name, features, want string }{
		{"breaker of kind go", `{"id": "F-1", "title": "a", "behavior": "pass"}, {"id": "F-2", "title": "b", "behavior": "breaks-another", "kind": "go"}`,
			"features[1] (F-2): behavior breaks-another writes its override beside a text feature's source"},
		{"no other feature", `{"id": "F-1", "title": "a", "behavior": "breaks-another"}`,
			"features[0] (F-1): behavior breaks-another breaks another feature's test, and the scenario has no other feature"},
		{"victim of kind go", `{"id": "F-1", "title": "a", "behavior": "pass", "kind": "go"}, {"id": "F-2", "title": "b", "behavior": "breaks-another"}`,
			"features[1] (F-2): behavior breaks-another breaks the test of F-1, the next feature, which must be a text feature"},
		{"victim without a test", `{"id": "F-1", "title": "a", "behavior": "breaks-another"}, {"id": "F-2", "title": "b", "behavior": "pass", "no_test": true}`,
			"features[0] (F-1): behavior breaks-another breaks the test of F-2"},
		{"after an unknown feature", `{"id": "F-1", "title": "a", "behavior": "pass", "after": "F-9"}`,
			`features[0] (F-1): after "F-9", which is not a feature of the scenario`},
		{"after itself", `{"id": "F-1", "title": "a", "behavior": "pass", "after": "F-1"}`,
			`features[0] (F-1): after "F-1": a feature cannot wait for its own end`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScenario([]byte(`{"name": "x", "features": [` + tt.features + `]}`))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one that says %q", err, tt.want)
			}
		})
	}
	sc, err := parseScenario([]byte(`{"name": "x", "features": [{"id": "F-001", "title": "a", "behavior": "pass"}, {"id": "F-002", "title": "b", "behavior": "breaks-another", "after": "F-001"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if f := sc.Features[1]; f.Behavior != BreaksAnother || f.After != "F-001" {
		t.Errorf("parsed %+v", f)
	}
}

// Told carries what a retry was told of the attempt before: the tester's
// report and the diagnosis, as the command had them.
func TestToldCarriesTheReportAndTheDiagnosis(t *testing.T) {
	s := New(breaksScenario(), nil)
	cmd := codeCmd("F-002", 2)
	cmd["context"].(map[string]any)["tester_report"] = "F-002's own test passed, but on its tree the frozen test of F-001 does not"
	cmd["context"].(map[string]any)["diagnosis"] = map[string]any{"test": "sh tests/F-001.sh", "exit_code": 1, "output": Overridden("F-001", "F-002")}
	ask(t, s, newConvo(cmd))
	ask(t, s, newConvo(codeCmd("F-001", 1)))
	got := s.Told()
	if len(got) != 2 {
		t.Fatalf("told %d commands, want 2: %+v", len(got), got)
	}
	if r := got[0].TesterReport; r != cmd["context"].(map[string]any)["tester_report"] {
		t.Errorf("tester report %q", r)
	}
	if d := got[0].Diagnosis; !strings.Contains(d, `"test":"sh tests/F-001.sh"`) || !strings.Contains(d, Overridden("F-001", "F-002")) {
		t.Errorf("diagnosis %q, want the command's, as JSON", d)
	}
	if got[1].TesterReport != "" || got[1].Diagnosis != "" {
		t.Errorf("a first attempt was told %+v, want no report and no diagnosis", got[1])
	}
}

func TestAsText(t *testing.T) {
	for in, want := range map[string]string{``: "", `null`: "", `"a \"b\""`: `a "b"`, `{"x": 1}`: `{"x": 1}`, `3`: `3`} {
		if got := asText([]byte(in)); got != want {
			t.Errorf("asText(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestSeconds makes each text feature's test take that long, and still
// pass only on the feature's working line.
func TestTestSecondsLengthensATextTest(t *testing.T) {
	sc := Scenario{Name: "slow", TestSeconds: 1, Features: []FeatureScript{{ID: "F-001", Title: "a", Behavior: Pass}}}
	dir := t.TempDir()
	if code, out := runTest(t, dir, New(sc, nil).testScripts()); code != 0 {
		t.Fatalf("the initializer's scripts: exit %d: %s", code, out)
	}
	start := time.Now()
	if code, _ := runTest(t, dir, testCommand("F-001")); code == 0 {
		t.Fatal("F-001's test passes without its code")
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("the test took %s, want at least test_seconds (1s)", took)
	}
	if err := os.WriteFile(filepath.Join(dir, sourcePath("F-001")), []byte(workingLine("F-001")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runTest(t, dir, testCommand("F-001")); code != 0 {
		t.Fatalf("F-001's test fails on its working line: exit %d: %s", code, out)
	}
}
