package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/agents"
	"github.com/ctxgraphd/ctxgraphd/progress"
)

// Gate names (contract: SPEC section 5).
const (
	TestedNeedsEvidence = "tested-needs-evidence"
	TesterMustTest      = "tester-must-test"
	RoleWritePolicy     = "role-write-policy"
	Scope               = "scope"
	LogReadLimit        = "log-read-limit"
	HooksLive           = "hooks-live"
)

// Gates lists every built-in gate.
var Gates = []string{TestedNeedsEvidence, TesterMustTest, RoleWritePolicy, Scope, LogReadLimit, HooksLive}

// Mode is how a gate acts: enforce blocks, warn lets the action through and
// records it, off does nothing.
type Mode string

// Modes of a gate.
const (
	Enforce Mode = "enforce"
	Warn    Mode = "warn"
	Off     Mode = "off"
)

// Modes maps gate names to modes; a gate not in the map is enforced.
type Modes map[string]Mode

// Of returns the mode of gate.
func (m Modes) Of(gate string) Mode {
	if v, ok := m[gate]; ok {
		return v
	}
	return Enforce
}

// Roles, as in CTXGRAPH_AGENT, named once in package agents. An empty role
// is an interactive session that runs the hooks installed by
// `ctxgraphd init --install-hooks`.
const (
	Initializer = string(agents.Initializer)
	Coder       = string(agents.Coder)
	Tester      = string(agents.Tester)
)

// Actor is who acts: from the CTXGRAPH_* environment of the run.
type Actor struct {
	Role    string `json:"role"`
	Feature string `json:"feature,omitempty"`
	Run     string `json:"run,omitempty"`
}

// TestRecord is one Bash command of a run, as the PostToolUse and
// PostToolUseFailure hooks saw it.
type TestRecord struct {
	Run          string    `json:"run"`
	Feature      string    `json:"feature,omitempty"`
	Command      string    `json:"command"`
	ExitCode     int       `json:"exit_code"`
	OutputDigest string    `json:"output_digest"`
	Time         time.Time `json:"time"`
	IsTest       bool      `json:"is_test"`
}

// Passed reports whether the command exited 0.
func (r TestRecord) Passed() bool { return r.ExitCode == 0 }

// State is what the gates know besides the payload.
type State struct {
	ProjectDir string
	// List is the canonical feature list (the daemon's) or, when the hook
	// decides alone, the one on disk. Nil before the initializer wrote one.
	List *progress.List
	// Commands are the Bash commands this run has run so far.
	Commands []TestRecord
	// StopBlocks is how many times this run's Stop was blocked already.
	StopBlocks int
	// Offline: the daemon did not answer; tested:true fails closed.
	Offline bool
	// Protected are directories of the daemon (state, socket) no agent
	// may touch.
	Protected []string
	// MaxReadBytes is the log-read-limit threshold; 0 means 256 KiB.
	MaxReadBytes int64
	// ReadFile reads a file of the project; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// MaxStopBlocks is how often tester-must-test blocks a Stop before it lets
// the run end (Claude Code gives up after 8 consecutive blocks itself; the
// attempt then fails for want of a verdict).
const MaxStopBlocks = 7

// Decision is a gate's verdict on an action it does not let through as is.
type Decision struct {
	Gate       string `json:"gate"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
	Mode       Mode   `json:"mode"`
}

// Denial is the structured reason the model reads (contract: SPEC section 5).
type Denial struct {
	Status     string `json:"status"`
	Gate       string `json:"gate"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

// Denial renders d as the model sees it.
func (d *Decision) Denial() Denial {
	return Denial{Status: "blocked", Gate: d.Gate, Code: d.Code, Message: d.Message, Suggestion: d.Suggestion}
}

// Blocks reports whether the action is refused.
func (d *Decision) Blocks() bool { return d != nil && d.Mode == Enforce }

// decide builds a decision for gate in its configured mode; off gates
// decide nothing.
func decide(m Modes, gate, code, msg, suggestion string) *Decision {
	mode := m.Of(gate)
	if mode == Off {
		return nil
	}
	return &Decision{Gate: gate, Code: code, Message: msg, Suggestion: suggestion, Mode: mode}
}

// PreToolUse judges a tool call before it runs. Nil means allowed.
func PreToolUse(m Modes, a Actor, s State, p *Payload) *Decision {
	in := p.Input()
	switch p.ToolName {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
		path := in.FilePath
		if p.ToolName == "NotebookEdit" {
			path = in.NotebookPath
		}
		return judgeWrite(m, a, s, p.ToolName, s.abs(path), in)
	case "Read":
		return judgeRead(m, s, s.abs(in.FilePath), in)
	case "Bash":
		return judgeBash(m, a, s, in.Command)
	}
	return nil
}

// Stop judges a Stop or SubagentStop: a tester may not end before it ran a
// test.
func Stop(m Modes, a Actor, s State, p *Payload) *Decision {
	if a.Role != Tester {
		return nil
	}
	for _, c := range s.Commands {
		if c.IsTest {
			return nil
		}
	}
	if s.StopBlocks >= MaxStopBlocks {
		return nil // let it end: the attempt fails without a verdict
	}
	test := "the feature's test command"
	if f := s.feature(a.Feature); f != nil && f.Test != "" {
		test = "`" + f.Test + "`"
	}
	return decide(m, TesterMustTest, "no_test_run",
		fmt.Sprintf("%s may not stop before it has run a test (block %d of %d)", a.Role, s.StopBlocks+1, MaxStopBlocks),
		fmt.Sprintf("run %s with the Bash tool, save its output under .claude/progress/evidence/%s/, then give your verdict", test, a.Feature))
}

func judgeRead(m Modes, s State, path string, in ToolInput) *Decision {
	if in.Limit != nil || in.Offset != nil || path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Size() <= s.maxRead() {
		return nil
	}
	return decide(m, LogReadLimit, "file_too_large",
		fmt.Sprintf("%s is %d bytes; reading it whole would flood the context", s.rel(path), fi.Size()),
		"use Grep for what you need, or Read with offset and limit (e.g. the last 200 lines)")
}

var catRe = regexp.MustCompile(`(?:^|[;&|]\s*)cat\s+([^\s;&|<>]+)\s*(?:$|[;&|])`)

func judgeBash(m Modes, a Actor, s State, cmd string) *Decision {
	if d := s.touchesDaemon(m, cmd); d != nil {
		return d
	}
	if strings.Contains(cmd, progress.SessionStateFile) && writes(cmd) {
		return decide(m, RoleWritePolicy, "session_state",
			"session-state.json is written by the daemon only", "read it if you need the state; do not write it")
	}
	if strings.Contains(cmd, progress.FeatureListFile) && writes(cmd) {
		return decide(m, RoleWritePolicy, "bash_writes_feature_list",
			"changes to feature-list.json go through the Edit or Write tool, where the gates can check them",
			"use the Edit tool to change your own feature's entry")
	}
	for _, target := range bashWriteTargets(cmd) {
		if d := judgeProjectWrite(m, a, s, s.rel(s.abs(target))); d != nil {
			return d
		}
	}
	if mm := catRe.FindStringSubmatch(cmd); mm != nil {
		path := s.abs(mm[1])
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Size() > s.maxRead() {
			return decide(m, LogReadLimit, "file_too_large",
				fmt.Sprintf("%s is %d bytes; printing it whole would flood the context", s.rel(path), fi.Size()),
				fmt.Sprintf("use grep, or tail -n 200 %s, or sed -n '1,200p' %s", mm[1], mm[1]))
		}
	}
	return nil
}

// redirectRe and teeRe find the files a shell command plainly writes: the
// target of >, >>, 2>, &> and of tee. What a script or an interpreter
// writes cannot be read off the command; for the feature list the watcher
// catches it, and the tester's verdict does not depend on any of it.
var (
	redirectRe = regexp.MustCompile(`(?:^|[^<>=\-])(?:[0-9]|&)?>>?[ \t]*([^\s;&|<>()]+)`)
	teeRe      = regexp.MustCompile(`\btee\b((?:[ \t]+-[a-z-]+)*)((?:[ \t]+[^\s;&|<>()-][^\s;&|<>()]*)+)`)
	quotedRe   = regexp.MustCompile(`'[^']*'|"(?:[^"\\]|\\.)*"`)
	touchRe    = regexp.MustCompile(`\btouch((?:[ \t]+[^\s;&|<>()]+)+)`)
)

// bashWriteTargets lists the paths a command visibly writes, skipping
// file descriptors and paths that depend on the shell's expansion.
func bashWriteTargets(cmd string) []string {
	// A here-document's body is data, not commands: judge the line that
	// opens it and nothing after.
	if i := strings.Index(cmd, "<<"); i >= 0 {
		if j := strings.IndexByte(cmd[i:], '\n'); j >= 0 {
			cmd = cmd[:i+j]
		}
	}
	// A > inside quotes is text ("a > b"), not a redirection.
	cmd = quotedRe.ReplaceAllString(cmd, "''")
	var out []string
	add := func(t string) {
		t = strings.Trim(t, `'"`)
		if t == "" || strings.HasPrefix(t, "&") || strings.HasPrefix(t, "-") || strings.ContainsAny(t, "$`*?[{~") {
			return
		}
		out = append(out, t)
	}
	for _, m := range redirectRe.FindAllStringSubmatch(cmd, -1) {
		add(m[1])
	}
	for _, m := range teeRe.FindAllStringSubmatch(cmd, -1) {
		for _, t := range strings.Fields(m[2]) {
			add(t)
		}
	}
	for _, m := range touchRe.FindAllStringSubmatch(cmd, -1) {
		for _, t := range strings.Fields(m[1]) {
			add(t)
		}
	}
	return out
}

// writeRe matches the shell idioms that change files. It errs on the side
// of blocking: a read-only command that looks like a write is rare, and the
// agent is told to use the Edit tool instead.
var writeRe = regexp.MustCompile(`>|\btee\b|\bsed\s+-i|\bperl\s+-[a-z]*i|\bmv\b|\bcp\b|\brm\b|\btruncate\b|\bdd\b|\bpython3?\b|\bnode\b|\bruby\b|\bjq\b.*>|\bln\b|\binstall\b|\bchmod\b|\btouch\b`)

func writes(cmd string) bool { return writeRe.MatchString(cmd) }

func (s State) touchesDaemon(m Modes, text string) *Decision {
	for _, dir := range s.Protected {
		if dir != "" && strings.Contains(text, dir) {
			return decide(m, RoleWritePolicy, "daemon_files",
				fmt.Sprintf("%s belongs to the ctxgraphd daemon", dir), "leave the daemon's state alone; ask through your final report")
		}
	}
	return nil
}

func judgeWrite(m Modes, a Actor, s State, tool, path string, in ToolInput) *Decision {
	if path == "" {
		return nil
	}
	if d := s.touchesDaemon(m, path); d != nil {
		return d
	}
	rel := s.rel(path)
	switch {
	case rel == filepath.Join(".claude", "progress", progress.SessionStateFile):
		return decide(m, RoleWritePolicy, "session_state",
			"session-state.json is written by the daemon only", "read it if you need the state; do not write it")
	case rel == filepath.Join(".claude", "progress", progress.FeatureListFile):
		return judgeFeatureList(m, a, s, tool, path, in)
	case rel == filepath.Join(".claude", "ctxgraphd.yaml") || strings.HasPrefix(rel, filepath.Join(".claude", "ctxgraphd")+string(filepath.Separator)) ||
		rel == filepath.Join(".claude", "settings.json") || rel == filepath.Join(".claude", "settings.local.json"):
		if a.Role != "" {
			return decide(m, RoleWritePolicy, "daemon_files",
				fmt.Sprintf("%s configures ctxgraphd and Claude Code; agents do not change it", rel), "report what you need changed in your final message")
		}
		return nil
	}
	return judgeProjectWrite(m, a, s, rel)
}

// judgeProjectWrite holds a write to a file of the project to the writer's
// role: testers write evidence only, coding agents stay in their feature's
// scope. It serves the Write and Edit tools and the files a Bash command
// visibly writes.
func judgeProjectWrite(m Modes, a Actor, s State, rel string) *Decision {
	inside := rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
	if !inside {
		return nil // outside the project: scratch space is the agent's business
	}
	switch a.Role {
	case Tester:
		if !strings.HasPrefix(rel, filepath.Join(".claude", "progress", progress.EvidenceDir)+string(filepath.Separator)) {
			return decide(m, RoleWritePolicy, "tester_edits_source",
				fmt.Sprintf("a tester does not change the project (%s); it judges it", rel),
				fmt.Sprintf("write test output under .claude/progress/evidence/%s/ and report what is wrong; the coding agent will fix it", a.Feature))
		}
	case Coder:
		f := s.feature(a.Feature)
		if f == nil || len(f.Scope) == 0 || strings.HasPrefix(rel, ".claude"+string(filepath.Separator)) {
			return nil
		}
		slashed := filepath.ToSlash(rel)
		for _, glob := range f.Scope {
			if ok, _ := doublestar.Match(strings.TrimPrefix(filepath.ToSlash(glob), "./"), slashed); ok {
				return nil
			}
		}
		return decide(m, Scope, "out_of_scope",
			fmt.Sprintf("%s is outside the scope of %s (%s)", rel, a.Feature, strings.Join(f.Scope, ", ")),
			"change only the files of your feature; if the feature needs more, say so in your final report")
	}
	return nil
}

// judgeFeatureList computes the file as the tool would leave it and checks
// every change against who may make it.
func judgeFeatureList(m Modes, a Actor, s State, tool, path string, in ToolInput) *Decision {
	var next []byte
	switch tool {
	case "Write":
		next = []byte(in.Content)
	case "Edit", "MultiEdit":
		cur, err := s.read(path)
		if err != nil {
			return nil // the tool will fail by itself
		}
		text := string(cur)
		edits := in.Edits
		if tool == "Edit" {
			edits = append(edits[:0:0], struct {
				OldString  string `json:"old_string"`
				NewString  string `json:"new_string"`
				ReplaceAll bool   `json:"replace_all"`
			}{in.OldString, in.NewString, in.ReplaceAll})
		}
		for _, e := range edits {
			if e.OldString == "" || !strings.Contains(text, e.OldString) {
				return nil // the tool will refuse it
			}
			if e.ReplaceAll {
				text = strings.ReplaceAll(text, e.OldString, e.NewString)
			} else {
				text = strings.Replace(text, e.OldString, e.NewString, 1)
			}
		}
		next = []byte(text)
	default:
		return decide(m, RoleWritePolicy, "bash_writes_feature_list", "feature-list.json is changed with Edit or Write only", "use the Edit tool")
	}
	l, err := progress.Parse(next)
	if err != nil {
		return decide(m, RoleWritePolicy, "invalid_feature_list",
			fmt.Sprintf("the change would leave an invalid feature list: %v", err), "keep the file valid JSON in the version 1 format; change only your feature's fields")
	}
	if s.List == nil {
		for _, f := range l.Features {
			if f.Tested {
				return decide(m, TestedNeedsEvidence, "tested_before_test",
					fmt.Sprintf("%s cannot be tested before any test ran", f.ID), "write every feature with \"tested\": false")
			}
		}
		if a.Role != Initializer && a.Role != "" {
			return decide(m, RoleWritePolicy, "feature_rewrite", "only the initializer writes the first feature list", "report what is missing instead")
		}
		return nil
	}
	for _, c := range progress.Diff(s.List, l) {
		if d := judgeChange(m, a, s, c, l); d != nil {
			return d
		}
	}
	return nil
}

func judgeChange(m Modes, a Actor, s State, c progress.Change, next *progress.List) *Decision {
	fixed := "ids, titles, steps, tests, scopes and dependencies are fixed once the initializer wrote them"
	if c.Kind != progress.Modified || (c.Field != "status" && c.Field != "tested" && c.Field != "evidence") {
		if a.Role == "" && c.Field != "tested" {
			return nil // a person at an interactive session directs the list
		}
		what := fmt.Sprintf("%s %s", c.FeatureID, c.Field)
		switch c.Kind {
		case progress.Added:
			what = "adding feature " + c.FeatureID
		case progress.Removed:
			what = "removing feature " + c.FeatureID
		}
		return decide(m, RoleWritePolicy, "feature_rewrite", fmt.Sprintf("%s: %s", what, fixed),
			"change only the status, tested and evidence of your own feature; the user changes the list with ctxgraphd ctl")
	}
	if a.Role != "" && c.FeatureID != a.Feature {
		return decide(m, RoleWritePolicy, "not_your_feature",
			fmt.Sprintf("%s may change only %s, not %s", a.Role, a.Feature, c.FeatureID), "leave other features to their own runs")
	}
	switch c.Field {
	case "status":
		st, _ := c.New.(progress.Status)
		if s, ok := c.New.(string); ok {
			st = progress.Status(s)
		}
		if a.Role == Coder || a.Role == Tester {
			if st != progress.InProgress && st != progress.Completed {
				return decide(m, RoleWritePolicy, "status_not_allowed",
					fmt.Sprintf("%s may set status to in_progress or completed, not %q", a.Role, st), "the daemon decides when a feature is blocked")
			}
		}
	case "evidence":
		if a.Role == Coder {
			return decide(m, RoleWritePolicy, "coder_sets_evidence", "evidence is the tester's to write", "run the feature's test yourself if you like, but leave evidence and tested to the tester")
		}
	case "tested":
		now, _ := c.New.(bool)
		if !now {
			return nil
		}
		return judgeTested(m, a, s, next)
	}
	return nil
}

func judgeTested(m Modes, a Actor, s State, next *progress.List) *Decision {
	if a.Role != Tester {
		code, gate := "not_tester", TestedNeedsEvidence
		if a.Role == Coder {
			code, gate = "coder_sets_tested", RoleWritePolicy
		}
		return decide(m, gate, code,
			fmt.Sprintf("only the tester run of %s may set tested: true", a.Feature), "set status to completed; a tester agent will verify the feature")
	}
	if s.Offline {
		return decide(m, TestedNeedsEvidence, "daemon_unreachable",
			"the ctxgraphd daemon is not answering, so no test run can be verified; tested: true is refused until it is back",
			"leave tested false and end with your report; the feature will be verified again")
	}
	f := s.feature(a.Feature)
	test := ""
	if f != nil {
		test = f.Test
	}
	var ran, passed bool
	for _, c := range s.Commands {
		if test != "" && !MatchesTest(c.Command, test) {
			continue
		}
		if test == "" && !c.IsTest {
			continue
		}
		ran = true
		if c.Passed() {
			passed = true
		}
	}
	want := "a test command"
	if test != "" {
		want = "`" + test + "`"
	}
	switch {
	case !ran:
		return decide(m, TestedNeedsEvidence, "no_test_run",
			fmt.Sprintf("tested: true for %s needs a passing run of %s in this session, and there was none", a.Feature, want),
			fmt.Sprintf("run %s with the Bash tool first", want))
	case !passed:
		return decide(m, TestedNeedsEvidence, "test_failed",
			fmt.Sprintf("%s did not pass in this session, so %s is not tested", want, a.Feature),
			"leave tested false and report what failed; the coding agent will fix it")
	}
	if nf := next.Feature(a.Feature); nf == nil || len(nf.Evidence) == 0 {
		return decide(m, TestedNeedsEvidence, "no_evidence",
			fmt.Sprintf("tested: true for %s needs evidence", a.Feature),
			fmt.Sprintf("save the test output under .claude/progress/evidence/%s/ and list the file in the feature's evidence", a.Feature))
	}
	return nil
}

// testRe recognises the common test runners, for features without a test
// command of their own.
var testRe = regexp.MustCompile(`\bgo\s+test\b|\bpytest\b|\bpython3?\s+-m\s+(pytest|unittest)\b|\b(npm|yarn|pnpm)\s+(run\s+)?test\b|\bcargo\s+(test|nextest)\b|\bmake\s+(test|check)\b|\bctest\b|\bmvn\b.*\btest\b|\bgradle\w*\s+test\b|\brspec\b|\bphpunit\b|\bjest\b|\bvitest\b|\bmocha\b|\bbats\b|\btox\b|(^|[\s/])tests?/\S+`)

// IsTestCommand reports whether cmd runs tests: the feature's own test
// command, or a known test runner.
func IsTestCommand(cmd, featureTest string) bool {
	if featureTest != "" && MatchesTest(cmd, featureTest) {
		return true
	}
	return testRe.MatchString(cmd)
}

// MatchesTest reports whether cmd runs test: the same command, give or take
// whitespace, alone or as part of a compound command.
func MatchesTest(cmd, test string) bool {
	c, t := strings.Join(strings.Fields(cmd), " "), strings.Join(strings.Fields(test), " ")
	return t != "" && (c == t || strings.Contains(c, t))
}

func (s State) feature(id string) *progress.Feature {
	if s.List == nil {
		return nil
	}
	return s.List.Feature(id)
}

func (s State) abs(p string) string {
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.ProjectDir, p)
	}
	return filepath.Clean(p)
}

func (s State) rel(p string) string {
	r, err := filepath.Rel(s.ProjectDir, p)
	if err != nil {
		return p
	}
	return r
}

func (s State) read(p string) ([]byte, error) {
	if s.ReadFile != nil {
		return s.ReadFile(p)
	}
	return os.ReadFile(p)
}

func (s State) maxRead() int64 {
	if s.MaxReadBytes > 0 {
		return s.MaxReadBytes
	}
	return 256 << 10
}
