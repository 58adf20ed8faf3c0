package progress

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// v1 wraps feature objects in a version 1 list.
func v1(features ...string) string {
	return `{"version": 1, "features": [` + strings.Join(features, ", ") + `]}`
}

// Every rule of the feature list, with the exact message a person or an
// agent gets when it is broken.
func TestParseErrors(t *testing.T) {
	ok := `{"id": "F-1", "title": "One"}`
	tests := []struct {
		name string
		in   string
		want string
		path string
	}{
		// Syntax, with the position of the problem.
		{"empty file", "", `feature-list.json: the file is empty (was it written half-way?); write {"version": 1, "features": []} at least, or restore the previous version`, ""},
		{"blank file", " \n\t\n", `feature-list.json: the file is empty (was it written half-way?); write {"version": 1, "features": []} at least, or restore the previous version`, ""},
		{"cut short", "{\n  \"version\": 1,\n  \"features\": [\n    {\"id\": \"F-1\", \n", `feature-list.json:4:18: invalid JSON: unexpected end of input (the file is incomplete: was it written half-way?); complete the JSON or restore the previous version`, ""},
		{"cut in a literal", `{"version": 1, "features": [], "x": tr`, `feature-list.json:1:39: invalid JSON: unexpected end of input (the file is incomplete: was it written half-way?); complete the JSON or restore the previous version`, ""},
		{"trailing comma", "{\n  \"features\": [\n    {\"id\": \"F-1\",}\n  ]\n}\n", `feature-list.json:3:18: invalid JSON: invalid character '}' looking for beginning of object key string (a comma before it?); remove the comma: JSON does not allow one after the last element`, ""},
		{"trailing comma in array", "{\"features\": [1,\n]}", `feature-list.json:2:1: invalid JSON: invalid character ']' looking for beginning of value (a comma before it?); remove the comma: JSON does not allow one after the last element`, ""},
		{"comment", "// the backlog\n{}", `feature-list.json:1:1: invalid JSON: invalid character '/' looking for beginning of value (a comment?); remove the comment: JSON has none`, ""},
		{"garbage after", `{"features": []} x`, `feature-list.json:1:18: invalid JSON: invalid character 'x' after top-level value; fix the JSON syntax at that position`, ""},
		{"column counts characters", `{"title": "héllo" x}`, `feature-list.json:1:19: invalid JSON: invalid character 'x' after object key:value pair; fix the JSON syntax at that position`, ""},

		// Shape of the document.
		{"top level string", `"F-1"`, `feature-list.json: the top level is a string; expected an object; write {"version": 1, "features": [...]} (or the quickstart's array of features)`, ""},
		{"top level null", `null`, `feature-list.json: the top level is null; expected an object; write {"version": 1, "features": [...]} (or the quickstart's array of features)`, ""},
		{"newer version", `{"version": 2, "features": []}`, `feature-list.json: version 2 is newer than this ctxgraphd reads (version 1); upgrade ctxgraphd, or write the list in the version 1 format`, "version"},
		{"version zero", `{"version": 0, "features": []}`, `feature-list.json: version 0 is not a version; this ctxgraphd reads version 1; write "version": 1`, "version"},
		{"negative version", `{"version": -1, "features": []}`, `feature-list.json: version -1 is not a version; this ctxgraphd reads version 1; write "version": 1`, "version"},
		{"fractional version", `{"version": 1.5, "features": []}`, `feature-list.json: version 1.5 is not a version number; this ctxgraphd reads version 1; write "version": 1`, "version"},
		{"version as string", `{"version": "1", "features": []}`, `feature-list.json: version is a string; expected the number 1; write "version": 1`, "version"},
		{"setup a number", `{"version": 1, "setup": 1, "features": []}`, `feature-list.json: setup is a number; expected a shell command as a string; write "setup": "npm ci" (or leave it out)`, "setup"},
		{"setup a list", `{"version": 1, "setup": ["npm ci"], "features": []}`, `feature-list.json: setup is an array; expected a shell command as a string; write "setup": "npm ci" (or leave it out)`, "setup"},
		{"setup not shell", `{"version": 1, "setup": "npm ci |", "features": []}`, `feature-list.json: setup "npm ci |" is not a shell command the daemon can run: 1:8: ` + "`|`" + ` must be followed by a statement; write it as one line of sh, as you would type it, or leave it out`, "setup"},
		{"features missing", `{"version": 1}`, `feature-list.json: features is missing; add "features": [] (an empty list is valid) with one object per feature`, "features"},
		{"features null", `{"version": 1, "features": null}`, `feature-list.json: features is null; add "features": [] (an empty list is valid) with one object per feature`, "features"},
		{"features in another case", `{"version": 1, "Features": []}`, `feature-list.json: features is missing (there is "Features": keys are case-sensitive); add "features": [] (an empty list is valid) with one object per feature`, "features"},
		{"features an object", `{"version": 1, "features": {}}`, `feature-list.json: features is an object; expected an array of features; write "features": [{"id": "F-001", "title": "…", …}, …]`, "features"},
		{"feature not an object", v1(ok, `"F-2"`), `feature-list.json: features[1] is a string; expected an object {"id": …, "title": …, …}; write each feature as a JSON object`, "features[1]"},

		// ids.
		{"id missing", v1(`{"title": "One"}`), `feature-list.json: features[0].id is missing; give every feature a unique id such as "F-001"`, "features[0].id"},
		{"id null", v1(`{"id": null, "title": "One"}`), `feature-list.json: features[0].id is null; give every feature a unique id such as "F-001"`, "features[0].id"},
		{"id a number", v1(`{"id": 1, "title": "One"}`), `feature-list.json: features[0].id is a number; expected a string; write it as a JSON string in double quotes`, "features[0].id"},
		{"id empty", v1(`{"id": "", "title": "One"}`), `feature-list.json: features[0].id is empty; give every feature a unique id such as "F-001"`, "features[0].id"},
		{"id with a space", v1(`{"id": "F 1", "title": "One"}`), `feature-list.json: features[0].id "F 1" is not a valid id; use letters, digits, '.', '_' and '-', starting with a letter or digit, such as "F-001"`, "features[0].id"},
		{"id with a slash", v1(`{"id": "F/1", "title": "One"}`), `feature-list.json: features[0].id "F/1" is not a valid id; use letters, digits, '.', '_' and '-', starting with a letter or digit, such as "F-001"`, "features[0].id"},
		{"id starting with a dot", v1(`{"id": ".F1", "title": "One"}`), `feature-list.json: features[0].id ".F1" is not a valid id; use letters, digits, '.', '_' and '-', starting with a letter or digit, such as "F-001"`, "features[0].id"},
		{"id used twice", v1(`{"id": "F-0", "title": "Zero"}`, `{"id": "F-3", "title": "A"}`, `{"id": "F-2", "title": "B"}`, `{"id": "F-3", "title": "C"}`), `feature-list.json: features[3].id "F-3" is used twice (first at features[1]); ids must be unique`, "features[3].id"},

		// titles.
		{"title missing", v1(`{"id": "F-1"}`), `feature-list.json: features[0].title is missing; give every feature a short title`, "features[0].title"},
		{"title empty", v1(`{"id": "F-1", "title": ""}`), `feature-list.json: features[0].title is empty; give every feature a short title`, "features[0].title"},
		{"title blank", v1(`{"id": "F-1", "title": " \t"}`), `feature-list.json: features[0].title is empty; give every feature a short title`, "features[0].title"},
		{"title an array", v1(`{"id": "F-1", "title": ["One"]}`), `feature-list.json: features[0].title is an array; expected a string; write it as a JSON string in double quotes`, "features[0].title"},

		// status and tested.
		{"unknown status", v1(`{"id": "F-1", "title": "One", "status": "done"}`), `feature-list.json: features[0].status "done" is not a status; use one of pending, in_progress, completed, blocked`, "features[0].status"},
		{"status in capitals", v1(`{"id": "F-1", "title": "One", "status": "Pending"}`), `feature-list.json: features[0].status "Pending" is not a status; use one of pending, in_progress, completed, blocked`, "features[0].status"},
		{"status a boolean", v1(`{"id": "F-1", "title": "One", "status": true}`), `feature-list.json: features[0].status is a boolean; expected a string; write it as a JSON string in double quotes`, "features[0].status"},
		{"tested as a string", v1(`{"id": "F-1", "title": "One", "tested": "false"}`), `feature-list.json: features[0].tested is a string; expected true or false; write true or false, without quotes`, "features[0].tested"},
		{"tested as a number", v1(`{"id": "F-1", "title": "One", "tested": 1}`), `feature-list.json: features[0].tested is a number; expected true or false; write true or false, without quotes`, "features[0].tested"},

		// Arrays of strings.
		{"steps a string", v1(`{"id": "F-1", "title": "One", "steps": "run it"}`), `feature-list.json: features[0].steps is a string; expected an array of strings; put the string in an array: ["…"]`, "features[0].steps"},
		{"steps element a number", v1(`{"id": "F-1", "title": "One", "steps": ["a", 2]}`), `feature-list.json: features[0].steps[1] is a number; expected a string; write each element as a JSON string in double quotes`, "features[0].steps[1]"},
		{"scope an object", v1(`{"id": "F-1", "title": "One", "scope": {"a": 1}}`), `feature-list.json: features[0].scope is an object; expected an array of strings; write it as an array of strings, ["…"]`, "features[0].scope"},
		{"evidence element null", v1(`{"id": "F-1", "title": "One", "evidence": [null]}`), `feature-list.json: features[0].evidence[0] is null; expected a string; write each element as a JSON string in double quotes`, "features[0].evidence[0]"},
		{"depends_on element an object", v1(ok, `{"id": "F-2", "title": "Two", "depends_on": [{"id": "F-1"}]}`), `feature-list.json: features[1].depends_on[0] is an object; expected a string; write each element as a JSON string in double quotes`, "features[1].depends_on[0]"},
		{"test a number", v1(`{"id": "F-1", "title": "One", "test": 0}`), `feature-list.json: features[0].test is a number; expected a string; write it as a JSON string in double quotes`, "features[0].test"},

		// Dependencies.
		{"unknown dependency", v1(ok, `{"id": "F-2", "title": "Two", "depends_on": ["F-1", "F-9"]}`), `feature-list.json: features[1].depends_on[1] "F-9" is not a feature of this list; remove it, or add a feature with that id`, "features[1].depends_on[1]"},
		{"dependency on itself", v1(ok, `{"id": "F-2", "title": "Two", "depends_on": ["F-2"]}`), `feature-list.json: features[1].depends_on[0] "F-2" is the feature itself; a feature cannot depend on itself: remove it`, "features[1].depends_on[0]"},

		// The quickstart's array.
		{"quickstart element not an object", `[{"description": "a"}, 3]`, `feature-list.json: [1] is a number; expected an object {"category": …, "description": …, "steps": […], "passes": false}; write each feature as a JSON object`, "[1]"},
		{"quickstart description missing", `[{"category": "x", "steps": []}]`, `feature-list.json: [0].description is missing; describe every feature: the first line of its description becomes its title`, "[0].description"},
		{"quickstart description blank", `[{"description": " \n "}]`, `feature-list.json: [0].description is empty; describe every feature: the first line of its description becomes its title`, "[0].description"},
		{"quickstart passes a string", `[{"description": "a", "passes": "no"}]`, `feature-list.json: [0].passes is a string; expected true or false; write true or false, without quotes`, "[0].passes"},
		{"quickstart steps not strings", `[{"description": "a", "steps": [["x"]]}]`, `feature-list.json: [0].steps[0] is an array; expected a string; write each element as a JSON string in double quotes`, "[0].steps[0]"},
		{"quickstart category a number", `[{"description": "a", "category": 7}]`, `feature-list.json: [0].category is a number; expected a string; write it as a JSON string in double quotes`, "[0].category"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want error %s", l, tt.want)
			}
			if l != nil {
				t.Errorf("Parse returned a list with its error: %+v", l)
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is %T, want *ParseError", err)
			}
			if pe.File != FeatureListFile || pe.Path != tt.path || pe.Problem == "" || pe.Fix == "" {
				t.Errorf("ParseError{File: %q, Path: %q, Problem: %q, Fix: %q}; want File %q, Path %q, a Problem and a Fix",
					pe.File, pe.Path, pe.Problem, pe.Fix, FeatureListFile, tt.path)
			}
		})
	}
}

func TestParseV1(t *testing.T) {
	in := `{
  "version": 1,
  "setup": "npm ci --ignore-scripts",
  "features": [
    {
      "id": "F-001",
      "title": "User can sign in",
      "description": "With a password.",
      "category": "auth",
      "steps": ["open /login", "submit"],
      "depends_on": [],
      "scope": ["internal/auth/**"],
      "test": "go test ./internal/auth/... && echo ok > /dev/null",
      "status": "completed",
      "tested": true,
      "evidence": ["evidence/F-001/test.log"]
    },
    {"id": "F-002", "title": "Sign out", "depends_on": ["F-001"], "status": "blocked"}
  ]
}
`
	want := &List{Version: 1, Format: FormatV1, Setup: "npm ci --ignore-scripts", Features: []Feature{
		{
			ID: "F-001", Title: "User can sign in", Description: "With a password.", Category: "auth",
			Steps: []string{"open /login", "submit"}, Scope: []string{"internal/auth/**"},
			Test:   "go test ./internal/auth/... && echo ok > /dev/null",
			Status: Completed, Tested: true, Evidence: []string{"evidence/F-001/test.log"},
		},
		{ID: "F-002", Title: "Sign out", DependsOn: []string{"F-001"}, Status: Blocked},
	}}
	got, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

// What Parse forgives, and how it reads it.
func TestParseLenient(t *testing.T) {
	one := func(f Feature) *List { return &List{Version: 1, Features: []Feature{f}} }
	tests := []struct {
		name string
		in   string
		want *List
	}{
		{"empty list", `{"version": 1, "features": []}`, &List{Version: 1, Features: []Feature{}}},
		{"version omitted", `{"features": []}`, &List{Version: 1, Features: []Feature{}}},
		{"version null", `{"version": null, "features": []}`, &List{Version: 1, Features: []Feature{}}},
		{"unknown keys ignored", `{"version": 1, "generator": {"x": [1]}, "features": [{"id": "F-1", "title": "One", "priority": 3, "passes": "?"}]}`,
			one(Feature{ID: "F-1", Title: "One", Status: Pending})},
		{"status omitted is pending", v1(`{"id": "F-1", "title": "One"}`), one(Feature{ID: "F-1", Title: "One", Status: Pending})},
		{"empty status is pending", v1(`{"id": "F-1", "title": "One", "status": ""}`), one(Feature{ID: "F-1", Title: "One", Status: Pending})},
		{"null optional values", v1(`{"id": "F-1", "title": "One", "description": null, "steps": null, "tested": null, "evidence": null}`),
			one(Feature{ID: "F-1", Title: "One", Status: Pending})},
		{"empty arrays read as nil", v1(`{"id": "F-1", "title": "One", "steps": [], "depends_on": [], "scope": [], "evidence": []}`),
			one(Feature{ID: "F-1", Title: "One", Status: Pending})},
		{"byte-order mark", "\xef\xbb\xbf" + v1(`{"id": "F-1", "title": "One"}`), one(Feature{ID: "F-1", Title: "One", Status: Pending})},
		{"id characters", v1(`{"id": "a.B_9-z", "title": "One"}`), one(Feature{ID: "a.B_9-z", Title: "One", Status: Pending})},
		{"duplicate key: the last wins", v1(`{"id": "F-1", "title": "One", "title": "Two"}`), one(Feature{ID: "F-1", Title: "Two", Status: Pending})},
		{"cycle is not an error", v1(`{"id": "A", "title": "a", "depends_on": ["B"]}`, `{"id": "B", "title": "b", "depends_on": ["A"]}`),
			&List{Version: 1, Features: []Feature{
				{ID: "A", Title: "a", DependsOn: []string{"B"}, Status: Pending},
				{ID: "B", Title: "b", DependsOn: []string{"A"}, Status: Pending},
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseQuickstart(t *testing.T) {
	long := strings.Repeat("é", 100)
	tests := []struct {
		name string
		in   string
		want []Feature
	}{
		{"empty", `[]`, []Feature{}},
		{"fields", `[
  {"category": "functional", "description": "User can sign in\nwith a password", "steps": ["open /login", "submit"], "passes": false},
  {"category": "style", "description": "Dark mode", "steps": [], "passes": true}
]`, []Feature{
			{ID: "F-001", Title: "User can sign in", Description: "User can sign in\nwith a password", Category: "functional", Steps: []string{"open /login", "submit"}, Status: Pending},
			{ID: "F-002", Title: "Dark mode", Description: "Dark mode", Category: "style", Status: Completed, Tested: true},
		}},
		{"title is the first non-blank line, trimmed", `[{"description": "\n  \r\n  Sign in  \r\nmore"}]`, []Feature{
			{ID: "F-001", Title: "Sign in", Description: "\n  \r\n  Sign in  \r\nmore", Status: Pending},
		}},
		{"title cut to 80 characters", `[{"description": "` + long + `"}]`, []Feature{
			{ID: "F-001", Title: strings.Repeat("é", 79) + "…", Description: long, Status: Pending},
		}},
		{"title of exactly 80 characters kept", `[{"description": "` + long[:160] + `"}]`, []Feature{
			{ID: "F-001", Title: long[:160], Description: long[:160], Status: Pending},
		}},
		{"passes omitted or null is not tested", `[{"description": "a"}, {"description": "b", "passes": null}]`, []Feature{
			{ID: "F-001", Title: "a", Description: "a", Status: Pending},
			{ID: "F-002", Title: "b", Description: "b", Status: Pending},
		}},
		{"other keys ignored, ids from positions", `[{"id": "X", "description": "a", "status": "blocked"}]`, []Feature{
			{ID: "F-001", Title: "a", Description: "a", Status: Pending},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			want := &List{Version: 1, Format: FormatQuickstart, Features: tt.want}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// Ids keep three digits up to F-999 and grow beyond.
func TestParseQuickstartManyIDs(t *testing.T) {
	elems := make([]string, 1001)
	for i := range elems {
		elems[i] = fmt.Sprintf(`{"description": "feature %d"}`, i+1)
	}
	l, err := Parse([]byte("[" + strings.Join(elems, ",") + "]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		i  int
		id string
	}{{0, "F-001"}, {98, "F-099"}, {998, "F-999"}, {999, "F-1000"}, {1000, "F-1001"}} {
		if got := l.Features[c.i].ID; got != c.id {
			t.Errorf("feature %d: id %q, want %q", c.i, got, c.id)
		}
	}
}

// Validate applies the rules to a list built in code, as WriteFeatureList
// does before writing.
func TestValidate(t *testing.T) {
	f := func(id, title string, deps ...string) Feature { return Feature{ID: id, Title: title, DependsOn: deps} }
	tests := []struct {
		name string
		l    List
		want string // "" for valid
	}{
		{"zero list", List{}, ""},
		{"version 1", List{Version: 1, Features: []Feature{f("F-1", "One")}}, ""},
		{"empty status", List{Features: []Feature{{ID: "F-1", Title: "One", Status: ""}}}, ""},
		{"every status", List{Features: []Feature{
			{ID: "a", Title: "a", Status: Pending}, {ID: "b", Title: "b", Status: InProgress},
			{ID: "c", Title: "c", Status: Completed}, {ID: "d", Title: "d", Status: Blocked},
		}}, ""},
		{"cycle", List{Features: []Feature{f("a", "a", "b"), f("b", "b", "a")}}, ""},
		{"version 2", List{Version: 2}, `feature-list.json: version 2 is newer than this ctxgraphd reads (version 1); upgrade ctxgraphd, or write the list in the version 1 format`},
		{"negative version", List{Version: -3}, `feature-list.json: version -3 is not a version; this ctxgraphd reads version 1; write "version": 1`},
		{"empty id", List{Features: []Feature{f("", "One")}}, `feature-list.json: features[0].id is empty; give every feature a unique id such as "F-001"`},
		{"bad id", List{Features: []Feature{f("F-1", "One"), f("F\n2", "Two")}}, `feature-list.json: features[1].id "F\n2" is not a valid id; use letters, digits, '.', '_' and '-', starting with a letter or digit, such as "F-001"`},
		{"duplicate id", List{Features: []Feature{f("F-1", "One"), f("F-1", "Two")}}, `feature-list.json: features[1].id "F-1" is used twice (first at features[0]); ids must be unique`},
		{"blank title", List{Features: []Feature{f("F-1", "\n")}}, `feature-list.json: features[0].title is empty; give every feature a short title`},
		{"bad status", List{Features: []Feature{{ID: "F-1", Title: "One", Status: "tested"}}}, `feature-list.json: features[0].status "tested" is not a status; use one of pending, in_progress, completed, blocked`},
		{"unknown dependency", List{Features: []Feature{f("F-1", "One", "")}}, `feature-list.json: features[0].depends_on[0] "" is not a feature of this list; remove it, or add a feature with that id`},
		{"self dependency", List{Features: []Feature{f("F-1", "One", "F-1")}}, `feature-list.json: features[0].depends_on[0] "F-1" is the feature itself; a feature cannot depend on itself: remove it`},
		{"a setup", List{Setup: "cd web && npm ci > /dev/null 2>&1; python3 -m venv .venv"}, ""},
		{"a blank setup", List{Setup: "  "}, ""},
		{"a setup that is not shell", List{Setup: "npm ci && (make"}, `feature-list.json: setup "npm ci && (make" is not a shell command the daemon can run: 1:11: reached EOF without matching ` + "`(` with `)`" + `; write it as one line of sh, as you would type it, or leave it out`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v; want nil", err)
			case tt.want != "" && err == nil:
				t.Errorf("Validate: nil; want %s", tt.want)
			case tt.want != "" && err.Error() != tt.want:
				t.Errorf("Validate:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestParseErrorFormat(t *testing.T) {
	tests := []struct {
		e    ParseError
		want string
	}{
		{ParseError{File: "feature-list.json", Problem: "the file is empty"}, "feature-list.json: the file is empty"},
		{ParseError{File: "feature-list.json", Path: "version", Problem: "2 is newer", Fix: "upgrade"}, "feature-list.json: version 2 is newer; upgrade"},
		{ParseError{File: "feature-list.json", Line: 12, Column: 5, Problem: "invalid JSON: x", Fix: "fix it"}, "feature-list.json:12:5: invalid JSON: x; fix it"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// An id is what the regular expression it was first checked with accepted,
// ^[A-Za-z0-9][A-Za-z0-9._-]*$: lists already written must stay valid, and
// nothing it refused may pass.
func TestValidIDIsTheRegexpItReplaced(t *testing.T) {
	was := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	for _, id := range []string{
		"", "F-001", "f", "9", "F_1.2-b", ".F", "-F", "_F", "F/1", "F 1", "F\n", "é", "Fé", "F\xff", "a..b", "A-", "F-001\n",
	} {
		if got, want := validID(id), was.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, want %v", id, got, want)
		}
	}
}
