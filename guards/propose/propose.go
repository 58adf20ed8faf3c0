// Package propose turns the context graph's patterns into proposed guards:
// what happened again and again in a project becomes a rule a person can
// promote (ctl guards promote), never one that acts by itself.
package propose

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/guards"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// DefaultThreshold is how often something must happen before a guard
// is proposed against it (graph.guard_threshold).
const DefaultThreshold = 3

// maxQuoted bounds a command quoted in a proposal's message, as the graph
// bounds the commands of its patterns (internal/textcut).
const maxQuoted = 300

// Propose turns patterns that happened at least threshold times into
// proposed guards, where a concrete match can be read off them:
//
//   - a file put back after runs again and again: a path guard on writes
//     of that file (by the file tools and by plain Bash writes), for the
//     role that kept writing it;
//   - a refusal whose traces were all about one file: a path guard too;
//   - a command that kept failing and is not a test (a failing test is a
//     verdict): a command guard that says how often it failed.
//
// Other refusals get none: the built-in gate that refused them already
// holds. A proposal's id is a hash of what it matches, so proposing again
// from the same pattern gives the same guard. guards.Proposed guards do nothing
// until a person promotes them.
func Propose(ps []control.Pattern, threshold int, now time.Time) []guards.Rule {
	if threshold < 1 {
		threshold = DefaultThreshold
	}
	var out []guards.Rule
	seen := map[string]bool{}
	for _, p := range ps {
		if p.Count < threshold {
			continue
		}
		r, ok := propose(p)
		if !ok || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		r.Status, r.Created = guards.Proposed, now.UTC()
		out = append(out, r)
	}
	return out
}

// propose derives the guard of one pattern, if one can be derived.
func propose(p control.Pattern) (guards.Rule, bool) {
	var r guards.Rule
	who := p.Role
	if who == "" {
		who = "agents"
	}
	switch {
	case p.Kind == control.PatternRevertedFile && p.Path != "":
		r = guards.Rule{Role: p.Role, Match: guards.Match{Path: globQuote(p.Path)},
			Message:    fmt.Sprintf("%s was put back after %d runs: %s kept changing it against the gates", p.Path, p.Count, who),
			Suggestion: fmt.Sprintf("leave %s as it is; if it must change, say why in your final report", p.Path)}
	case p.Kind == control.PatternRefusal && p.Path != "" && !strings.HasPrefix(p.Gate, guards.Prefix):
		r = guards.Rule{Role: p.Role, Match: guards.Match{Path: globQuote(p.Path)},
			Message:    fmt.Sprintf("writes of %s were refused %d times by %s (%s)", p.Path, p.Count, p.Gate, p.Code),
			Suggestion: fmt.Sprintf("leave %s alone; what your feature needs is elsewhere", p.Path)}
	case p.Kind == control.PatternFailingCommand && p.Command != "" && !p.Test:
		r = guards.Rule{Tool: "Bash", Match: guards.Match{Command: commandRegexp(p.Command)},
			Message:    fmt.Sprintf("`%s` failed %d times in this project's runs", textcut.Line(p.Command, maxQuoted), p.Count),
			Suggestion: "look at why it fails (ctxgraphd ctl patterns, the runs' traces) before running it again; another command may do what you need"}
	default:
		return r, false
	}
	r.Source = "pattern " + p.Kind
	// The id is of what the guard matches: a file put back and the
	// refusals of its writes propose one guard, not two.
	if r.Match.Path != "" {
		r.ID = proposalID("path", r.Role, r.Match.Path)
	} else {
		r.ID = proposalID("command", r.Match.Command)
	}
	return r, validWithStatus(r)
}

// validWithStatus validates r as it will be stored (proposed).
func validWithStatus(r guards.Rule) bool {
	r.Status = guards.Proposed
	return r.Validate() == nil
}

// proposalID is a stable id of what a proposal matches: g- and 8 hex digits.
func proposalID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "g-" + hex.EncodeToString(sum[:4])
}

// commandRegexp matches cmd as written, spacing aside.
func commandRegexp(cmd string) string {
	fields := strings.Fields(cmd)
	for i, f := range fields {
		fields[i] = regexp.QuoteMeta(f)
	}
	return `^\s*` + strings.Join(fields, `\s+`) + `\s*$`
}

// globQuote makes a path a glob that matches it alone.
func globQuote(path string) string {
	var b strings.Builder
	for _, c := range path {
		if strings.ContainsRune(`*?[]{}\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
