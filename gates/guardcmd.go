package gates

import (
	"bytes"
	"path"
	"regexp"
	"strings"

	shsyntax "mvdan.cc/sh/v3/syntax"
)

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
func commandMatches(re *regexp.Regexp, cmd *shellView) bool {
	if re.MatchString(cmd.line) {
		return true
	}
	for _, c := range cmd.simple() {
		if re.MatchString(c) {
			return true
		}
	}
	return false
}

// shellView is a Bash command as written and, parsed once for all the
// guards of a call, its simple commands as the shell reads them.
type shellView struct {
	line   string
	parsed bool
	cmds   []string
}

func (v *shellView) simple() []string {
	if !v.parsed {
		v.parsed = true
		v.cmds = simpleCommands(v.line, 0, nil)
	}
	return v.cmds
}

// simpleCommands appends to out every simple command of cmd, its words
// as the shell reads them joined by a space, and those of the arguments
// of sh -c and eval, read again to maxShellDepth.
func simpleCommands(cmd string, depth int, out []string) []string {
	if depth > maxShellDepth || len(cmd) > 64<<10 {
		return out
	}
	f, err := shsyntax.NewParser(shsyntax.Variant(shsyntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return out
	}
	shsyntax.Walk(f, func(n shsyntax.Node) bool {
		call, ok := n.(*shsyntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i] = wordText(w)
		}
		out = append(out, strings.Join(words, " "))
		switch name := path.Base(words[0]); {
		case name == "eval":
			out = simpleCommands(strings.Join(words[1:], " "), depth+1, out)
		case name == "sh" || name == "bash" || name == "dash" || name == "zsh" || name == "ksh":
			for i := 1; i+1 < len(words); i++ {
				if strings.HasPrefix(words[i], "-") && !strings.HasPrefix(words[i], "--") && strings.Contains(words[i], "c") {
					out = simpleCommands(words[i+1], depth+1, out)
					break
				}
			}
		}
		return true
	})
	return out
}

// wordText is a word as the shell reads it where the text is literal
// (quotes removed, a backslash escape taken), and as written where the
// shell decides its value ($VAR, $(…)).
func wordText(w *shsyntax.Word) string {
	var b strings.Builder
	var parts func([]shsyntax.WordPart)
	parts = func(ps []shsyntax.WordPart) {
		for _, part := range ps {
			switch p := part.(type) {
			case *shsyntax.Lit:
				b.WriteString(unescape(p.Value))
			case *shsyntax.SglQuoted:
				b.WriteString(p.Value)
			case *shsyntax.DblQuoted:
				parts(p.Parts)
			default:
				var buf bytes.Buffer
				if shsyntax.NewPrinter().Print(&buf, part) == nil {
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
