package gates

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/progress"
)

// writeEnv is a project with a frozen test, a protected test layout, an
// outside scratch directory and links that lead from one to the other.
type writeEnv struct {
	dir, scratch, elsewhere string
	state                   State
}

func newWriteEnv(t *testing.T) *writeEnv {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "project")
	scratch := filepath.Join(root, "tmp")
	elsewhere := filepath.Join(root, "home")
	for _, d := range []string{dir + "/tests", dir + "/src", dir + "/.claude/progress/evidence", scratch, elsewhere} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "tests/F-001.sh"), []byte("grep -qx ok src/F-001.txt\n"), 0o755)
	// Links: from the scratch space back into the project's tests, and from
	// inside the project to the frozen test.
	if err := os.Symlink(filepath.Join(dir, "tests"), filepath.Join(scratch, "into-tests")); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(dir, "tests/F-001.sh"), filepath.Join(dir, "src/alias.sh"))
	os.Symlink(elsewhere, filepath.Join(dir, "src/out"))
	l := &progress.List{Version: 1, Features: []progress.Feature{
		{ID: "F-001", Title: "x", Status: progress.InProgress, Scope: []string{"src/**"}, Test: "sh tests/F-001.sh"},
		{ID: "F-002", Title: "y", Status: progress.Pending, Test: "sh tests/F-002.sh"},
	}}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &writeEnv{dir: real, scratch: scratch, elsewhere: elsewhere, state: State{
		ProjectDir:     real,
		List:           l,
		Protected:      []string{filepath.Join(root, "state")},
		Frozen:         map[string]bool{"tests/F-001.sh": true},
		ProtectedGlobs: []string{"tests/**", "**/*_test.go"},
		Writable:       []string{scratch},
	}}
}

func writePayload(tool, path string) *Payload {
	in, _ := json.Marshal(map[string]string{"file_path": path, "content": "x", "old_string": "a", "new_string": "b"})
	return &Payload{Event: "PreToolUse", ToolName: tool, ToolInput: in}
}

func TestWritesAreJudgedWhereTheyLand(t *testing.T) {
	e := newWriteEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001", Run: "run-000002"}
	tester := Actor{Role: Tester, Feature: "F-001", Run: "run-000003"}
	init := Actor{Role: Initializer, Run: "run-000001"}
	person := Actor{}
	p := func(rel string) string { return filepath.Join(e.dir, rel) }
	tests := []struct {
		name  string
		actor Actor
		tool  string
		path  string
		code  string
	}{
		{"own code", coder, "Write", p("src/F-001.txt"), ""},
		{"relative path", coder, "Write", "src/F-001.txt", ""},
		{"frozen test", coder, "Edit", p("tests/F-001.sh"), "frozen_test"},
		{"frozen test through ..", coder, "Write", p("src/../tests/F-001.sh"), "frozen_test"},
		{"frozen test through a link in the project", coder, "Write", p("src/alias.sh"), "frozen_test"},
		{"frozen test through a link outside the project", coder, "Write", filepath.Join(e.scratch, "into-tests/F-001.sh"), "frozen_test"},
		{"a new test where tests live", coder, "Write", p("tests/F-009.sh"), "protected_test"},
		{"a new Go test beside the code", coder, "Write", p("src/zz_test.go"), "protected_test"},
		{"a new test, by the tester", tester, "Write", p("tests/extra.sh"), "protected_test"},
		{"scratch space", coder, "Write", filepath.Join(e.scratch, "notes.txt"), ""},
		{"outside everything", coder, "Write", filepath.Join(e.elsewhere, ".bashrc"), "outside_project"},
		{"outside through a link in the project", coder, "Write", p("src/out/.profile"), "outside_project"},
		{"the daemon's state", coder, "Write", filepath.Join(filepath.Dir(e.dir), "state/state.db"), "daemon_files"},
		{"git internals", coder, "Write", p(".git/hooks/pre-commit"), "git_internals"},
		{"git internals in another case", coder, "Write", p(".GIT/config"), "git_internals"},
		{"a nested repository", coder, "Write", p("src/sub/.git/config"), "git_internals"},
		{"a nested .GIT, in scope", coder, "Write", p("src/.Git/x"), "git_internals"},
		{"a name that only starts like .git", coder, "Write", p("src/.github/x.yml"), ""},
		{".gitignore by the coder, in scope", coder, "Write", p("src/.gitignore"), "git_rules"},
		{".gitignore at the top by the tester", tester, "Edit", p(".gitignore"), "git_rules"},
		{".gitattributes by the initializer", init, "Write", p(".gitattributes"), "git_rules"},
		{".GITATTRIBUTES in any case", coder, "Write", p("src/.GITATTRIBUTES"), "git_rules"},
		{"a person's .gitignore", person, "Write", p(".gitignore"), ""},
		{"a person's nested repository", person, "Write", p("vendor/x/.git/config"), ""},
		{"project settings", coder, "Write", p(".claude/settings.local.json"), "daemon_files"},
		{"ctxgraphd config", tester, "Write", p(".claude/ctxgraphd.yaml"), "daemon_files"},
		{"prompt override", coder, "Write", p(".claude/ctxgraphd/prompts/tester-agent.md"), "daemon_files"},
		{"subagent definitions", coder, "Write", p(".claude/agents/helper.md"), "claude_config"},
		{"mcp servers", coder, "Write", p(".mcp.json"), "claude_config"},
		{"session state", coder, "Write", p(".claude/progress/session-state.json"), "session_state"},
		{"own evidence", tester, "Write", p(".claude/progress/evidence/F-001/a.log"), ""},
		{"another feature's evidence", tester, "Write", p(".claude/progress/evidence/F-002/a.log"), "not_your_feature"},
		{"evidence by the coder", coder, "Write", p(".claude/progress/evidence/F-001/a.log"), "coder_sets_evidence"},
		{"source by the tester", tester, "Edit", p("src/F-001.txt"), "tester_edits_source"},
		{"out of scope", coder, "Write", p("README.md"), "out_of_scope"},
		{"a manifest outside the scope is shared", coder, "Edit", p("package.json"), ""},
		{"a nested project's lock too", coder, "Write", p("web/package-lock.json"), ""},
		{"a copy of a manifest is not", coder, "Write", p("package.json.bak"), "out_of_scope"},
		{"nor a module under testdata", coder, "Write", p("testdata/go.mod"), "out_of_scope"},
		{"a tester still changes no manifest", tester, "Write", p("go.sum"), "tester_edits_source"},
		{"the initializer writes tests with the list", init, "Write", p("tests/F-002.sh"), ""},
		{"but not the frozen ones", init, "Write", p("tests/F-001.sh"), "frozen_test"},
		{"a person edits a test", person, "Edit", p("tests/F-001.sh"), ""},
		{"a person writes anywhere", person, "Write", filepath.Join(e.elsewhere, "x"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := PreToolUse(Modes{}, tt.actor, e.state, writePayload(tt.tool, tt.path))
			got := ""
			if d.Blocks() {
				got = d.Code
			}
			if got != tt.code {
				t.Errorf("%s %s by %q: %q, want %q (%+v)", tt.tool, tt.path, tt.actor.Role, got, tt.code, d)
			}
		})
	}
	// Before the list exists the initializer builds the tests freely.
	s := e.state
	s.List, s.Frozen = nil, nil
	if d := PreToolUse(Modes{}, init, s, writePayload("Write", p("tests/F-002.sh"))); d != nil {
		t.Errorf("the initializer's test before the list: %+v", d)
	}
}

func TestReadsOfTheDaemonAreRefused(t *testing.T) {
	e := newWriteEnv(t)
	state := filepath.Join(filepath.Dir(e.dir), "state")
	os.MkdirAll(state, 0o700)
	os.WriteFile(filepath.Join(state, "state.db"), []byte("x"), 0o600)
	os.Symlink(state, filepath.Join(e.dir, "src/st"))
	read := func(path string) *Payload {
		in, _ := json.Marshal(map[string]string{"file_path": path})
		return &Payload{Event: "PreToolUse", ToolName: "Read", ToolInput: in}
	}
	coder := Actor{Role: Coder, Feature: "F-001"}
	for _, path := range []string{filepath.Join(state, "state.db"), filepath.Join(e.dir, "src/st/state.db")} {
		if d := PreToolUse(Modes{}, coder, e.state, read(path)); !d.Blocks() || d.Code != "daemon_files" {
			t.Errorf("Read %s: %+v", path, d)
		}
	}
	if d := PreToolUse(Modes{}, coder, e.state, read(filepath.Join(e.dir, "tests/F-001.sh"))); d != nil {
		t.Errorf("reading a test is fine: %+v", d)
	}
	// An empty entry among the daemon's directories protects nothing, and
	// hides none of those after it.
	s := e.state
	s.Protected = append([]string{""}, s.Protected...)
	if d := PreToolUse(Modes{}, coder, s, read(filepath.Join(state, "state.db"))); !d.Blocks() || d.Code != "daemon_files" {
		t.Errorf("Read %s after an empty protected entry: %+v", filepath.Join(state, "state.db"), d)
	}
	if d := PreToolUse(Modes{}, coder, s, read(filepath.Join(e.dir, "tests/F-001.sh"))); d != nil {
		t.Errorf("an empty protected entry protects everything: %+v", d)
	}
}

// TestChangeSetsAreJudgedLikeWrites: what a run changed by any route meets
// the rule a file tool meets.
func TestChangeSetsAreJudgedLikeWrites(t *testing.T) {
	e := newWriteEnv(t)
	coder := Actor{Role: Coder, Feature: "F-001"}
	tester := Actor{Role: Tester, Feature: "F-001"}
	tests := []struct {
		name    string
		actor   Actor
		changes []Change
		want    []string // gate:code per finding
	}{
		{"honest coder", coder, []Change{{Path: "src/F-001.txt", Kind: "added"}, {Path: "src/util/x.go", Kind: "modified"}}, nil},
		{"coder empties the test", coder, []Change{{Path: "tests/F-001.sh", Kind: "modified"}}, []string{"frozen-tests:frozen_test"}},
		{"coder deletes the test", coder, []Change{{Path: "tests/F-001.sh", Kind: "deleted"}}, []string{"frozen-tests:frozen_test"}},
		{"coder adds a TestMain", coder, []Change{{Path: "src/zz_test.go", Kind: "added"}}, []string{"frozen-tests:protected_test"}},
		{"sed -i outside the scope", coder, []Change{{Path: "src/F-001.txt", Kind: "modified"}, {Path: "lib/other.go", Kind: "modified"}}, []string{"scope:out_of_scope"}},
		{"npm install writes the manifest and lock, outside the scope", coder, []Change{{Path: "src/F-001.txt", Kind: "added"}, {Path: "package.json", Kind: "modified"}, {Path: "package-lock.json", Kind: "added"}}, nil},
		{"go get, in a nested module", coder, []Change{{Path: "tools/go.mod", Kind: "modified"}, {Path: "tools/go.sum", Kind: "added"}}, nil},
		{"pip freeze into requirements-dev.txt", coder, []Change{{Path: "requirements-dev.txt", Kind: "modified"}}, nil},
		{"a manifest's backup is no manifest", coder, []Change{{Path: "requirements.txt.orig", Kind: "added"}}, []string{"scope:out_of_scope"}},
		{"an installed package's manifest is no project's", coder, []Change{{Path: "node_modules/is-number/package.json", Kind: "added"}}, []string{"scope:out_of_scope"}},
		{"a tester's npm install changes the lock", tester, []Change{{Path: "package-lock.json", Kind: "modified"}}, []string{"role-write-policy:tester_edits_source"}},
		{"settings by a script", coder, []Change{{Path: ".claude/settings.local.json", Kind: "added"}}, []string{"role-write-policy:daemon_files"}},
		{"honest tester", tester, nil, nil},
		{"tester fixes the code", tester, []Change{{Path: "src/F-001.txt", Kind: "modified"}}, []string{"role-write-policy:tester_edits_source"}},
		{"tester edits the test", tester, []Change{{Path: "tests/F-001.sh", Kind: "modified"}}, []string{"frozen-tests:frozen_test"}},
		{"a .gitignore that hides the code", coder, []Change{{Path: "src/.gitignore", Kind: "added"}}, []string{"role-write-policy:git_rules"}},
		{".gitattributes by a script", tester, []Change{{Path: ".gitattributes", Kind: "modified"}}, []string{"role-write-policy:git_rules"}},
		{"a person's .gitignore removed", coder, []Change{{Path: ".gitignore", Kind: "deleted"}}, []string{"role-write-policy:git_rules"}},
		{"a nested repository", coder, []Change{{Path: "src/sub/.git", Kind: "added", Refused: "a repository nested in the project"}}, []string{"role-write-policy:git_internals"}},
		{"a .GIT directory", coder, []Change{{Path: "src/.GIT", Kind: "added", Refused: "git refuses the name"}}, []string{"role-write-policy:git_internals"}},
		{"a name git refuses, in scope", coder, []Change{{Path: "src/GIT~1", Kind: "added", Refused: "git refuses the name"}}, []string{"role-write-policy:git_refuses_path"}},
		{"a fifo, by the tester", tester, []Change{{Path: "src/pipe", Kind: "added", Refused: "not a regular file"}}, []string{"role-write-policy:tester_edits_source"}},
		{"a person's odd path", Actor{}, []Change{{Path: "src/GIT~1", Kind: "added", Refused: "git refuses the name"}}, nil},
		{"a file at the size bound", coder, []Change{{Path: "src/F-001.txt", Kind: "added", Size: 10 << 20}}, nil},
		{"a file past the size bound", coder, []Change{{Path: "src/F-001.bin", Kind: "added", Size: 10<<20 + 1}}, []string{"role-write-policy:file_too_large"}},
		{"a person's big file", Actor{}, []Change{{Path: "data/dump.bin", Kind: "added", Size: 1 << 30}}, nil},
	}
	e.state.MaxFileSize = 10 << 20
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range JudgeChanges(Modes{}, tt.actor, e.state, tt.changes) {
				got = append(got, f.Gate+":"+f.Code)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("findings %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("finding %d: %s, want %s", i, got[i], tt.want[i])
				}
			}
		})
	}
	// A gate in warn mode still finds, but does not block; off finds nothing.
	fs := JudgeChanges(Modes{FrozenTests: Warn}, coder, e.state, []Change{{Path: "tests/F-001.sh", Kind: "modified"}})
	if len(fs) != 1 || fs[0].Mode != Warn {
		t.Errorf("warn mode: %+v", fs)
	}
	if fs := JudgeChanges(Modes{FrozenTests: Off}, coder, e.state, []Change{{Path: "tests/F-001.sh", Kind: "modified"}}); len(fs) != 0 {
		t.Errorf("off: %+v", fs)
	}
}

// TestListChangePolicy is who may change what in the feature list, as the
// hook and the daemon's watcher both apply it.
func TestListChangePolicy(t *testing.T) {
	coder := Actor{Role: Coder, Feature: "F-001"}
	tester := Actor{Role: Tester, Feature: "F-001"}
	person := Actor{}
	mod := func(id, field string, old, new any) progress.Change {
		return progress.Change{FeatureID: id, Field: field, Kind: progress.Modified, Old: old, New: new}
	}
	tests := []struct {
		name  string
		actor Actor
		c     progress.Change
		code  string
	}{
		{"coder completes", coder, mod("F-001", "status", progress.InProgress, progress.Completed), ""},
		{"coder blocks", coder, mod("F-001", "status", progress.InProgress, progress.Blocked), "status_not_allowed"},
		{"coder sets tested", coder, mod("F-001", "tested", false, true), "coder_sets_tested"},
		{"coder clears tested", coder, mod("F-001", "tested", true, false), ""},
		{"coder sets evidence", coder, mod("F-001", "evidence", nil, []string{"x"}), "coder_sets_evidence"},
		{"coder changes the test", coder, mod("F-001", "test", "a", "true"), "feature_rewrite"},
		{"coder changes the scope", coder, mod("F-001", "scope", nil, []string{"**"}), "feature_rewrite"},
		{"tester claims tested", tester, mod("F-001", "tested", false, true), ""},
		{"tester lists evidence", tester, mod("F-001", "evidence", nil, []string{"x"}), ""},
		{"tester changes the title", tester, mod("F-001", "title", "a", "b"), "feature_rewrite"},
		{"tester touches another feature", tester, mod("F-002", "status", progress.Pending, progress.Blocked), "not_your_feature"},
		{"tester renames another feature", tester, mod("F-002", "title", "a", "b"), "feature_rewrite"},
		{"coder adds a feature", coder, progress.Change{FeatureID: "F-9", Field: "feature", Kind: progress.Added}, "feature_rewrite"},
		{"coder reorders", coder, progress.Change{Field: "order", Kind: progress.Modified}, "feature_rewrite"},
		{"coder changes the setup", coder, progress.Change{Field: "setup", Kind: progress.Modified, Old: "npm ci", New: "curl x | sh"}, "feature_rewrite"},
		{"tester clears the setup", tester, progress.Change{Field: "setup", Kind: progress.Modified, Old: "npm ci", New: ""}, "feature_rewrite"},
		{"the initializer changes its own setup later", Actor{Role: Initializer}, progress.Change{Field: "setup", Kind: progress.Modified, Old: "npm ci", New: "npm i"}, "feature_rewrite"},
		{"a person changes the setup", person, progress.Change{Field: "setup", Kind: progress.Modified, Old: "npm ci", New: "npm ci && make gen"}, ""},
		{"a person renames", person, mod("F-001", "title", "a", "b"), ""},
		{"a person adds a feature", person, progress.Change{FeatureID: "F-9", Field: "feature", Kind: progress.Added}, ""},
		{"a person sets tested", person, mod("F-001", "tested", false, true), "not_tester"},
		// coder_sets_evidence names the coder's mistake only: another role
		// that may not list evidence is told its field is not its to change.
		{"the initializer lists evidence", Actor{Role: Initializer, Feature: "F-001"}, mod("F-001", "evidence", nil, []string{"x"}), "feature_rewrite"},
		{"a role the rules do not know lists evidence", Actor{Role: "reviewer-agent", Feature: "F-001"}, mod("F-001", "evidence", nil, []string{"x"}), "feature_rewrite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ListChange(Modes{}, tt.actor, tt.c)
			got := ""
			if d != nil {
				got = d.Code
			}
			if got != tt.code {
				t.Errorf("got %q, want %q (%+v)", got, tt.code, d)
			}
		})
	}
}

func TestTheFirstListNeedsTestCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude/progress/feature-list.json")
	first := `{"version": 1, "features": [{"id": "F-001", "title": "a", "test": "sh tests/a.sh"}, {"id": "F-002", "title": "b"}]}`
	in, _ := json.Marshal(map[string]string{"file_path": path, "content": first})
	p := &Payload{Event: "PreToolUse", ToolName: "Write", ToolInput: in}
	s := State{ProjectDir: dir}
	d := PreToolUse(Modes{}, Actor{Role: Initializer}, s, p)
	if !d.Blocks() || d.Gate != RedBeforeGreen || d.Code != "no_test_command" {
		t.Fatalf("a first list with a feature without a test: %+v", d)
	}
	if d := PreToolUse(Modes{RedBeforeGreen: Off}, Actor{Role: Initializer}, s, p); d != nil {
		t.Fatalf("with red-before-green off: %+v", d)
	}
	if d := PreToolUse(Modes{}, Actor{}, s, p); d != nil {
		t.Fatalf("a person's list: %+v", d)
	}
}

// TestTheFirstListIsJudgedFeatureByFeature: the first list is the
// initializer's (or a person's); no feature in it is tested, and for the
// initializer every feature has a test command, blank not counting.
func TestTheFirstListIsJudgedFeatureByFeature(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude/progress/feature-list.json")
	const (
		complete = `{"version": 1, "features": [{"id": "F-001", "title": "a", "test": "sh tests/a.sh"}, {"id": "F-002", "title": "b", "test": "sh tests/b.sh"}]}`
		blank    = `{"version": 1, "features": [{"id": "F-001", "title": "a", "test": "sh tests/a.sh"}, {"id": "F-002", "title": "b", "test": "  "}]}`
		tested   = `{"version": 1, "features": [{"id": "F-001", "title": "a", "test": "sh tests/a.sh", "tested": true}]}`
	)
	initializer, coder := Actor{Role: Initializer}, Actor{Role: Coder, Feature: "F-001"}
	tests := []struct {
		name    string
		actor   Actor
		content string
		gate    string // "" = allowed
		code    string
		message string
	}{
		{"every feature has a test", initializer, complete, "", "", ""},
		{"a blank test command is none", initializer, blank, RedBeforeGreen, "no_test_command",
			"F-002 has no test command, and a feature without one can never be accepted as tested"},
		{"nothing is tested before a test ran", initializer, tested, TestedNeedsEvidence, "tested_before_test",
			"F-001 cannot be tested before any test ran"},
		{"not even by a person", Actor{}, tested, TestedNeedsEvidence, "tested_before_test",
			"F-001 cannot be tested before any test ran"},
		{"a coder does not write the first list", coder, complete, RoleWritePolicy, "feature_rewrite",
			"only the initializer writes the first feature list"},
		{"a person's list needs no test commands", Actor{}, blank, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, _ := json.Marshal(map[string]string{"file_path": path, "content": tt.content})
			d := PreToolUse(Modes{}, tt.actor, State{ProjectDir: dir}, &Payload{Event: "PreToolUse", ToolName: "Write", ToolInput: in})
			if tt.gate == "" {
				if d != nil {
					t.Fatalf("refused: %+v", d)
				}
				return
			}
			if d == nil || d.Gate != tt.gate || d.Code != tt.code || d.Message != tt.message {
				t.Fatalf("got %+v, want %s/%s: %q", d, tt.gate, tt.code, tt.message)
			}
		})
	}
}

// TestTestNameInMessages: a feature's test is quoted as code; a feature
// without one is told to run any test command.
func TestTestNameInMessages(t *testing.T) {
	for test, want := range map[string]string{"": "a test command", "sh tests/a.sh": "`sh tests/a.sh`"} {
		if got := TestName(test); got != want {
			t.Errorf("TestName(%q) = %q, want %q", test, got, want)
		}
	}
}

// TestWritableDirectoriesMayBeNamedThroughALink: a writable directory
// given through a symlink (/tmp on macOS is /private/tmp) still allows
// the writes that land in it, and only those.
func TestWritableDirectoriesMayBeNamedThroughALink(t *testing.T) {
	e := newWriteEnv(t)
	link := filepath.Join(filepath.Dir(e.scratch), "tmp-link")
	if err := os.Symlink(e.scratch, link); err != nil {
		t.Fatal(err)
	}
	s := e.state
	s.Writable = []string{link}
	coder := Actor{Role: Coder, Feature: "F-001"}
	for path, code := range map[string]string{
		filepath.Join(e.scratch, "notes.txt"):   "",
		filepath.Join(link, "notes.txt"):        "",
		filepath.Join(e.elsewhere, "notes.txt"): "outside_project",
	} {
		d := PreToolUse(Modes{}, coder, s, writePayload("Write", path))
		got := ""
		if d != nil {
			got = d.Code
		}
		if got != code {
			t.Errorf("Write %s: %q, want %q (%+v)", path, got, code, d)
		}
	}
}

// CLAUDE.md (and CLAUDE.local.md), at the project's root or in any of its
// directories, is read by Claude Code in every later session, the
// daemon's agents' and people's: like .claude/settings.json it configures
// every later run, and its marked section is the lessons a person
// promoted. No agent writes it, by a file tool or by any other route; a
// person does.
func TestClaudeMdIsNoAgentsToWrite(t *testing.T) {
	e := newWriteEnv(t)
	p := func(rel string) string { return filepath.Join(e.dir, rel) }
	init := Actor{Role: Initializer, Run: "run-000001"}
	unscoped := Actor{Role: Coder, Feature: "F-404", Run: "run-000002"} // a feature without a scope
	for _, tt := range []struct {
		actor Actor
		rel   string
		want  string
	}{
		{init, "CLAUDE.md", "claude_config"},
		{unscoped, "CLAUDE.md", "claude_config"},
		{unscoped, "CLAUDE.local.md", "claude_config"},
		{unscoped, "src/CLAUDE.md", "claude_config"},
		{init, "docs/deep/CLAUDE.local.md", "claude_config"},
		{unscoped, "docs/CLAUDE.md.txt", ""},
		{unscoped, "src/NOTCLAUDE.md", ""},
		{Actor{}, "CLAUDE.md", ""},
	} {
		got := ""
		if d := PreToolUse(Modes{}, tt.actor, e.state, writePayload("Write", p(tt.rel))); d.Blocks() {
			got = d.Code
		}
		if got != tt.want {
			t.Errorf("Write %s by %q: %q, want %q", tt.rel, tt.actor.Role, got, tt.want)
		}
		got = ""
		for _, f := range JudgeChanges(Modes{}, tt.actor, e.state, []Change{{Path: tt.rel, Kind: "modified"}}) {
			got = f.Code
		}
		if got != tt.want {
			t.Errorf("a change of %s by %q found in the tree: %q, want %q", tt.rel, tt.actor.Role, got, tt.want)
		}
	}
}
