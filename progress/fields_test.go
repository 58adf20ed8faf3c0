package progress

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
)

// TestEveryFieldHasAPolicy holds the table to the struct: every JSON key of
// Feature is declared in Fields exactly once, with a kind, an accessor and
// a policy, so that a new key cannot be parsed, diffed or copied
// differently from the others, nor reach agents by default.
func TestEveryFieldHasAPolicy(t *testing.T) {
	keys := map[string]bool{}
	ft := reflect.TypeOf(Feature{})
	for i := 0; i < ft.NumField(); i++ {
		key, _, _ := strings.Cut(ft.Field(i).Tag.Get("json"), ",")
		keys[key] = true
		if _, ok := FieldByKey(key); !ok {
			t.Errorf("Feature.%s (json %q) is not declared in Fields", ft.Field(i).Name, key)
		}
	}
	seen := map[string]bool{}
	for _, fd := range Fields {
		if seen[fd.Key] {
			t.Errorf("%s is declared twice", fd.Key)
		}
		seen[fd.Key] = true
		if !keys[fd.Key] {
			t.Errorf("Fields declares %q, which Feature does not have", fd.Key)
		}
		if fd.Policy < Fixed || fd.Policy > OwnVerdict {
			t.Errorf("%s has no policy: say who may change it (Fixed if only a person may)", fd.Key)
		}
		var accessor bool
		switch fd.Kind {
		case TextField, StatusField:
			accessor = fd.text != nil
		case TextListField:
			accessor = fd.list != nil
		case FlagField:
			accessor = fd.flag != nil
		default:
			t.Errorf("%s has no kind", fd.Key)
		}
		if !accessor {
			t.Errorf("%s has no accessor for its kind", fd.Key)
		}
	}
}

func TestFieldWriters(t *testing.T) {
	tests := []struct {
		key  string
		role role.Role
		want bool
	}{
		{"status", role.Coder, true},
		{"status", role.Tester, true},
		{"status", role.Initializer, false},
		{"tested", role.Tester, true},
		{"tested", role.Coder, false},
		{"evidence", role.Tester, true},
		{"evidence", role.Coder, false},
		{"test", role.Coder, false},
		{"test", role.Tester, false},
		{"scope", role.Coder, false},
		{"title", role.Initializer, false},
		{"id", role.Tester, false},
	}
	for _, tt := range tests {
		fd, ok := FieldByKey(tt.key)
		if !ok {
			t.Fatalf("no field %q", tt.key)
		}
		if got := fd.MayWrite(tt.role); got != tt.want {
			t.Errorf("%s may be changed by %s: %v, want %v", tt.key, tt.role, got, tt.want)
		}
	}
}

// TestFieldWithoutPolicyFailsClosed: a field declared without a policy (the
// zero Policy) is one no agent may change, so that forgetting the policy of
// a new key never opens it to agents.
func TestFieldWithoutPolicyFailsClosed(t *testing.T) {
	fd := Field{Key: "new-key", Kind: TextField}
	for _, r := range role.All {
		if fd.MayWrite(r) {
			t.Errorf("%s may change a field that has no policy", r)
		}
	}
}

// TestFieldsDriveParseDiffClone: a value set through the table is read back
// by Parse, found by Diff and copied by Clone, for every field.
func TestFieldsDriveParseDiffClone(t *testing.T) {
	base := Feature{ID: "F-1", Title: "t", Status: Pending}
	for _, fd := range Fields {
		if fd.Key == "id" {
			continue
		}
		t.Run(fd.Key, func(t *testing.T) {
			changed := base.clone()
			switch fd.Kind {
			case TextField:
				*fd.text(&changed) = "x"
			case StatusField:
				*fd.text(&changed) = string(Completed)
			case TextListField:
				*fd.list(&changed) = []string{"x"}
			case FlagField:
				*fd.flag(&changed) = true
			}
			other := Feature{ID: "x", Title: "a feature to depend on", Status: Pending}
			l := &List{Version: 1, Features: []Feature{changed, other}}
			back, err := Parse(l.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			if !fd.Equal(&back.Features[0], &changed) {
				t.Errorf("Parse lost %s: %v", fd.Key, fd.Value(&back.Features[0]))
			}
			cs := Diff(&List{Version: 1, Features: []Feature{base, other}}, l)
			if len(cs) != 1 || cs[0].Field != fd.Key {
				t.Errorf("Diff = %+v, want one change of %s", cs, fd.Key)
			}
			c := l.Clone()
			if fd.Kind == TextListField {
				(*fd.list(&l.Features[0]))[0] = "changed after the clone"
				if (*fd.list(&c.Features[0]))[0] != "x" {
					t.Errorf("Clone shares %s with the original", fd.Key)
				}
			}
		})
	}
}
