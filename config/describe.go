package config

import (
	"strings"
)

// Describe prints every key with its effective value and where the value
// came from, one per line, aligned, in the order of Keys:
//
//	agent.timeout             = 30m0s   # default
//	agent.model               = opus    # project /p/.claude/ctxgraphd.yaml
//	limits.max_retries        = 5       # env CTXGRAPHD_LIMITS_MAX_RETRIES
//
// A key missing from p is shown as default. A key whose elements want a
// word (the hosts of sandbox.allowed_domains: whose registry each is) has
// it in comment lines below its own, indented to the values.
func (c *Config) Describe(p Provenance) string {
	names := make([]string, len(registry))
	values := make([]string, len(registry))
	nameW, valueW := 0, 0
	for i, k := range registry {
		names[i], values[i] = k.name, display(k.get(c))
		nameW = max(nameW, len(names[i]))
		if len(values[i]) <= maxAlignedValue {
			valueW = max(valueW, len(values[i]))
		}
	}
	var b strings.Builder
	for i := range registry {
		b.WriteString(pad(names[i], nameW))
		b.WriteString(" = ")
		b.WriteString(pad(values[i], valueW))
		b.WriteString("  # ")
		b.WriteString(p[names[i]].String())
		b.WriteByte('\n')
		if registry[i].notes == nil {
			continue
		}
		for _, n := range registry[i].notes(c) {
			b.WriteString(strings.Repeat(" ", nameW+len(" = ")))
			b.WriteString("# ")
			b.WriteString(n)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// maxAlignedValue is the widest value that sets the column of comments: a
// list of globs is long, and the other lines should not pay for it.
const maxAlignedValue = 24

// pad right-pads s with spaces to width bytes; keys and the usual values are
// ASCII, and a wide value only shifts its own comment.
func pad(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return s + strings.Repeat(" ", width-len(s))
}
