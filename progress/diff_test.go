package progress

import (
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	base := func() *List {
		return &List{Version: 1, Features: []Feature{
			{ID: "F-1", Title: "One", Steps: []string{"a"}, Status: Pending},
			{ID: "F-2", Title: "Two", DependsOn: []string{"F-1"}, Status: Pending},
			{ID: "F-3", Title: "Three", Status: Pending},
		}}
	}
	edit := func(fn func(l *List)) *List { l := base(); fn(l); return l }
	tests := []struct {
		name string
		new  *List
		want []Change
	}{
		{"same", base(), nil},
		{"formats are not compared", edit(func(l *List) { l.Format = FormatQuickstart }), nil},
		{"empty status is pending, empty slice is nil", edit(func(l *List) {
			l.Features[0].Status = ""
			l.Features[2].Evidence = []string{}
		}), nil},
		{"version 0 is version 1", edit(func(l *List) { l.Version = 0 }), nil},
		{"the setup", edit(func(l *List) { l.Setup = "npm ci" }), []Change{{Field: "setup", Kind: Modified, Old: "", New: "npm ci"}}},
		{"the setup, before any feature's change", edit(func(l *List) {
			l.Features[0].Title = "Uno"
			l.Setup = "go mod download"
		}), []Change{
			{Field: "setup", Kind: Modified, Old: "", New: "go mod download"},
			{FeatureID: "F-1", Field: "title", Kind: Modified, Old: "One", New: "Uno"},
		}},
		{"status and tested", edit(func(l *List) {
			l.Features[1].Status = Completed
			l.Features[1].Tested = true
		}), []Change{
			{FeatureID: "F-2", Field: "status", Kind: Modified, Old: Pending, New: Completed},
			{FeatureID: "F-2", Field: "tested", Kind: Modified, Old: false, New: true},
		}},
		{"every field, in field order", edit(func(l *List) {
			f := &l.Features[0]
			f.Evidence = []string{"e"}
			f.Tested = true
			f.Status = Blocked
			f.Test = "t"
			f.Scope = []string{"s/**"}
			f.DependsOn = []string{"F-3"}
			f.Steps = []string{"a", "b"}
			f.Category = "c"
			f.Description = "d"
			f.Title = "Uno"
		}), []Change{
			{FeatureID: "F-1", Field: "title", Kind: Modified, Old: "One", New: "Uno"},
			{FeatureID: "F-1", Field: "description", Kind: Modified, Old: "", New: "d"},
			{FeatureID: "F-1", Field: "category", Kind: Modified, Old: "", New: "c"},
			{FeatureID: "F-1", Field: "steps", Kind: Modified, Old: []string{"a"}, New: []string{"a", "b"}},
			{FeatureID: "F-1", Field: "depends_on", Kind: Modified, Old: []string(nil), New: []string{"F-3"}},
			{FeatureID: "F-1", Field: "scope", Kind: Modified, Old: []string(nil), New: []string{"s/**"}},
			{FeatureID: "F-1", Field: "test", Kind: Modified, Old: "", New: "t"},
			{FeatureID: "F-1", Field: "status", Kind: Modified, Old: Pending, New: Blocked},
			{FeatureID: "F-1", Field: "tested", Kind: Modified, Old: false, New: true},
			{FeatureID: "F-1", Field: "evidence", Kind: Modified, Old: []string(nil), New: []string{"e"}},
		}},
		{"added at the end", edit(func(l *List) {
			l.Features = append(l.Features, Feature{ID: "F-4", Title: "Four"})
		}), []Change{
			{FeatureID: "F-4", Field: "feature", Kind: Added, New: Feature{ID: "F-4", Title: "Four"}},
		}},
		{"removed, then added and modified in new's order", edit(func(l *List) {
			l.Features[2].Title = "Drei"
			l.Features = append([]Feature{{ID: "F-0", Title: "Zero"}}, l.Features[1:]...)
		}), []Change{
			{FeatureID: "F-1", Field: "feature", Kind: Removed, Old: Feature{ID: "F-1", Title: "One", Steps: []string{"a"}, Status: Pending}},
			{FeatureID: "F-0", Field: "feature", Kind: Added, New: Feature{ID: "F-0", Title: "Zero"}},
			{FeatureID: "F-3", Field: "title", Kind: Modified, Old: "Three", New: "Drei"},
		}},
		{"reordered", edit(func(l *List) {
			l.Features[0], l.Features[2] = l.Features[2], l.Features[0]
		}), []Change{
			{Field: "order", Kind: Modified, Old: []string{"F-1", "F-2", "F-3"}, New: []string{"F-3", "F-2", "F-1"}},
		}},
		{"an insertion in the middle is not a reordering", edit(func(l *List) {
			l.Features = append(l.Features[:1], append([]Feature{{ID: "F-9", Title: "Nine"}}, l.Features[1:]...)...)
		}), []Change{
			{FeatureID: "F-9", Field: "feature", Kind: Added, New: Feature{ID: "F-9", Title: "Nine"}},
		}},
		{"version first, order last", edit(func(l *List) {
			l.Version = 2
			l.Features[0], l.Features[1] = l.Features[1], l.Features[0]
			l.Features[0].Status = InProgress
		}), []Change{
			{Field: "version", Kind: Modified, Old: 1, New: 2},
			{FeatureID: "F-2", Field: "status", Kind: Modified, Old: Pending, New: InProgress},
			{Field: "order", Kind: Modified, Old: []string{"F-1", "F-2", "F-3"}, New: []string{"F-2", "F-1", "F-3"}},
		}},
		{"a renamed id is a removal and an addition", edit(func(l *List) { l.Features[2].ID = "F-03" }), []Change{
			{FeatureID: "F-3", Field: "feature", Kind: Removed, Old: Feature{ID: "F-3", Title: "Three", Status: Pending}},
			{FeatureID: "F-03", Field: "feature", Kind: Added, New: Feature{ID: "F-03", Title: "Three", Status: Pending}},
		}},
		{"everything removed", &List{Version: 1}, []Change{
			{FeatureID: "F-1", Field: "feature", Kind: Removed, Old: Feature{ID: "F-1", Title: "One", Steps: []string{"a"}, Status: Pending}},
			{FeatureID: "F-2", Field: "feature", Kind: Removed, Old: Feature{ID: "F-2", Title: "Two", DependsOn: []string{"F-1"}, Status: Pending}},
			{FeatureID: "F-3", Field: "feature", Kind: Removed, Old: Feature{ID: "F-3", Title: "Three", Status: Pending}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := base()
			got := Diff(old, tt.new)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff:\n got %#v\nwant %#v", got, tt.want)
			}
			if !reflect.DeepEqual(old, base()) {
				t.Errorf("Diff changed its old list")
			}
		})
	}
}

// The values in a Change are copies: a caller may keep or change them
// without touching either list.
func TestDiffCopies(t *testing.T) {
	old := &List{Features: []Feature{{ID: "F-1", Title: "One", Evidence: []string{"a"}}, {ID: "F-2", Title: "Two", Steps: []string{"s"}}}}
	new := &List{Features: []Feature{{ID: "F-1", Title: "One", Evidence: []string{"b"}}}}
	changes := Diff(old, new)
	if len(changes) != 2 {
		t.Fatalf("Diff = %#v; want a removal and an evidence change", changes)
	}
	changes[0].Old.(Feature).Steps[0] = "changed"
	changes[1].Old.([]string)[0] = "changed"
	changes[1].New.([]string)[0] = "changed"
	if old.Features[1].Steps[0] != "s" || old.Features[0].Evidence[0] != "a" || new.Features[0].Evidence[0] != "b" {
		t.Errorf("changing a Change changed a list: old %+v, new %+v", old, new)
	}
}

func TestDiffNil(t *testing.T) {
	l := &List{Version: 1, Features: []Feature{{ID: "F-1", Title: "One"}}}
	tests := []struct {
		name     string
		old, new *List
		want     []Change
	}{
		{"both nil", nil, nil, nil},
		{"from nothing", nil, l, []Change{{FeatureID: "F-1", Field: "feature", Kind: Added, New: Feature{ID: "F-1", Title: "One"}}}},
		{"to nothing", l, nil, []Change{{FeatureID: "F-1", Field: "feature", Kind: Removed, Old: Feature{ID: "F-1", Title: "One"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(tt.old, tt.new); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestChangeKindString(t *testing.T) {
	for k, want := range map[ChangeKind]string{Added: "added", Removed: "removed", Modified: "modified", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("ChangeKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
