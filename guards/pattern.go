package guards

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
)

// MaxPattern is the longest pattern (match.command, match.value,
// match.path) a guard may have: every hook of every run searches it.
const MaxPattern = 1024

// compiledRes holds the guards' regular expressions compiled once: a
// hook judges every active guard on every tool call.
var compiledRes sync.Map // string → *regexp.Regexp or error

// compile compiles a guard's regular expression, once.
func compile(expr string) (*regexp.Regexp, error) {
	if v, ok := compiledRes.Load(expr); ok {
		if re, ok := v.(*regexp.Regexp); ok {
			return re, nil
		}
		return nil, v.(error)
	}
	re, err := regexp.Compile(expr)
	if err == nil {
		if n := programSize(expr); n > MaxProgram {
			re, err = nil, &tooLarge{n}
		}
	}
	if err != nil {
		compiledRes.Store(expr, err)
		return nil, err
	}
	compiledRes.Store(expr, re)
	return re, nil
}

// MaxProgram bounds the instructions of a guard's regular expression. Go
// searches in time linear in the text, times the program's size: a short
// pattern can compile to a large program (`[\s\S]{1000}` sixty times is
// 60,000 instructions, some twenty seconds for a 70 KB command), and a
// hook that outlives its timeout decides nothing.
const MaxProgram = 1000

// tooLarge is a regular expression whose program exceeds MaxProgram.
type tooLarge struct{ n int }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("it compiles to %d instructions, at most %d: every hook searches it through every command; repeat less ({n} counts copies)", e.n, MaxProgram)
}

// programSize is the number of instructions expr compiles to.
func programSize(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// Compiled is compile for an expression Validate took: it panics on any
// other (every caller validates the rule first).
func Compiled(expr string) *regexp.Regexp {
	re, err := compile(expr)
	if err != nil {
		panic(err) // matches validates the rule first
	}
	return re
}
