package progress

import (
	"slices"

	"github.com/ctxgraphd/ctxgraphd/agents/role"
)

// FieldKind is how a feature's field is written in JSON.
type FieldKind int

// The kinds of feature fields.
const (
	TextField     FieldKind = iota + 1 // a string
	TextListField                      // an array of strings
	StatusField                        // a string, one of the statuses
	FlagField                          // true or false
)

// Policy says who may change a field of a feature once the initializer has
// written the list. The value rules (which statuses, what
// a tester's tested: true means) are the gates' (package gates); who may
// touch the field at all is said here, once, for every field.
type Policy int

// The policies. The zero value is no policy: a field declared without one
// is a mistake that TestEveryFieldHasAPolicy catches, never a field agents
// may write.
const (
	// Fixed: only a person changes it (with ctl, or by editing the list
	// while the daemon is paused). Ids, titles, steps, tests, scopes, …
	Fixed Policy = iota + 1
	// OwnStatus: the coding and the tester run of the feature.
	OwnStatus
	// OwnVerdict: the tester run of the feature.
	OwnVerdict
)

// Writers returns the roles that may change a field under p, on their own
// feature.
func (p Policy) Writers() []role.Role {
	switch p {
	case OwnStatus:
		return []role.Role{role.Coder, role.Tester}
	case OwnVerdict:
		return []role.Role{role.Tester}
	}
	return nil
}

// Field is one key of a feature (a contract: the README lists them). Fields lists
// them all, and Parse, Diff, Clone and the gates read that one table, so
// that a new key is parsed, compared, copied and refused to agents (unless
// its policy says otherwise) without being named anywhere else.
type Field struct {
	Key      string // the JSON key
	Kind     FieldKind
	Required bool // Parse refuses a feature without it
	Policy   Policy

	text func(*Feature) *string
	list func(*Feature) *[]string
	flag func(*Feature) *bool
}

// Fields are the keys of a feature, in the order Marshal writes them.
var Fields = []Field{
	{Key: "id", Kind: TextField, Required: true, Policy: Fixed, text: func(f *Feature) *string { return &f.ID }},
	{Key: "title", Kind: TextField, Required: true, Policy: Fixed, text: func(f *Feature) *string { return &f.Title }},
	{Key: "description", Kind: TextField, Policy: Fixed, text: func(f *Feature) *string { return &f.Description }},
	{Key: "category", Kind: TextField, Policy: Fixed, text: func(f *Feature) *string { return &f.Category }},
	{Key: "steps", Kind: TextListField, Policy: Fixed, list: func(f *Feature) *[]string { return &f.Steps }},
	{Key: "depends_on", Kind: TextListField, Policy: Fixed, list: func(f *Feature) *[]string { return &f.DependsOn }},
	{Key: "scope", Kind: TextListField, Policy: Fixed, list: func(f *Feature) *[]string { return &f.Scope }},
	{Key: "test", Kind: TextField, Policy: Fixed, text: func(f *Feature) *string { return &f.Test }},
	{Key: "status", Kind: StatusField, Policy: OwnStatus, text: func(f *Feature) *string { return (*string)(&f.Status) }},
	{Key: "tested", Kind: FlagField, Policy: OwnVerdict, flag: func(f *Feature) *bool { return &f.Tested }},
	{Key: "evidence", Kind: TextListField, Policy: OwnVerdict, list: func(f *Feature) *[]string { return &f.Evidence }},
}

// FieldByKey returns the field with the JSON key k.
func FieldByKey(k string) (Field, bool) {
	for _, f := range Fields {
		if f.Key == k {
			return f, true
		}
	}
	return Field{}, false
}

// MayWrite reports whether an agent of role r may change the field on its
// own feature.
func (fd Field) MayWrite(r role.Role) bool {
	return slices.Contains(fd.Policy.Writers(), r)
}

// Value returns the field's value in f, typed by its kind: string, Status,
// []string (a copy) or bool. An empty status reads as Pending and an empty
// list as nil, so that values that Marshal writes alike compare equal.
func (fd Field) Value(f *Feature) any {
	switch fd.Kind {
	case TextField:
		return *fd.text(f)
	case StatusField:
		return Status(*fd.text(f)).normal()
	case TextListField:
		l := *fd.list(f)
		if len(l) == 0 {
			return []string(nil)
		}
		return slices.Clone(l)
	case FlagField:
		return *fd.flag(f)
	}
	panic("progress: field " + fd.Key + " has no kind")
}

// Equal reports whether the field has the same value in a and b.
func (fd Field) Equal(a, b *Feature) bool {
	switch fd.Kind {
	case TextListField:
		return slices.Equal(*fd.list(a), *fd.list(b))
	case StatusField:
		return Status(*fd.text(a)).normal() == Status(*fd.text(b)).normal()
	case FlagField:
		return *fd.flag(a) == *fd.flag(b)
	}
	return *fd.text(a) == *fd.text(b)
}

// Copy sets the field of dst to its value in src (lists copied).
func (fd Field) Copy(dst, src *Feature) {
	switch fd.Kind {
	case TextListField:
		*fd.list(dst) = slices.Clone(*fd.list(src))
	case FlagField:
		*fd.flag(dst) = *fd.flag(src)
	default:
		*fd.text(dst) = *fd.text(src)
	}
}
