package progress

import (
	"reflect"
	"strconv"
	"testing"
)

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		l    *List
		want string
	}{
		{"zero list", &List{}, `{
  "version": 1,
  "features": []
}
`},
		{"fields in order, empty status spelled out, no HTML escaping", &List{Version: 1, Format: FormatQuickstart, Features: []Feature{
			{
				ID: "F-001", Title: "Sign <in>", Description: "d", Category: "c", Steps: []string{"s"}, DependsOn: []string{"F-002"},
				Scope: []string{"a/**"}, Test: "go test ./... && echo ok > log", Status: Completed, Tested: true, Evidence: []string{"e.log"},
			},
			{ID: "F-002", Title: "Two", Steps: []string{}},
		}}, `{
  "version": 1,
  "features": [
    {
      "id": "F-001",
      "title": "Sign <in>",
      "description": "d",
      "category": "c",
      "steps": [
        "s"
      ],
      "depends_on": [
        "F-002"
      ],
      "scope": [
        "a/**"
      ],
      "test": "go test ./... && echo ok > log",
      "status": "completed",
      "tested": true,
      "evidence": [
        "e.log"
      ]
    },
    {
      "id": "F-002",
      "title": "Two",
      "status": "pending",
      "tested": false
    }
  ]
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.l.Clone()
			if got := string(tt.l.Marshal()); got != tt.want {
				t.Errorf("Marshal:\n%s\nwant:\n%s", got, tt.want)
			}
			if !reflect.DeepEqual(tt.l, before) {
				t.Errorf("Marshal changed its list: %+v, was %+v", tt.l, before)
			}
		})
	}
}

func TestClone(t *testing.T) {
	orig := &List{Version: 1, Format: FormatQuickstart, Features: []Feature{{
		ID: "F-1", Title: "One", Steps: []string{"s"}, DependsOn: []string{"F-2"}, Scope: []string{"x"}, Evidence: []string{"e"},
	}, {ID: "F-2", Title: "Two"}}}
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("Clone = %+v, want %+v", c, orig)
	}
	c.Features[0].Title = "changed"
	c.Features[0].Steps[0] = "changed"
	c.Features[0].DependsOn[0] = "changed"
	c.Features[0].Scope[0] = "changed"
	c.Features[0].Evidence[0] = "changed"
	c.Features = append(c.Features[:1], Feature{ID: "F-3", Title: "Three"})
	want := &List{Version: 1, Format: FormatQuickstart, Features: []Feature{{
		ID: "F-1", Title: "One", Steps: []string{"s"}, DependsOn: []string{"F-2"}, Scope: []string{"x"}, Evidence: []string{"e"},
	}, {ID: "F-2", Title: "Two"}}}
	if !reflect.DeepEqual(orig, want) {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}
}

func TestFeature(t *testing.T) {
	l := &List{Features: []Feature{{ID: "F-1", Title: "One"}, {ID: "F-2", Title: "Two"}}}
	if f := l.Feature("F-3"); f != nil {
		t.Errorf("Feature(F-3) = %+v, want nil", f)
	}
	f := l.Feature("F-2")
	if f == nil || f.Title != "Two" {
		t.Fatalf("Feature(F-2) = %+v", f)
	}
	f.Status = Blocked // the pointer is into the list
	if l.Features[1].Status != Blocked {
		t.Errorf("a change through Feature did not reach the list")
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		name     string
		features []Feature
		want     Counts
	}{
		{"empty", nil, Counts{}},
		{"each status", []Feature{
			{Status: Pending}, {Status: ""}, {Status: InProgress}, {Status: Completed}, {Status: Completed}, {Status: Blocked},
		}, Counts{Total: 6, Pending: 2, InProgress: 1, Completed: 2, Blocked: 1}},
		{"tested counts in Tested, not in its status", []Feature{
			{Status: Completed, Tested: true}, {Status: Completed}, {Status: Pending, Tested: true},
		}, Counts{Total: 3, Completed: 1, Tested: 2}},
		{"unknown status only in Total", []Feature{{Status: "done"}, {Status: Blocked}}, Counts{Total: 2, Blocked: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &List{Features: tt.features}
			if got := l.Counts(); got != tt.want {
				t.Errorf("Counts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCycles(t *testing.T) {
	// deps builds a list from "id:dep,dep" specs.
	deps := func(specs ...[]string) *List {
		l := &List{}
		for _, s := range specs {
			l.Features = append(l.Features, Feature{ID: s[0], Title: s[0], DependsOn: s[1:]})
		}
		return l
	}
	f := func(id string, deps ...string) []string { return append([]string{id}, deps...) }
	tests := []struct {
		name string
		l    *List
		want [][]string
	}{
		{"empty", deps(), nil},
		{"chain", deps(f("A", "B"), f("B", "C"), f("C")), nil},
		{"diamond", deps(f("A", "B", "C"), f("B", "D"), f("C", "D"), f("D")), nil},
		{"two", deps(f("F-1", "F-2"), f("F-2", "F-1")), [][]string{{"F-1", "F-2", "F-1"}}},
		{"self", deps(f("F-1", "F-1")), [][]string{{"F-1", "F-1"}}},
		{"three, starting at the first in list order", deps(f("C", "A"), f("A", "B"), f("B", "C")), [][]string{{"C", "A", "B", "C"}}},
		{"shortest loop back", deps(f("A", "B", "D"), f("B", "C"), f("C", "A"), f("D", "A")), [][]string{{"A", "D", "A"}}},
		{"tie goes to the dependency listed first", deps(f("A", "B", "C"), f("B", "A"), f("C", "A")), [][]string{{"A", "B", "A"}}},
		{"two separate cycles in list order", deps(f("X"), f("Q", "R"), f("A", "B"), f("R", "Q"), f("B", "A")),
			[][]string{{"Q", "R", "Q"}, {"A", "B", "A"}}},
		{"a feature depending on a cycle is not in it", deps(f("A", "B"), f("B", "C"), f("C", "B")), [][]string{{"B", "C", "B"}}},
		{"unknown dependencies ignored", deps(f("A", "Z"), f("B", "A")), nil},
		{"duplicate id: the first occurrence counts", deps(f("A", "B"), f("B"), f("B", "A")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.Cycles(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Cycles = %q, want %q", got, tt.want)
			}
		})
	}
}

// A cycle through a long chain of features is found whole.
func TestCyclesLongChain(t *testing.T) {
	const n = 20000
	l := &List{Features: make([]Feature, n)}
	for i := range l.Features {
		l.Features[i].ID = "F-" + strconv.Itoa(i)
		if i > 0 {
			l.Features[i].DependsOn = []string{l.Features[i-1].ID}
		}
	}
	l.Features[0].DependsOn = []string{l.Features[n-1].ID}
	got := l.Cycles()
	if len(got) != 1 {
		t.Fatalf("Cycles found %d cycles; want one through all %d features", len(got), n)
	}
	if c := got[0]; len(c) != n+1 || c[0] != "F-0" || c[1] != "F-"+strconv.Itoa(n-1) || c[n] != "F-0" {
		t.Errorf("cycle of length %d from %s to %s; want F-0 -> F-%d -> ... -> F-0 through all %d features", len(c), c[0], c[len(c)-1], n-1, n)
	}
}

// A scope's pattern means the same paths however it is written.
func TestScopePattern(t *testing.T) {
	for in, want := range map[string]string{
		"src/**": "src/**", "./src/**": "src/**", `src\greet\*.go`: "src/greet/*.go", "src//a/../b/": "src/b", "./": ".",
	} {
		if got := ScopePattern(in); got != want {
			t.Errorf("ScopePattern(%q) = %q, want %q", in, got, want)
		}
	}
}
