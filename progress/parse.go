package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ctxgraphd/ctxgraphd/internal/shellcmd"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// ParseError is a problem with the feature list: which value is wrong, what
// is wrong with it and how to fix it. It reads
//
//	feature-list.json: features[3].id "F-3" is used twice (first at features[1]); ids must be unique
//	feature-list.json:12:5: invalid JSON: unexpected end of input (the file is incomplete: was it written half-way?); complete the JSON or restore the previous version
//
// so that a person, or an agent whose write was refused, can act on it.
type ParseError struct {
	File         string // "feature-list.json"
	Path         string // JSON path of the value, like features[3].id; empty for the whole file
	Line, Column int    // 1-based position of a JSON syntax error (column in characters); 0 if unknown
	Problem      string // what is wrong, read after Path: `"F-3" is used twice`
	Fix          string // what to do about it
}

// Error returns "File[:Line:Column]: [Path ]Problem[; Fix]".
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteByte(' ')
	}
	b.WriteString(e.Problem)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

func problem(path, prob, fix string) *ParseError {
	return &ParseError{File: FeatureListFile, Path: path, Problem: prob, Fix: fix}
}

// validID reports whether id may be an id: ids name evidence directories
// (evidence/<id>/) and appear in shell-quoted prompts, so an ASCII letter
// or digit, then letters, digits, '.', '_' or '-': no slashes, no spaces
// and no leading dot. A loop rather than a regular expression: the hook
// deciding alone reads the list on every call.
func validID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return id != ""
}

// titleRunes is the longest title derived from a quickstart description.
const titleRunes = 80

// Parse reads a feature list in either format (see Format) and validates it.
// The error, when there is one, is a *ParseError naming the first problem
// found. A dependency cycle is not an error (see Cycles).
func Parse(data []byte) (*List, error) {
	// An editor on Windows may save with a byte-order mark, which is not JSON
	// but says nothing about the content.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))

	// A first pass over the whole file finds syntax errors, with their
	// offset, before any typing: a json.Decoder would stop at the end of the
	// first value and miss trailing garbage.
	var top json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, syntaxError(data, err)
	}
	var l *List
	var err *ParseError
	switch kind(top) {
	case "an object":
		l, err = parseV1(top)
	case "an array":
		l, err = parseQuickstart(top)
	default:
		return nil, problem("", "the top level is "+kind(top)+"; expected an object",
			`write {"version": 1, "features": [...]} (or the quickstart's array of features)`)
	}
	if err != nil {
		return nil, err
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return l, nil
}

// syntaxError turns an error of encoding/json into a ParseError with the
// line and column of the problem.
func syntaxError(data []byte, err error) *ParseError {
	if len(bytes.TrimSpace(data)) == 0 {
		return problem("", "the file is empty (was it written half-way?)",
			`write {"version": 1, "features": []} at least, or restore the previous version`)
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		// Unmarshal into a RawMessage fails only on syntax; keep whatever
		// else it says rather than guess.
		return problem("", "invalid JSON: "+err.Error(), "fix the JSON syntax")
	}
	msg := se.Error()
	offset := int(min(max(se.Offset, 0), int64(len(data))))
	// The scanner reports the end of input either as such or as an invalid
	// space fed after the last byte (in the middle of `tru` or `1.`).
	atEnd := strings.HasPrefix(msg, "unexpected end of JSON input") ||
		(offset == len(data) && strings.HasPrefix(msg, "invalid character ' '"))
	e := problem("", "", "")
	if atEnd {
		end := len(bytes.TrimRight(data, " \t\r\n"))
		e.Line, e.Column = position(data, end)
		e.Problem = "invalid JSON: unexpected end of input (the file is incomplete: was it written half-way?)"
		e.Fix = "complete the JSON or restore the previous version"
		return e
	}
	// Offset counts the bytes read, the offending one included.
	at := max(offset-1, 0)
	e.Line, e.Column = position(data, at)
	e.Problem = "invalid JSON: " + msg
	e.Fix = "fix the JSON syntax at that position"
	switch {
	case at < len(data) && (data[at] == '}' || data[at] == ']') && prevByte(data, at) == ',':
		e.Problem += " (a comma before it?)"
		e.Fix = "remove the comma: JSON does not allow one after the last element"
	case at < len(data) && data[at] == '/':
		e.Problem += " (a comment?)"
		e.Fix = "remove the comment: JSON has none"
	}
	return e
}

// position returns the 1-based line and column (counted in characters, as
// editors do) of byte offset off in data.
func position(data []byte, off int) (line, col int) {
	off = min(off, len(data))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[start:])
}

// prevByte returns the last non-space byte before data[at], or 0.
func prevByte(data []byte, at int) byte {
	b := bytes.TrimRight(data[:at], " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[len(b)-1]
}

// kind names the JSON type of a syntactically valid value, as error
// messages say it: "a string", "an array", ...
func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// object is a JSON object whose values are not decoded yet. Keys match
// exactly: encoding/json would match struct fields case-insensitively and
// accept "Tested" for "tested", which is not the contract.
type object map[string]json.RawMessage

func decodeObject(raw json.RawMessage) object {
	var o object
	if json.Unmarshal(raw, &o) != nil {
		return nil // callers checked kind first; a nil object has no keys
	}
	return o
}

// present reports whether key is set to something other than null: an
// optional value written as null is taken as absent.
func (o object) present(key string) bool {
	raw, ok := o[key]
	return ok && kind(raw) != "null"
}

// missing describes an absent required key, with a hint when the key is
// there in another case.
func (o object) missing(key string) string {
	if _, ok := o[key]; ok {
		return "is null"
	}
	for k := range o {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("is missing (there is %q: keys are case-sensitive)", k)
		}
	}
	return "is missing"
}

// str decodes o[key] as a string; an absent or null key gives "".
func (o object) str(path, key string) (string, *ParseError) {
	if !o.present(key) {
		return "", nil
	}
	raw := o[key]
	if k := kind(raw); k != "a string" {
		return "", problem(path+"."+key, "is "+k+"; expected a string", `write it as a JSON string in double quotes`)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // a valid JSON string always decodes
	return s, nil
}

// stringList decodes o[key] as an array of strings; absent, null and empty
// all give nil.
func (o object) stringList(path, key string) ([]string, *ParseError) {
	if !o.present(key) {
		return nil, nil
	}
	p := path + "." + key
	raw := o[key]
	if k := kind(raw); k != "an array" {
		fix := `write it as an array of strings, ["…"]`
		if k == "a string" {
			fix = `put the string in an array: ["…"]`
		}
		return nil, problem(p, "is "+k+"; expected an array of strings", fix)
	}
	var elems []json.RawMessage
	_ = json.Unmarshal(raw, &elems)
	var out []string
	for i, e := range elems {
		if k := kind(e); k != "a string" {
			return nil, problem(fmt.Sprintf("%s[%d]", p, i), "is "+k+"; expected a string", `write each element as a JSON string in double quotes`)
		}
		var s string
		_ = json.Unmarshal(e, &s)
		out = append(out, s)
	}
	return out, nil
}

// boolean decodes o[key] as a boolean; absent or null gives false.
func (o object) boolean(path, key string) (bool, *ParseError) {
	if !o.present(key) {
		return false, nil
	}
	raw := o[key]
	if k := kind(raw); k != "a boolean" {
		return false, problem(path+"."+key, "is "+k+"; expected true or false", "write true or false, without quotes")
	}
	return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("true")), nil
}

// parseV1 decodes {"version": 1, "features": [...]}, reporting wrong JSON
// types; the rules about values are Validate's.
func parseV1(raw json.RawMessage) (*List, *ParseError) {
	top := decodeObject(raw)
	l := &List{Version: 1, Format: FormatV1}
	// A missing version is read as 1: the key is there to recognise lists
	// from a newer ctxgraphd, and a list without it is not one.
	if top.present("version") {
		v := top["version"]
		if k := kind(v); k != "a number" {
			return nil, problem("version", "is "+k+"; expected the number 1", `write "version": 1`)
		}
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		if err != nil {
			return nil, problem("version", fmt.Sprintf("%s is not a version number; this ctxgraphd reads version 1", bytes.TrimSpace(v)), `write "version": 1`)
		}
		if n == 0 {
			// Only a List built in code may leave the version unset.
			return nil, problem("version", "0 is not a version; this ctxgraphd reads version 1", `write "version": 1`)
		}
		if err := checkVersion(n); err != nil {
			return nil, err
		}
		l.Version = n
	}
	if top.present("setup") {
		if k := kind(top["setup"]); k != "a string" {
			return nil, problem("setup", "is "+k+"; expected a shell command as a string", `write "setup": "npm ci" (or leave it out)`)
		}
		_ = json.Unmarshal(top["setup"], &l.Setup) // a valid JSON string always decodes
	}
	if !top.present("features") {
		return nil, problem("features", top.missing("features"), `add "features": [] (an empty list is valid) with one object per feature`)
	}
	if k := kind(top["features"]); k != "an array" {
		return nil, problem("features", "is "+k+"; expected an array of features", `write "features": [{"id": "F-001", "title": "…", …}, …]`)
	}
	var elems []json.RawMessage
	_ = json.Unmarshal(top["features"], &elems)
	l.Features = make([]Feature, 0, len(elems))
	for i, e := range elems {
		f, err := parseFeature(fmt.Sprintf("features[%d]", i), e)
		if err != nil {
			return nil, err
		}
		l.Features = append(l.Features, f)
	}
	return l, nil
}

func parseFeature(path string, raw json.RawMessage) (Feature, *ParseError) {
	var f Feature
	if k := kind(raw); k != "an object" {
		return f, problem(path, "is "+k+`; expected an object {"id": …, "title": …, …}`, "write each feature as a JSON object")
	}
	o := decodeObject(raw)
	for _, fd := range Fields {
		if fd.Required && !o.present(fd.Key) {
			fix := "give every feature a " + fd.Key
			switch fd.Key {
			case "id":
				fix = `give every feature a unique id such as "F-001"`
			case "title":
				fix = "give every feature a short title"
			}
			return f, problem(path+"."+fd.Key, o.missing(fd.Key), fix)
		}
	}
	for _, fd := range Fields {
		var err *ParseError
		switch fd.Kind {
		case TextField, StatusField:
			*fd.text(&f), err = o.str(path, fd.Key)
		case TextListField:
			*fd.list(&f), err = o.stringList(path, fd.Key)
		case FlagField:
			*fd.flag(&f), err = o.boolean(path, fd.Key)
		}
		if err != nil {
			return Feature{}, err
		}
	}
	if f.Status == "" {
		f.Status = Pending
	}
	return f, nil
}

// parseQuickstart decodes the quickstart's array of {category, description,
// steps, passes}. Ids come from positions (F-001, ...), the title from the
// first line of the description, and passes is tested: a passing feature is
// completed, any other pending.
func parseQuickstart(raw json.RawMessage) (*List, *ParseError) {
	var elems []json.RawMessage
	_ = json.Unmarshal(raw, &elems)
	l := &List{Version: 1, Format: FormatQuickstart, Features: make([]Feature, 0, len(elems))}
	for i, e := range elems {
		path := fmt.Sprintf("[%d]", i)
		if k := kind(e); k != "an object" {
			return nil, problem(path, "is "+k+`; expected an object {"category": …, "description": …, "steps": […], "passes": false}`, "write each feature as a JSON object")
		}
		o := decodeObject(e)
		f := Feature{ID: fmt.Sprintf("F-%03d", i+1)}
		var err *ParseError
		if f.Category, err = o.str(path, "category"); err != nil {
			return nil, err
		}
		if !o.present("description") {
			return nil, problem(path+".description", o.missing("description"), "describe every feature: the first line of its description becomes its title")
		}
		if f.Description, err = o.str(path, "description"); err != nil {
			return nil, err
		}
		if f.Title = quickstartTitle(f.Description); f.Title == "" {
			return nil, problem(path+".description", "is empty", "describe every feature: the first line of its description becomes its title")
		}
		if f.Steps, err = o.stringList(path, "steps"); err != nil {
			return nil, err
		}
		if f.Tested, err = o.boolean(path, "passes"); err != nil {
			return nil, err
		}
		f.Status = Pending
		if f.Tested {
			f.Status = Completed
		}
		l.Features = append(l.Features, f)
	}
	return l, nil
}

// quickstartTitle is the first non-blank line of a description, cut to
// titleRunes characters (the last of them an ellipsis when it was cut).
func quickstartTitle(desc string) string {
	for line := range strings.Lines(desc) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		return textcut.Runes(line, titleRunes)
	}
	return ""
}

func checkVersion(v int) *ParseError {
	switch {
	case v == 1 || v == 0: // 0 is the zero value of a List built in code
		return nil
	case v > 1:
		return problem("version", fmt.Sprintf("%d is newer than this ctxgraphd reads (version 1)", v),
			"upgrade ctxgraphd, or write the list in the version 1 format")
	}
	return problem("version", fmt.Sprintf("%d is not a version; this ctxgraphd reads version 1", v), `write "version": 1`)
}

// Validate checks the rules of the feature list that do not depend on how it
// was written: the version is 1 (0, the zero value, counts
// as 1); every id is non-empty, made of letters, digits, '.', '_' and '-'
// (starting with a letter or digit) and unique; every title is non-blank;
// every status is one of the four or empty (pending); every dependency names
// another feature of the list; the setup, when there is one, is valid shell.
// The error is a *ParseError for the first problem, with paths as in the v1
// format (features[3].id).
func (l *List) Validate() error {
	if err := checkVersion(l.Version); err != nil {
		return err
	}
	if bad := shellcmd.ParseTest(l.Setup).Invalid; strings.TrimSpace(l.Setup) != "" && bad != "" {
		return problem("setup", fmt.Sprintf("%q is not a shell command the daemon can run: %s", l.Setup, bad), "write it as one line of sh, as you would type it, or leave it out")
	}
	first := make(map[string]int, len(l.Features))
	for i, f := range l.Features {
		path := fmt.Sprintf("features[%d]", i)
		switch {
		case f.ID == "":
			return problem(path+".id", "is empty", `give every feature a unique id such as "F-001"`)
		case !validID(f.ID):
			return problem(path+".id", fmt.Sprintf("%q is not a valid id", f.ID),
				`use letters, digits, '.', '_' and '-', starting with a letter or digit, such as "F-001"`)
		}
		if j, dup := first[f.ID]; dup {
			return problem(path+".id", fmt.Sprintf("%q is used twice (first at features[%d])", f.ID, j), "ids must be unique")
		}
		first[f.ID] = i
		if strings.TrimSpace(f.Title) == "" {
			return problem(path+".title", "is empty", "give every feature a short title")
		}
		if !f.Status.valid() {
			return problem(path+".status", fmt.Sprintf("%q is not a status", f.Status),
				"use one of pending, in_progress, completed, blocked")
		}
	}
	for i, f := range l.Features {
		for k, d := range f.DependsOn {
			path := fmt.Sprintf("features[%d].depends_on[%d]", i, k)
			switch _, ok := first[d]; {
			case d == f.ID:
				return problem(path, fmt.Sprintf("%q is the feature itself", d), "a feature cannot depend on itself: remove it")
			case !ok:
				return problem(path, fmt.Sprintf("%q is not a feature of this list", d), "remove it, or add a feature with that id")
			}
		}
	}
	return nil
}
