// Package e2e holds the end-to-end tests of ctxgraphd: the real ctxgraphd
// binary, built for the test run, drives the real Claude Code CLI against the
// scripted model on loopback. Nothing of the CLI is faked.
//
// # Two tiers, side by side
//
// Every test's first statement is night(t, core) or night(t, extended)
// (tier_test.go, internal/dev/tier): its tier, and t.Parallel(). `make
// test` runs the core nights, at least one real-CLI night for each
// guarantee; `make test-all`, which CI runs, runs `make test` and then the
// extended ones (CTXGRAPHD_TEST_TIER; unset, as in `go test ./e2e -run
// TestX` by hand, every night runs). TestEveryNightStatesItsTier fails for
// a test that does not start so. A night goes in the core tier when it is the one
// night of a guarantee; a further route of a guarantee that a core night
// or a package's test already holds goes in the extended tier, and
// docs/DEVELOPING.md names, for each, the test that holds it in the core.
//
// The Makefile runs the nights E2E_PARALLEL at a time (go test -parallel;
// see the Makefile for the number and docs/DEVELOPING.md for why): one
// test alone keeps about one of the two cores busy, its CLI, daemon and
// hooks taking turns. A test that runs beside the others:
//
//   - gets everything from newProject, which makes it a project of its
//     own: its directory, state and runtime directories (so its socket),
//     Claude Code configuration and HOME, scripted model on a port of its
//     own, and an environment (project.env) that the daemon, the CLI and
//     the hooks run in. Change that environment, never the process's:
//     t.Setenv and os.Setenv would change every test's (t.Setenv panics in
//     a parallel test), and os.Chdir every test's working directory. Paths
//     the daemon derives from its environment come from
//     paths.ForProjectEnv(dir, getenvIn(p.env)), as newProject does;
//   - finds and kills only its own processes: by the project's socket in
//     their environment (project.leftovers), by a pid it was given, or by
//     a process group it started; never by name (pkill, pgrep, killall),
//     which would reach the other tests' daemons and agents;
//   - listens on ports the kernel chose (127.0.0.1:0, httptest), and
//     writes only under its t.TempDir() or a temporary directory it made;
//   - does once per run what is costly and the same for every test: the
//     binaries are built once in TestMain, and the machine's Go build and
//     module caches, which are safe to share, are warmed once by the first
//     test that asks goCaches for them (a project with Go features), as is
//     the standard library in a verdict's build cache, which withGoCaches
//     copies into the project's (the honest nights on a fresh home keep
//     every cache cold: they show what a first night costs);
//   - bounds its waits for agents' runs with agentsWait and for a daemon
//     to answer with startWait: with other tests on the same two cores a
//     run may take a minute, and a bound is there to catch a hang, not to
//     time a run (timings belong to the benchmarks);
//   - runs its cases within its own turn: one after the other (t.Run),
//     or, when each is a project of its own, all at once (sideBySide,
//     which calls t.Run from a goroutine per case). A subtest that calls
//     t.Parallel() waits for a turn behind every test already waiting for
//     one, so the cases run in the run's tail and make it longer (tried
//     so, the cases of TestKill9… and TestRepeatedMistakeRate ran alone
//     for the last 50 s of the run).
//
// The benchmarks (bench_test.go) measure time, so they never run beside
// anything: go test runs them one at a time, after the tests.
package e2e
