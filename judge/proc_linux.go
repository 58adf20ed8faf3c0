package judge

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// IsRunProcess reports whether pid belongs to a run of this daemon, an
// agent's or one of the daemon's own test runs: it carries a run's token,
// or a run's process is among its ancestors. The
// control API refuses such a process what is for people (defense in depth:
// in the sandbox an agent cannot reach the socket at all).
func (j *Judge) IsRunProcess(pid int) bool {
	j.mu.Lock()
	pids := map[int]bool{}
	tokens := map[string]bool{}
	for _, r := range j.runs {
		if r.pid > 0 {
			pids[r.pid] = true
		}
		tokens[r.token] = true
	}
	testTokens := map[string]bool{}
	for token, p := range j.tests {
		if p > 0 {
			pids[p] = true
		}
		testTokens[token] = true
	}
	j.mu.Unlock()
	if len(tokens) == 0 && len(testTokens) == 0 {
		return false
	}
	if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil {
		runPrefix, testPrefix := []byte(control.RunTokenEnv+"="), []byte(TestRunTokenEnv+"=")
		for _, kv := range bytes.Split(env, []byte{0}) {
			if t, ok := bytes.CutPrefix(kv, runPrefix); ok && tokens[string(t)] {
				return true
			}
			if t, ok := bytes.CutPrefix(kv, testPrefix); ok && testTokens[string(t)] {
				return true
			}
		}
	}
	for p, hops := pid, 0; p > 1 && hops < 64; hops++ {
		if pids[p] {
			return true
		}
		p = parentOf(p)
	}
	return false
}

// parentOf reads a process's parent from /proc; 0 when it cannot.
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold anything: fields
	// are counted from the last ')'. After it: state, ppid.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
