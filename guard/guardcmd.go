package guard

import (
	"bytes"
	"path"
	"regexp"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
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
	if err != nil {
		compiledRes.Store(expr, err)
		return nil, err
	}
	compiledRes.Store(expr, re)
	return re, nil
}

// compiled is compile for an expression Validate took.
func compiled(expr string) *regexp.Regexp {
	re, err := compile(expr)
	if err != nil {
		panic(err) // matches validates the rule first
	}
	return re
}

// maxShellDepth bounds how deep `sh -c` and eval arguments are read again.
const maxShellDepth = 3

// commandMatches searches re in a Bash command as it is written and in
// every simple command the shell would run, as the shell reads its words:
// quotes removed (`r”m -rf x`), each command of a list or pipeline alone
// (`true && make deploy` meets `^make deploy$`), and the arguments of
// `sh -c`, `bash -c` and `eval` read again as commands. What the shell
// decides only when it runs ($VAR, $(…), base64 -d | sh, a script's own
// content) stays out of its reach: a command guard is advisory (see
// docs/gates.md), and only a path guard holds whatever program writes.
func commandMatches(re *regexp.Regexp, cmd string) bool {
	return re.MatchString(cmd) || simpleCommandsMatch(re, cmd, 0)
}

func simpleCommandsMatch(re *regexp.Regexp, cmd string, depth int) bool {
	if depth > maxShellDepth || len(cmd) > 64<<10 {
		return false
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return false
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if found {
			return false
		}
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i] = wordText(w)
		}
		if re.MatchString(strings.Join(words, " ")) {
			found = true
			return false
		}
		switch name := path.Base(words[0]); {
		case name == "eval":
			found = simpleCommandsMatch(re, strings.Join(words[1:], " "), depth+1)
		case name == "sh" || name == "bash" || name == "dash" || name == "zsh" || name == "ksh":
			for i := 1; i+1 < len(words); i++ {
				if strings.HasPrefix(words[i], "-") && !strings.HasPrefix(words[i], "--") && strings.Contains(words[i], "c") {
					found = simpleCommandsMatch(re, words[i+1], depth+1)
					break
				}
			}
		}
		return !found
	})
	return found
}

// wordText is a word as the shell reads it where the text is literal
// (quotes removed, a backslash escape taken), and as written where the
// shell decides its value ($VAR, $(…)).
func wordText(w *syntax.Word) string {
	var b strings.Builder
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, part := range ps {
			switch p := part.(type) {
			case *syntax.Lit:
				b.WriteString(unescape(p.Value))
			case *syntax.SglQuoted:
				b.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			default:
				var buf bytes.Buffer
				if syntax.NewPrinter().Print(&buf, part) == nil {
					b.Write(buf.Bytes())
				}
			}
		}
	}
	parts(w.Parts)
	return b.String()
}

// unescape takes the backslash escapes of an unquoted literal.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
