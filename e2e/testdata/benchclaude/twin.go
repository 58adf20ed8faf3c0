package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// twin is what runTwin writes down of a run's bare twin.
type twin struct {
	// Wall is the bare claude process's wall time, start to exit.
	Wall time.Duration `json:"wall_ns"`
	// OK: it exited 0.
	OK bool `json:"ok"`
	// Delay is how long benchclaude took before it executed the run's
	// claude (the twin, its copy of the project and all): the part of the
	// run's wall time, as the daemon measured it, that is not the run's.
	Delay time.Duration `json:"delay_ns"`
	// CPU is the CPU time of every process benchclaude waited for (the
	// copy, the twin and what it waited for), which the daemon counts in
	// the run's.
	CPU time.Duration `json:"cpu_ns"`
}

// runTwin runs, right before a run of the loop, the same claude run as a
// person would type it: on a copy of the project as it stands, without
// --settings (no hooks, no sandbox) and without --mcp-config, without the
// daemon's variables, with a Claude Code home of its own under dir; and
// appends its times to dir/twins.jsonl. The pair then sees the same
// machine, which a replay after the whole loop does not. The twin keeps
// the run's bounds (prlimit's, inherited), which is all of the daemon's
// it keeps.
func runTwin(claude string, args []string, dir string, start time.Time) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	project := filepath.Join(tmp, filepath.Base(wd))
	if out, err := exec.Command("cp", "-a", wd, project).CombinedOutput(); err != nil {
		return fmt.Errorf("copying the project: %v: %s", err, out)
	}
	var bare []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--settings" || args[i] == "--mcp-config" {
			i++
			continue
		}
		bare = append(bare, strings.ReplaceAll(args[i], wd, project))
	}
	home := filepath.Join(dir, "home")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "CTXGRAPH"), strings.HasPrefix(k, "BENCH_"),
			k == "HOME", k == "CLAUDE_CONFIG_DIR", k == "ENABLE_TOOL_SEARCH", k == "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"))
	cmd := exec.Command(claude, bare...)
	cmd.Dir, cmd.Env = project, env
	began := time.Now()
	runErr := cmd.Run()
	t := twin{Wall: time.Since(began), OK: runErr == nil}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err == nil {
		t.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t.Delay = time.Since(start)
	line, err := json.Marshal(t)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "twins.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}
