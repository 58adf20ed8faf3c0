package progress

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, every error
// must be a *ParseError, and a list it accepts must survive Marshal and
// Parse unchanged (Format aside: Marshal always writes version 1).
func FuzzParse(f *testing.F) {
	seeds := []string{
		`{"version": 1, "features": [{"id": "F-001", "title": "Sign in", "description": "d", "steps": ["a"], "depends_on": [], "scope": ["x/**"], "test": "go test ./... && true", "status": "pending", "tested": false, "evidence": []}, {"id": "F-002", "title": "Out", "depends_on": ["F-001"], "status": "completed", "tested": true}]}`,
		`{"version": 1, "features": [{"id": "A", "title": "a", "depends_on": ["B"]}, {"id": "B", "title": "b", "depends_on": ["A"]}]}`,
		`[{"category": "functional", "description": "User can sign in\nwith a password", "steps": ["open", "submit"], "passes": false}, {"category": "style", "description": "Dark", "steps": [], "passes": true}]`,
		`{"version": 1, "features": []}`,
		`[]`,
		``,
		`{"version": 1, "features": [`,
		`{"version": 2, "features": []}`,
		`{"features": [{"id": "F-1", "title": "x", "steps": "a"}]}`,
		`{"features": [{"id": "F-1", "title": "x"}, {"id": "F-1", "title": "y"}]}`,
		`{"features": [{"id": "F-1", "title": "x", "status": "done", "tested": "no"}]}`,
		`[{"description": ""}, 3]`,
		"\xef\xbb\xbf{\"features\": [{\"id\": \"\xff\", \"title\": \"\xfe\"}]}",
		`{"features": [1,]}`,
		`null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T is not a *ParseError: %v", err, err)
			}
			if l != nil {
				t.Fatalf("Parse returned a list with its error %v", err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("Parse accepted a list that Validate rejects: %v", err)
		}
		out := l.Marshal()
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse of Marshal failed: %v\n%s", err, out)
		}
		want := l.Clone()
		want.Format = FormatV1
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("round trip changed the list:\n got %#v\nwant %#v", back, want)
		}
		if again := back.Marshal(); !bytes.Equal(again, out) {
			t.Fatalf("Marshal is not stable:\n%s\nthen\n%s", out, again)
		}
		if d := Diff(l, back); d != nil {
			t.Fatalf("Diff of a list and its round trip: %#v", d)
		}
		l.Cycles()
		if c := l.Counts(); c.Pending+c.InProgress+c.Completed+c.Blocked+c.Tested != c.Total {
			t.Fatalf("Counts %+v do not add up", c)
		}
	})
}
