package scriptedmodel

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// outsideScenario has a reaches-out coder whose other feature is F-072,
// and two links-evidence testers.
func outsideScenario() Scenario {
	return Scenario{Name: "outside", Features: []FeatureScript{
		{ID: "F-071", Title: "Reaches out", Behavior: ReachesOut, Reaches: []string{"/tmp/ctxgraphd-verify-1/checkouts/t/tree"}},
		{ID: "F-072", Title: "Links evidence", Behavior: Pass, Tester: LinksEvidence},
	}}
}

// outsideResults answers as the CLI does with the gates in place: what a
// run writes outside its lane is refused as outside_project, the lookup
// says where the project and the temp directory are, and the list reads.
func outsideResults(t *testing.T, lane string) func(move) (string, bool) {
	t.Helper()
	list, err := initialFeatureList(outsideScenario())
	if err != nil {
		t.Fatal(err)
	}
	return func(m move) (string, bool) {
		path, _ := m.in["file_path"].(string)
		switch {
		case m.tool == "Bash" && strings.Contains(m.in["command"].(string), "git remote get-url origin"):
			return "origin=/home/dev/proj\ntmp=/tmp/cgt-1/claude-0\n", false
		case (m.tool == "Write" || m.tool == "Edit") && !strings.HasPrefix(path, lane+"/") && !strings.HasPrefix(path, "/tmp/cgt-1/"):
			return reason(m.tool, "role-write-policy", "outside_project"), true
		case m.tool == "Read" && strings.HasSuffix(path, featureListPath):
			return numbered(list), false
		case m.tool == "Read":
			return missing, true
		}
		return written, false
	}
}

func TestReachesOutReachesThenWorks(t *testing.T) {
	const lane = "/home/dev/state/ctxgraphd/lanes/p/F-071/wt"
	other := "/home/dev/state/ctxgraphd/lanes/p/F-072/wt"
	moves, final := playOut(t, New(outsideScenario(), nil), newConvoIn(lane, codeCmd("F-071", 1)), outsideResults(t, lane))
	var got []string
	for _, m := range moves {
		if p, ok := m.in["file_path"].(string); ok {
			got = append(got, m.tool+" "+p)
		} else {
			got = append(got, m.tool)
		}
	}
	want := []string{
		"Bash",
		"Write " + other + "/" + ReachedFile("F-071"),
		"Write /home/dev/proj/" + ReachedFile("F-071"),
		"Write /tmp/ctxgraphd-verify-1/checkouts/t/tree/" + ReachedFile("F-071"),
		"Edit " + other + "/tests/F-072.sh",
		"Edit /home/dev/proj/tests/F-072.sh",
		"Write /tmp/cgt-1/claude-0/" + ScratchFile("F-071"),
		"Read " + lane + "/src/F-071.txt", "Write " + lane + "/src/F-071.txt",
		"Read " + lane + "/" + featureListPath, "Write " + lane + "/" + featureListPath,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := moves[0].in["command"].(string); !strings.Contains(c, other+"/tests/F-072.sh") {
		t.Errorf("the lookup %q does not wait for the other lane's clone %s", c, other)
	}
	if e := moves[4].in; e["old_string"] != "#!/bin/sh\n" || e["new_string"] != OpenedTest {
		t.Errorf("the Edit of the other feature's test: %v, want its shebang followed by exit 0", e)
	}
	if !strings.HasPrefix(final, "Implemented F-071") {
		t.Errorf("final text %q", final)
	}
	// A later attempt is honest.
	moves, _ = playOut(t, New(outsideScenario(), nil), newConvoIn(lane, codeCmd("F-071", 2)), outsideResults(t, lane))
	if len(moves) != 4 || moves[0].tool != "Read" {
		t.Errorf("attempt 2: %v, want the honest four calls", moves)
	}
}

func TestLinksEvidenceLinksThenIsHonest(t *testing.T) {
	list, err := initialFeatureList(outsideScenario())
	if err != nil {
		t.Fatal(err)
	}
	results := func(testFails bool) func(move) (string, bool) {
		return func(m move) (string, bool) {
			switch {
			case m.tool == "Bash" && m.in["command"] == "sh tests/F-072.sh":
				if testFails {
					return "Exit code 1\n", true
				}
				return "", false
			case m.tool == "Read":
				return numbered(list), false
			}
			return written, false
		}
	}
	for _, tt := range []struct {
		name      string
		attempt   int
		testFails bool
		want      []string
		evidence  []string
	}{
		{"attempt 1, the test passes: kept, linked, claimed", 1, false,
			[]string{"Bash sh tests/F-072.sh", "Write " + EvidenceLog("F-072"), "Bash " + linkEvidence(projectDir, "F-072"), "Read " + featureListPath, "Write " + featureListPath},
			[]string{EvidenceLog("F-072")}},
		{"attempt 1, the test fails: linked, failure said", 1, true,
			[]string{"Bash sh tests/F-072.sh", "Bash " + linkEvidence(projectDir, "F-072")}, nil},
		{"attempt 2: honest, its evidence where the links were", 2, false,
			[]string{"Bash sh tests/F-072.sh", "Write " + EvidenceLog("F-072"), "Write " + EvidenceLogs("F-072") + "/attempt-2.log", "Read " + featureListPath, "Write " + featureListPath},
			[]string{EvidenceLog("F-072"), EvidenceLogs("F-072") + "/attempt-2.log"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			moves, final := playOut(t, New(outsideScenario(), nil), newConvo(testCmd("F-072", tt.attempt)), results(tt.testFails))
			var got []string
			for _, m := range moves {
				got = append(got, m.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.testFails {
				if !strings.Contains(final, "F-072 failed") {
					t.Errorf("final text %q, want the failure", final)
				}
				return
			}
			written := moves[len(moves)-1].in["content"].(string)
			for _, e := range tt.evidence {
				if !strings.Contains(written, `"`+e+`"`) {
					t.Errorf("the verdict does not name %s as evidence:\n%s", e, written)
				}
			}
			if !strings.Contains(written, `"tested": true`) {
				t.Errorf("the verdict does not say tested:\n%s", written)
			}
		})
	}
}

// The links a links-evidence tester makes lead into the home: test.log
// to the file, logs to the directory, whatever was there before.
func TestLinkEvidenceMakesTheLinks(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	const id = "F-072"
	if err := os.MkdirAll(filepath.Join(dir, evidenceDir, id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, EvidenceLog(id)), []byte("$ sh tests/F-072.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", linkEvidence(dir, id))
	cmd.Env = append(os.Environ(), "HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for rel, to := range map[string]string{EvidenceLog(id): filepath.Join(home, LinkedFile), EvidenceLogs(id): filepath.Join(home, LinkedDir)} {
		if got, err := os.Readlink(filepath.Join(dir, rel)); err != nil || got != to {
			t.Errorf("%s links to %q (%v), want %s", rel, got, err, to)
		}
	}
}

func TestReachesNeedsAReachesOutCoder(t *testing.T) {
	for _, tt := range []struct {
		f    FeatureScript
		want string
	}{
		{FeatureScript{ID: "F-1", Title: "x", Behavior: Pass, Reaches: []string{"/tmp/x"}}, "reaches are written by a reaches-out coder"},
		{FeatureScript{ID: "F-1", Title: "x", Behavior: ReachesOut, Reaches: []string{"tmp/x"}}, "want an absolute directory"},
		{FeatureScript{ID: "F-1", Title: "x", Behavior: ReachesOut, Kind: Go}, "needs kind text"},
	} {
		err := Scenario{Name: "s", Features: []FeatureScript{tt.f, {ID: "F-2", Title: "y", Behavior: Pass}}}.validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error saying %q", tt.f, err, tt.want)
		}
	}
}
