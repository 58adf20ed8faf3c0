package config

import (
	"fmt"
	"slices"
	"strings"
)

// unknownKey explains that a dotted name is no key, with the nearest key
// when one is close, else the keys that do exist around it.
func unknownKey(name string) string {
	if sections[name] {
		full := sectionKeys(name)
		for i := range full {
			full[i] = name + "." + full[i]
		}
		return fmt.Sprintf("%q is a section, not a key; set one of %s", name, strings.Join(full, ", "))
	}
	if sec, leaf, ok := strings.Cut(name, "."); ok && sec == "gates" && !strings.Contains(leaf, ".") {
		return unknownGate(leaf)
	}
	msg := fmt.Sprintf("unknown key %q", name)
	s := suggest(name, candidateNames())
	if s == "" {
		s = uniqueSuffix(candidateNames(), "."+name[strings.LastIndexByte(name, '.')+1:])
	}
	if s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	sec, _, _ := strings.Cut(name, ".")
	if sections[sec] && sec != name {
		return msg + fmt.Sprintf("; the keys under %s: are %s", sec, strings.Join(sectionKeys(sec), ", "))
	}
	return msg + "; the sections are " + strings.Join(topSections(), ", ")
}

// unknownGate explains that a name is no gate and lists the gates.
func unknownGate(name string) string {
	msg := fmt.Sprintf("unknown gate %q", name)
	if s := suggest(name, GateNames); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; the gates are " + strings.Join(GateNames, ", ")
}

// unknownEnv explains that a CTXGRAPHD_ variable names no key.
func unknownEnv(name string) string {
	if g, ok := strings.CutPrefix(name, envPrefix+"GATES_"); ok {
		return unknownGate(strings.ReplaceAll(strings.ToLower(g), "_", "-"))
	}
	msg := "unknown configuration variable"
	names := make([]string, 0, len(registry))
	for _, k := range registry {
		names = append(names, k.envName())
	}
	s := suggest(name, names)
	if s == "" {
		s = uniqueSuffix(names, "_"+strings.TrimPrefix(name, envPrefix))
	}
	if s != "" {
		return msg + fmt.Sprintf(" (did you mean %s?)", s)
	}
	return msg + "; a CTXGRAPHD_ variable sets the key it names, e.g. CTXGRAPHD_AGENT_TIMEOUT sets agent.timeout (unset it if it is not meant for ctxgraphd)"
}

// sectionKeys lists the names directly under a section, without the
// section: "command", "model", ...
func sectionKeys(sec string) []string {
	var out []string
	for _, k := range registry {
		if rest, ok := strings.CutPrefix(k.name, sec+"."); ok {
			out = append(out, rest)
		}
	}
	return out
}

// topSections lists the top-level sections in registry order.
func topSections() []string {
	var out []string
	for _, k := range registry {
		sec, _, _ := strings.Cut(k.name, ".")
		if !slices.Contains(out, sec) {
			out = append(out, sec)
		}
	}
	return out
}

// candidateNames are what a misspelt YAML or flag name may have meant: the
// keys and the sections (a YAML file misspells "agent:" as a whole).
func candidateNames() []string {
	out := make([]string, 0, len(registry)+len(sections))
	for _, k := range registry {
		out = append(out, k.name)
	}
	return append(out, topSections()...)
}

// suggest returns the candidate closest to name, or "" when none is close
// enough to be a likely typo. Case is ignored: "Agent" is "agent". Of
// candidates equally close, the one listed first is suggested, so that the
// answer never depends on map order.
func suggest(name string, candidates []string) string {
	lname := strings.ToLower(name)
	best, bestD := "", -1
	for _, c := range candidates {
		d := distance(lname, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD >= 0 && bestD <= max(1, min(3, len(name)/3)) {
		return best
	}
	return ""
}

// uniqueSuffix returns the one candidate that ends with suffix, or "". It
// finds a key put in the wrong section, which is too many edits away for
// suggest: timeout at the top for agent.timeout, agent.max_retries for
// limits.max_retries.
func uniqueSuffix(candidates []string, suffix string) string {
	found := ""
	for _, c := range candidates {
		if strings.HasSuffix(strings.ToLower(c), strings.ToLower(suffix)) {
			if found != "" {
				return ""
			}
			found = c
		}
	}
	return found
}

// distance is the optimal string alignment distance: Levenshtein's edits
// plus swapping two neighbours, the commonest typo ("agnet").
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows suffice: the current one, and two back for transpositions.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
