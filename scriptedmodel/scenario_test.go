package scriptedmodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadScenario(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	good := write("good.json", `{"name": "two", "features": [
  {"id": "F-001", "title": "A", "behavior": "pass"},
  {"id": "F-002", "title": "B", "depends_on": ["F-001", "F-003"], "behavior": "fail-once"},
  {"id": "F-003", "title": "C", "behavior": "stop-early", "tester": "skips-test"},
  {"id": "F-004", "title": "D", "behavior": "fail-once", "kind": "go", "no_test": true}
], "ctxgraphd": "/usr/local/bin/ctxgraphd", "turn_latency_ms": 300}`)
	sc, err := LoadScenario(good)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "two" || len(sc.Features) != 4 || sc.Features[3].Kind != Go || !sc.Features[3].NoTest || sc.Ctxgraphd != "/usr/local/bin/ctxgraphd" || sc.Features[1].Behavior != FailOnce || sc.Features[1].DependsOn[1] != "F-003" ||
		sc.Features[0].Tester != "" || sc.Features[2].Tester != SkipsTest || sc.TurnLatencyMS != 300 {
		t.Fatalf("loaded %+v", sc)
	}

	tests := []struct {
		name, content string
		want          []string // every one must be in the error
	}{
		{"not JSON", `{"features": [`, []string{"invalid JSON"}},
		{"trailing data", `{"features": [{"id": "F-1", "title": "t", "behavior": "pass"}]} {}`, []string{"more data"}},
		{"misspelt key", `{"features": [{"id": "F-1", "title": "t", "behaviour": "pass"}]}`, []string{`unknown field "behaviour"`}},
		{"no features", `{"name": "x", "features": []}`, []string{`"features" is empty`}},
		{"duplicate id", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}, {"id": "F-1", "title": "b", "behavior": "pass"}]}`,
			[]string{`features[1].id "F-1" is used twice (first at features[0])`}},
		{"unknown behavior", `{"features": [{"id": "F-1", "title": "a", "behavior": "sometimes"}]}`,
			[]string{`features[0] (F-1): behavior "sometimes" is unknown`, "pass, fail-once, never-pass, stop-early"}},
		{"unknown tester", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass", "tester": "lazy"}]}`,
			[]string{`features[0] (F-1): tester "lazy" is unknown`, "honest, tested-first, bash-tested, skips-test, touches-other"}},
		{"missing behavior", `{"features": [{"id": "F-1", "title": "a"}]}`, []string{"features[0] (F-1): behavior is missing"}},
		{"missing dependency", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass", "depends_on": ["F-9"]}]}`,
			[]string{`features[0] (F-1): depends_on "F-9", which is not a feature`}},
		{"missing id", `{"features": [{"title": "a", "behavior": "pass"}]}`, []string{"features[0].id is missing"}},
		{"outage of a success status", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}], "outages": [{"status": 200, "count": 1}]}`,
			[]string{"outages[0].status 200 is not an HTTP error status (400-599)"}},
		{"outage past the error statuses", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}], "outages": [{"status": 429, "count": 1}, {"status": 600, "count": 1}]}`,
			[]string{"outages[1].status 600 is not an HTTP error status"}},
		{"outage of no request", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}], "outages": [{"status": 429, "count": 0}]}`,
			[]string{"outages[0].count 0: an outage answers at least one request"}},
		{"outage with a negative retry-after", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}], "outages": [{"status": 429, "count": 1, "retry_after": -1}]}`,
			[]string{"outages[0].retry_after -1: want seconds >= 0"}},
		{"negative turn latency", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}], "turn_latency_ms": -5}`,
			[]string{"turn_latency_ms -5: want milliseconds >= 0"}},
		{"negative test seconds", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass"}], "test_seconds": -1}`,
			[]string{"test_seconds -1: want whole seconds >= 0"}},
		{"unsafe id", `{"features": [{"id": "a b", "title": "a", "behavior": "pass"}]}`, []string{`features[0].id "a b" may hold only`}},
		{"missing title", `{"features": [{"id": "F-1", "behavior": "pass"}]}`, []string{"features[0] (F-1): title is missing"}},
		{"unknown kind", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass", "kind": "rust"}]}`,
			[]string{`features[0] (F-1): kind "rust" is unknown`, "text, go, node"}},
		{"a misbehavior of another kind", `{"features": [{"id": "F-1", "title": "a", "behavior": "rewrites-test", "kind": "go"}]}`,
			[]string{"features[0] (F-1): a feature of kind go is coded and tested honestly", "rewrites-test"}},
		{"a misbehaving tester of another kind", `{"features": [{"id": "F-1", "title": "a", "behavior": "pass", "tester": "fixes-code", "kind": "node"}]}`,
			[]string{"features[0] (F-1): a feature of kind node", "tester fixes-code"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tt.name, " ", "-")+".json", tt.content)
			_, err := LoadScenario(p)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tt.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	if _, err := LoadScenario(filepath.Join(dir, "absent.json")); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestDefaultScenarioIsValid(t *testing.T) {
	sc := DefaultScenario()
	if err := sc.validate(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range sc.Features {
		got = append(got, f.ID+" "+f.Title+" "+string(f.Behavior)+" "+strings.Join(f.DependsOn, ","))
	}
	want := "F-001 Greeting pass |F-002 Farewell fail-once F-001|F-003 Counter pass |F-004 Flaky network never-pass "
	if strings.Join(got, "|") != want {
		t.Fatalf("default scenario\n got  %s\n want %s", strings.Join(got, "|"), want)
	}
}
