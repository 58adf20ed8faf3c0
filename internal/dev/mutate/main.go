// Command mutate runs mutation testing over the packages whose tests are
// unit tests, one package at a time, and says for each how many of the
// small, realistic bugs gremlins plants its tests catch: `make mutate`.
//
// A test suite can be large and green and still not hold what it looks like
// it holds; a mutant that lives is a guarantee no test checks. The targets
// are per package (Targets): at least 95 % of mutants killed everywhere,
// 98 % in the gate rules and the decision function. Mutants that cannot
// change behaviour (equivalent mutants) are listed, with why, in
// docs/DEVELOPING.md; the rest get a test.
//
// It runs gremlins (pinned in the Makefile) with what it needs to be
// truthful on this code base, learned the hard way:
//
//   - GOFLAGS=-short -count=1: the unit tests only (gremlins has no flag for
//     it), and no cached coverage run, which would set every mutant's
//     timeout to a fraction of a second;
//   - a `go` shim first on PATH that reports a mutant that does not compile
//     as not viable (exit 2) rather than killed, which go test's exit 1 for
//     a build failure would make it; and that runs each test in a process
//     group of its own, so that a mutant that signals its group hits no one
//     else;
//   - --invert-negatives=false: it plants the same mutants as
//     ARITHMETIC_BASE, which would count each twice;
//   - a timeout of ten times the coverage run: every mutant is a fresh
//     build, two at a time on two cores;
//   - CI and CTXGRAPHD_TEST_CLAUDE unset, so that no test drives the real
//     Claude Code CLI.
//
// With -audit it runs the hand mutation audit instead (hand.go): each
// guarantee of the loop, the gates and the verdicts removed once, and the
// test named for it must fail.
//
// Usage: go run ./internal/dev/mutate [-gremlins PATH] [-out DIR] [package ...]
//
//	go run ./internal/dev/mutate -audit
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Target is what mutation testing must show for one package.
type Target struct {
	Pkg     string   // relative to the module root
	Min     float64  // least test efficacy, in %
	Exclude []string // gremlins -E patterns: files whose mutants are not unit-testable here
}

// Targets are the packages whose tests are unit tests. agents is held for
// its pure parts: the stream decoder, the command object, the role
// prompts; its process supervision is tested against real processes and
// the real CLI, where a mutant costs minutes, not seconds.
var Targets = []Target{
	{Pkg: "statemachine", Min: 98},
	{Pkg: "gates", Min: 98},
	{Pkg: "guards", Min: 95, Exclude: []string{`^propose/`, `^rulefile/`}},
	{Pkg: "guards/propose", Min: 95},
	{Pkg: "progress", Min: 95},
	{Pkg: "store", Min: 95},
	{Pkg: "config", Min: 95},
	{Pkg: "control", Min: 95, Exclude: []string{`^controltest/`, `^server/`}},
	{Pkg: "control/server", Min: 95, Exclude: []string{`^peercred_(bsd|other)\.go$`}},
	{Pkg: "agents", Min: 95, Exclude: []string{`^runner\.go$`, `^proc_.*\.go$`, `^role/`}},
	{Pkg: "judge", Min: 95, Exclude: []string{`^proc_other\.go$`}},
	{Pkg: "branch", Min: 95},
	{Pkg: "sandbox", Min: 95, Exclude: []string{`^check_(darwin|other)\.go$`}},
	{Pkg: "hook", Min: 95},
	{Pkg: "graph", Min: 95},
	{Pkg: "internal/gitrepo", Min: 95},
}

// workers is how many mutants gremlins tests at once.
var workers = 2

// shim is the `go` gremlins runs: the real go, in its own process group,
// with a build failure turned into exit 2 (not viable).
const shim = `#!/bin/sh
out=$(mktemp)
setsid "$REAL_GO" "$@" >"$out" 2>&1
code=$?
cat "$out"
if [ $code -ne 0 ] && grep -q '\[build failed\]\|\[setup failed\]' "$out"; then code=2; fi
rm -f "$out"
exit $code
`

// report is the part of gremlins' JSON report that is read here.
type report struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// result is one package's outcome.
type result struct {
	Target
	killed, lived, notCovered, timedOut, notViable int
	livedAt                                        []string
	took                                           time.Duration
	err                                            error
}

func (r result) efficacy() float64 {
	if r.killed+r.lived == 0 {
		return 100
	}
	return 100 * float64(r.killed) / float64(r.killed+r.lived)
}

func (r result) coverage() float64 {
	all := r.killed + r.lived + r.notCovered
	if all == 0 {
		return 100
	}
	return 100 * float64(r.killed+r.lived) / float64(all)
}

func main() {
	gremlins := flag.String("gremlins", "gremlins", "the gremlins binary")
	out := flag.String("out", ".mutate", "where the JSON reports go")
	hand := flag.Bool("audit", false, "run the hand mutation audit of the guarantees instead")
	only := flag.String("only", "", "with -audit: only the guarantees whose words match this regular expression")
	flag.IntVar(&workers, "workers", 2, "mutants tested at once (the cores to give it)")
	flag.Parse()
	if *hand {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mutate: -only %q: %v\n", *only, err)
			os.Exit(2)
		}
		if !audit(re) {
			os.Exit(1)
		}
		return
	}
	targets := Targets
	if flag.NArg() > 0 {
		targets = nil
		for _, p := range flag.Args() {
			t, ok := find(strings.TrimPrefix(strings.TrimSuffix(p, "/"), "./"))
			if !ok {
				fmt.Fprintf(os.Stderr, "mutate: %s is not one of the packages mutation testing holds (%s)\n", p, names())
				os.Exit(2)
			}
			targets = append(targets, t)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatal(err)
	}
	shimDir, err := writeShim()
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(shimDir)
	// gremlins copies the whole module once per worker: give it the
	// sources alone, not the pinned CLI in .tools or the built binaries.
	src, err := stage()
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(src)
	if *out, err = filepath.Abs(*out); err != nil {
		fatal(err)
	}

	var results []result
	for _, t := range targets {
		fmt.Printf("mutate: %s (at least %.0f%% of mutants killed)…\n", t.Pkg, t.Min)
		r := run(*gremlins, shimDir, src, *out, t)
		results = append(results, r)
		if r.err != nil {
			fmt.Printf("mutate: %s: %v\n", t.Pkg, r.err)
			continue
		}
		fmt.Printf("mutate: %s: %.1f%% killed (%d of %d), %s\n", t.Pkg, r.efficacy(), r.killed, r.killed+r.lived, r.took.Round(time.Second))
	}
	if !summarize(os.Stdout, results) {
		os.Exit(1)
	}
}

func find(pkg string) (Target, bool) {
	for _, t := range Targets {
		if t.Pkg == pkg {
			return t, true
		}
	}
	return Target{}, false
}

func names() string {
	var n []string
	for _, t := range Targets {
		n = append(n, t.Pkg)
	}
	return strings.Join(n, ", ")
}

func writeShim() (string, error) {
	dir, err := os.MkdirTemp("", "mutate-go-")
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "go"), []byte(shim), 0o755)
}

// stage copies the module's sources (what git tracks, and new files it does
// not ignore) to a temporary directory.
func stage() (string, error) {
	list, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return "", fmt.Errorf("listing the sources with git: %w", err)
	}
	dir, err := os.MkdirTemp("", "mutate-src-")
	if err != nil {
		return "", err
	}
	for _, f := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		fi, err := os.Lstat(f)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted meanwhile, or not a plain file
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return dir, err
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return dir, err
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// run runs gremlins over one package.
func run(gremlins, shimDir, src, outDir string, t Target) result {
	r := result{Target: t}
	realGo, err := exec.LookPath("go")
	if err != nil {
		r.err = errors.New("no go on PATH")
		return r
	}
	jsonOut := filepath.Join(outDir, strings.ReplaceAll(t.Pkg, "/", "_")+".json")
	args := []string{"unleash", "--workers", strconv.Itoa(workers), "--timeout-coefficient", "10", "--invert-negatives=false", "-o", jsonOut}
	for _, e := range t.Exclude {
		args = append(args, "-E", e)
	}
	args = append(args, filepath.Join(src, t.Pkg))
	cmd := exec.Command(gremlins, args...)
	cmd.Dir = src
	cmd.Env = environ(realGo, shimDir)
	log, err := os.Create(jsonOut + ".log")
	if err != nil {
		r.err = err
		return r
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	err = cmd.Run()
	r.took = time.Since(start)
	if err != nil {
		r.err = fmt.Errorf("gremlins failed: %v (see %s)", err, log.Name())
		return r
	}
	data, err := os.ReadFile(jsonOut)
	if err != nil {
		r.err = err
		return r
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		r.err = fmt.Errorf("%s: %w", jsonOut, err)
		return r
	}
	for _, f := range rep.Files {
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				r.killed++
			case "LIVED":
				r.lived++
				r.livedAt = append(r.livedAt, fmt.Sprintf("%s/%s:%d:%d %s", t.Pkg, f.FileName, m.Line, m.Column, m.Type))
			case "NOT COVERED":
				r.notCovered++
			case "TIMED OUT":
				r.timedOut++
			case "NOT VIABLE":
				r.notViable++
			}
		}
	}
	sort.Strings(r.livedAt)
	return r
}

// environ is the environment of gremlins: the shim first on PATH, the unit
// tests only, nothing that reaches the real CLI.
func environ(realGo, shimDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CI", "CTXGRAPHD_TEST_CLAUDE", "GOFLAGS", "PATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+shimDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REAL_GO="+realGo, "GOFLAGS=-short -count=1")
}

// summarize prints the table and the mutants that lived, and reports
// whether every package met its target.
func summarize(w *os.File, results []result) bool {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "package\tefficacy %\ttarget %\tkilled\tlived\tnot covered\ttimed out\tnot viable\tcoverage %\ttime\t")
	ok := true
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\terror\t%.0f\t\t\t\t\t\t\t\t\n", r.Pkg, r.Min)
			ok = false
			continue
		}
		mark := ""
		if r.efficacy() < r.Min {
			mark, ok = " (below)", false
		}
		fmt.Fprintf(tw, "%s\t%.1f%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t\n", r.Pkg, r.efficacy(), mark, r.Min,
			r.killed, r.lived, r.notCovered, r.timedOut, r.notViable, r.coverage(), r.took.Round(time.Second))
	}
	tw.Flush()
	for _, r := range results {
		if len(r.livedAt) > 0 {
			fmt.Fprintf(w, "\n%s: mutants that lived (a test for each, or a line in docs/DEVELOPING.md saying why it cannot change behaviour):\n", r.Pkg)
			for _, l := range r.livedAt {
				fmt.Fprintln(w, "  "+l)
			}
		}
	}
	return ok
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(1)
}
