package progress

import (
	"slices"
)

// ChangeKind says whether a Change added, removed or modified something.
type ChangeKind int

// The kinds of Change. The zero value is none of them, so that a forgotten
// Kind is not mistaken for an addition.
const (
	Added ChangeKind = iota + 1
	Removed
	Modified
)

// String returns "added", "removed" or "modified".
func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Modified:
		return "modified"
	}
	return "unknown"
}

// Change is one difference between two feature lists (see Diff).
type Change struct {
	FeatureID string     // empty for a change of the whole list ("version", "setup", "order")
	Field     string     // a Feature's JSON key, "feature" when one is added or removed, or "version" / "setup" / "order"
	Kind      ChangeKind // Added and Removed only with Field "feature"
	Old, New  any        // the values before and after; nil on the side where a feature does not exist
}

// Diff lists what changed from old to new, in a deterministic order:
//
//  1. "version", when it differs (0 and 1 are the same version), then
//     "setup", when it differs (Old and New the strings);
//  2. removed features (Field "feature", Old the Feature), in old's order;
//  3. for each feature of new, in new's order: Added (Field "feature", New
//     the Feature), or one Modified per changed field in the order of the
//     Feature fields, with Old and New typed as the field is (string,
//     []string, Status, bool);
//  4. "order", on FeatureID "", when the features present in both lists are
//     not in the same relative order; Old and New are the []string of all
//     ids of each list. Adding or removing features alone is not a change
//     of order.
//
// An empty status equals "pending" and a nil slice an empty one, as Marshal
// writes them alike. A duplicated id (only in a list that was not validated)
// stands for its first occurrence. Values in a Change are copies. A nil list
// is an empty one, so that Diff(nil, l) lists every feature of l as Added.
func Diff(old, new *List) []Change {
	if old == nil {
		old = &List{}
	}
	if new == nil {
		new = &List{}
	}
	var changes []Change
	if version(old) != version(new) {
		changes = append(changes, Change{Field: "version", Kind: Modified, Old: version(old), New: version(new)})
	}
	if old.Setup != new.Setup {
		changes = append(changes, Change{Field: "setup", Kind: Modified, Old: old.Setup, New: new.Setup})
	}
	oldAt, newAt := firstIndex(old), firstIndex(new)
	for i, f := range old.Features {
		if oldAt[f.ID] != i {
			continue
		}
		if _, ok := newAt[f.ID]; !ok {
			changes = append(changes, Change{FeatureID: f.ID, Field: "feature", Kind: Removed, Old: f.clone()})
		}
	}
	for i, n := range new.Features {
		if newAt[n.ID] != i {
			continue
		}
		j, ok := oldAt[n.ID]
		if !ok {
			changes = append(changes, Change{FeatureID: n.ID, Field: "feature", Kind: Added, New: n.clone()})
			continue
		}
		changes = append(changes, diffFeature(old.Features[j], n)...)
	}
	if oldOrder, newOrder := common(old, newAt), common(new, oldAt); !slices.Equal(oldOrder, newOrder) {
		changes = append(changes, Change{Field: "order", Kind: Modified, Old: ids(old), New: ids(new)})
	}
	return changes
}

func version(l *List) int {
	if l.Version == 0 {
		return 1
	}
	return l.Version
}

// firstIndex maps each id of l to the index of its first occurrence.
func firstIndex(l *List) map[string]int {
	m := make(map[string]int, len(l.Features))
	for i, f := range l.Features {
		if _, dup := m[f.ID]; !dup {
			m[f.ID] = i
		}
	}
	return m
}

// common returns the ids of l, first occurrences only, that are also keys
// of other, in l's order.
func common(l *List, other map[string]int) []string {
	seen := make(map[string]bool, len(l.Features))
	var out []string
	for _, f := range l.Features {
		if _, ok := other[f.ID]; ok && !seen[f.ID] {
			seen[f.ID] = true
			out = append(out, f.ID)
		}
	}
	return out
}

func ids(l *List) []string {
	out := make([]string, len(l.Features))
	for i, f := range l.Features {
		out[i] = f.ID
	}
	return out
}

// diffFeature lists the Modified changes between two versions of one
// feature, in the order of Fields.
func diffFeature(o, n Feature) []Change {
	var changes []Change
	for _, fd := range Fields {
		if fd.Key == "id" || fd.Equal(&o, &n) {
			continue
		}
		changes = append(changes, Change{FeatureID: n.ID, Field: fd.Key, Kind: Modified, Old: fd.Value(&o), New: fd.Value(&n)})
	}
	return changes
}
