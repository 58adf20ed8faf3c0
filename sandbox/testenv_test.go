package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// nearMisses are names a person or a CI could give a secret that differ
// from the allowed name n by a little: a prefix, a suffix, a case change, a
// separator, a look-alike letter, a space. None is n itself.
func nearMisses(n string) []string {
	out := []string{
		"X" + n, "_" + n, "MY_" + n, "CTXGRAPH_" + n, "CI_" + n, "LC_" + n, "npm_config_" + n,
		n + "_", n + "X", n + "S", n + "_FILE", n + "_TOKEN", n + "_" + n, n + n,
		strings.ToLower(n), strings.ToUpper(n), n[:1] + strings.ToLower(n[1:]),
		" " + n, n + " ", "\t" + n, n + "\x00",
		strings.ReplaceAll(n, "_", "-"), strings.ReplaceAll(n, "_", ""), strings.ReplaceAll(n, "_", "__"),
	}
	// One letter's case changed, one letter dropped, one doubled, one
	// replaced by a Cyrillic or full-width look-alike.
	lookalike := map[rune]rune{'A': 'А', 'C': 'С', 'E': 'Е', 'H': 'Н', 'O': 'О', 'P': 'Р', 'T': 'Т', 'X': 'Х', 'a': 'а', 'c': 'с', 'e': 'е', 'o': 'о'}
	rs := []rune(n)
	for i, r := range rs {
		flip := slices.Clone(rs)
		if unicode.IsUpper(r) {
			flip[i] = unicode.ToLower(r)
		} else {
			flip[i] = unicode.ToUpper(r)
		}
		out = append(out, string(flip), string(rs[:i])+string(rs[i+1:]), string(rs[:i+1])+string(rs[i:]))
		if l, ok := lookalike[r]; ok {
			alt := slices.Clone(rs)
			alt[i] = l
			out = append(out, string(alt))
		}
		full := slices.Clone(rs)
		if r > ' ' && r < 0x7f {
			full[i] = r - ' ' + 0xFF00
			out = append(out, string(full))
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == n || s == "" })
}

// The verdict's environment holds only allow-listed names, however many
// near misses of them the daemon's environment holds: each allowed name
// comes through with its value and nothing else does, no value of a near
// miss reaches the test under any name, and of the names TestEnv sets
// itself there is TMPDIR alone, where the daemon's environment sets one.
// LC_ is no prefix of trust: only the locale's categories pass.
func TestTestEnvHoldsOnlyAllowListedNames(t *testing.T) {
	allowed := map[string]bool{}
	for _, n := range testEnvNames {
		allowed[n] = true
	}
	var env []string
	want := map[string]string{}
	for i, n := range testEnvNames {
		v := fmt.Sprintf("/allowed/%d", i) // a PATH of absolute directories stays as it is
		env = append(env, n+"="+v)
		want[n] = v
	}
	secrets := 0
	misses := []string{"LC_", "LC", "LC-ALL", "LCALL", "LC_ALLX", "LC_ALL_", "LC_SECRET", "LC_TERMINAL", "LC__ALL", "lc_all", "Lc_ALL",
		"XLC_ALL", "L_C_ALL", "LC_ALL ", "LC_CTYPE2", "CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "BUILD_ID", "TMP", "TEMP",
		"CTXGRAPH_TEST_RUN", "CTXGRAPH_RUN_TOKEN", "CTXGRAPH_SOCKET", "CTXGRAPHD_STATE", "ANTHROPIC_API_KEY", "=", "=PATH"}
	for _, n := range testEnvNames {
		misses = append(misses, nearMisses(n)...)
	}
	misses = slices.DeleteFunc(misses, func(m string) bool { return allowed[m] }) // npm_config_cache's upper case is allowed too
	for _, m := range misses {
		secrets++
		env = append(env, m+"="+fmt.Sprintf("sk-secret-%d", secrets))
	}
	// The near misses come before and after the allowed names: a later
	// value does not hide an earlier one.
	env = append(slices.Clone(env[len(testEnvNames):]), env...)
	if len(misses) < 1000 {
		t.Fatalf("only %d near misses: the property needs a large environment", len(misses))
	}
	for _, withTmp := range []bool{false, true} {
		in := env
		if withTmp {
			in = append(slices.Clone(env), "TMPDIR=/var/tmp/daemon")
		}
		out := TestEnv(in, "/project", []string{"/agents"})
		got := map[string][]string{}
		for _, kv := range out {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Errorf("%q is not NAME=value", kv)
			}
			got[k] = append(got[k], v)
			if strings.Contains(v, "sk-secret-") {
				t.Errorf("a near miss's value reached the test as %s", kv)
			}
		}
		for k, vs := range got {
			switch {
			case k == "TMPDIR":
				if !withTmp || !slices.Equal(vs, []string{"/tmp"}) {
					t.Errorf("TMPDIR = %q with the daemon's TMPDIR set: %v; want /tmp only then", vs, withTmp)
				}
			case !allowed[k]:
				t.Errorf("%q, which is not allowed, reached the test (%q)", k, vs)
			}
		}
		for n, v := range want {
			if vs := got[n]; len(vs) == 0 || vs[len(vs)-1] != v {
				t.Errorf("%s = %q, want %q", n, vs, v)
			}
		}
	}
}
