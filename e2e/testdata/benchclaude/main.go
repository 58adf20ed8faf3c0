// Command benchclaude stands in for claude in BenchmarkLoopOverhead: it
// takes one part of a run away and executes the real CLI in its own place
// (the same pid, so the daemon supervises claude itself), and it may write
// down each run for the bare replay, or run its bare twin first.
//
//	BENCH_CLAUDE  the real claude
//	BENCH_DROP    what to take away: "mcp" (--mcp-config and its value),
//	              "hooks" (the "hooks" key of --settings), or both, comma
//	              separated
//	BENCH_RECORD  a file to which each run is appended as a JSON line
//	              (working directory, arguments, environment)
//	BENCH_DEBUG   a directory where each run leaves Claude Code's debug
//	              log (--debug-file), which times every hook and MCP
//	              connection as the CLI sees them
//	BENCH_TWIN    a directory: before each run, its bare twin (twin.go)
//	              runs there, and twins.jsonl gets a line of its times
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

type record struct {
	Dir  string   `json:"dir"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
}

func main() {
	start := time.Now()
	claude := os.Getenv("BENCH_CLAUDE")
	if claude == "" {
		fmt.Fprintln(os.Stderr, "benchclaude: BENCH_CLAUDE is not set")
		os.Exit(2)
	}
	drop := strings.Split(os.Getenv("BENCH_DROP"), ",")
	var args []string
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		switch {
		case a == "--mcp-config" && slices.Contains(drop, "mcp") && i+1 < len(os.Args):
			i++
			continue
		case a == "--settings" && slices.Contains(drop, "hooks") && i+1 < len(os.Args):
			i++
			var s map[string]any
			if err := json.Unmarshal([]byte(os.Args[i]), &s); err != nil {
				fmt.Fprintf(os.Stderr, "benchclaude: --settings: %v\n", err)
				os.Exit(2)
			}
			delete(s, "hooks")
			data, _ := json.Marshal(s)
			args = append(args, a, string(data))
			continue
		}
		args = append(args, a)
	}
	if path := os.Getenv("BENCH_RECORD"); path != "" && len(args) > 0 && args[0] == "-p" {
		dir, _ := os.Getwd()
		line, _ := json.Marshal(record{Dir: dir, Args: args, Env: os.Environ()})
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = f.Write(append(line, '\n'))
			f.Close()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchclaude: recording the run: %v\n", err)
			os.Exit(2)
		}
	}
	if dir := os.Getenv("BENCH_DEBUG"); dir != "" && len(args) > 0 && args[0] == "-p" {
		f, err := os.CreateTemp(dir, "run-*.log")
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchclaude: %v\n", err)
			os.Exit(2)
		}
		f.Close()
		args = append([]string{"-p", "--debug-file", f.Name()}, args[1:]...)
	}
	if dir := os.Getenv("BENCH_TWIN"); dir != "" && len(args) > 0 && args[0] == "-p" {
		if err := runTwin(claude, args, dir, start); err != nil {
			fmt.Fprintf(os.Stderr, "benchclaude: the bare twin: %v\n", err)
			os.Exit(2)
		}
	}
	err := syscall.Exec(claude, append([]string{claude}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "benchclaude: %s: %v\n", claude, err)
	os.Exit(2)
}
