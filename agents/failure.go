package agents

import (
	"fmt"
	"strings"
	"time"

	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

// FailureKind names why a run ended that was not its agent's doing: the
// account, the API, the network, the CLI itself. A run with such an end
// never costs its feature an attempt.
type FailureKind string

// The kinds of failure, and what each asks of the daemon.
const (
	// FailAuth: not logged in, a key or token refused, an account that
	// cannot be used. Only a person can fix it: the session stops.
	FailAuth FailureKind = "auth"
	// FailBilling: the account's credit or plan refuses the request.
	FailBilling FailureKind = "billing"
	// FailModel: the model agent.model names does not exist for this
	// account, or this CLI is too old for it.
	FailModel FailureKind = "model"
	// FailRateLimit: a rate or usage limit (429). Waiting cures it.
	FailRateLimit FailureKind = "rate_limit"
	// FailOverloaded: the API is overloaded (529). Waiting cures it.
	FailOverloaded FailureKind = "overloaded"
	// FailServer: the API failed (5xx). Waiting usually cures it.
	FailServer FailureKind = "server_error"
	// FailNetwork: the API could not be reached at all.
	FailNetwork FailureKind = "network"
	// FailNoSpace: the disk is full.
	FailNoSpace FailureKind = "no_space"
	// FailStartup: the CLI could not start a session (its sandbox, most
	// often: startup_failure_reason).
	FailStartup FailureKind = "startup"
	// FailCLIMissing: agent.command could not be started at all.
	FailCLIMissing FailureKind = "cli_missing"
	// FailCLICrashed: the CLI exited before a session began, without a
	// result: a broken install.
	FailCLICrashed FailureKind = "cli_crashed"
	// FailCLIKilled: the CLI was killed by a signal from outside before a
	// session began (the kernel out of memory, a person's kill). Waiting
	// and trying again is what to do; a broken install exits instead.
	FailCLIKilled FailureKind = "cli_killed"
	// FailSetup: the project's setup step failed in the clone a worker
	// made for the run, before any agent started. A person fixes the
	// setup (or what it installs); the run is not the agent's.
	FailSetup FailureKind = "setup"
)

// Failure is a run's end that is not its agent's doing, as far as the CLI's
// structured output tells it.
type Failure struct {
	Kind FailureKind
	// Status is the API's HTTP status, when there was one.
	Status int
	// Code is the CLI's own name for the error (its "error" field, or a
	// startup failure reason), for the logs and the traces.
	Code string
	// ResetsAt is when a usage limit resets, when the run said so.
	ResetsAt time.Time
	// RetryAfter is the wait the CLI itself computed for its next try,
	// which honours the API's retry-after.
	RetryAfter time.Duration
	// Detail is what the run said about it, in one line.
	Detail string
	// Workers are the workers it happened on (Result.Workers), whose
	// machines the fix is on; none for a run of the daemon's own machine.
	Workers []string
}

// OnWorker reports whether the failure is the machine's that ran the run
// rather than the project's or the account's as the daemon configures it:
// on a worker, another worker may well run the run. A rate or usage limit
// is one: each worker runs with its own Claude Code login, and a limit on
// one (whatever reset it says) is no reason to wait while another worker
// can run the run; when none can, the session waits as for a local run.
func (f Failure) OnWorker() bool {
	switch f.Kind {
	case FailAuth, FailBilling, FailCLIMissing, FailCLICrashed, FailStartup, FailNoSpace, FailRateLimit:
		return true
	}
	return false
}

// Waits reports whether waiting cures the failure: the session backs off
// and redoes the run.
func (f Failure) Waits() bool {
	switch f.Kind {
	case FailRateLimit, FailOverloaded, FailServer, FailNetwork, FailNoSpace, FailCLIKilled:
		return true
	}
	return false
}

// Explain says what happened and what a person can do about it, in the
// words the session's status and the notifications show: the daemon runs,
// so the last step of a fix is `ctxgraphd ctl resume`.
func (f Failure) Explain(command string) string {
	return f.explain(command, "`ctxgraphd ctl resume`")
}

// ExplainAtStart is Explain for the daemon's start-up check: no daemon runs
// yet to resume, so the last step of a fix is to start it, `ctxgraphd run`.
func (f Failure) ExplainAtStart(command string) string {
	return f.explain(command, "`ctxgraphd run`")
}

// explain is Explain with next, the step that carries on once the person
// fixed what only a person can.
func (f Failure) explain(command, next string) string {
	detail := ""
	if f.Detail != "" {
		detail = ": " + f.Detail
	}
	if len(f.Workers) > 0 && f.Kind != FailRateLimit {
		// The daemon's advice is about its own machine: the fix of a
		// worker's is on the worker's, as the worker's user. (A limit
		// of every worker's login is waited out, as the daemon's is.)
		return fmt.Sprintf("no worker could run it, each for a reason of its own machine (%s): %s%s. On each worker's machine, as the user it runs as, "+
			"check its Claude Code (`claude --version`, `claude auth status`, or ANTHROPIC_API_KEY in its environment), its sandbox (bubblewrap and socat) and its disk, "+
			"and restart `ctxgraphd worker` (it checks all of these at start), or start another worker; then %s",
			strings.Join(f.Workers, ", "), f.Kind, detail, next)
	}
	switch f.Kind {
	case FailAuth:
		return "Claude Code could not authenticate" + detail + ". Log in as the user the daemon runs as (run `" + command +
			"` once and use /login, or `" + command + " setup-token`), or give the service ANTHROPIC_API_KEY; check with `" +
			command + " auth status`, then " + next
	case FailBilling:
		return "the account refused the request for billing reasons" + detail + ". Check the plan or the credit balance, then " + next
	case FailModel:
		return "the model cannot be used" + detail + ". Check agent.model (empty uses Claude Code's default) and the CLI's version, then " + next
	case FailRateLimit:
		return "rate or usage limit reached" + status(f.Status) + detail
	case FailOverloaded:
		return "the API is overloaded" + status(f.Status) + detail
	case FailServer:
		return "the API failed" + status(f.Status) + detail
	case FailNetwork:
		return "the API could not be reached" + detail + "; check the network (and ANTHROPIC_BASE_URL, a proxy or a firewall)"
	case FailNoSpace:
		return "the disk is full" + detail + "; free some space"
	case FailStartup:
		return "Claude Code could not start a session (" + f.Code + ")" + detail
	case FailCLIMissing:
		return fmt.Sprintf("could not start %q%s; set agent.command to the Claude Code binary (see `ctxgraphd run`'s start-up check)", command, detail)
	case FailCLICrashed:
		return fmt.Sprintf("%q exited before it started a session%s; check the install with `%s --version`", command, detail, command)
	case FailCLIKilled:
		return fmt.Sprintf("%q was killed by a signal before it started a session (out of memory?)%s", command, detail)
	case FailSetup:
		return "the project's setup failed where the run was to work" + detail +
			"\nFix it (setup: in .claude/ctxgraphd.yaml, the feature list's \"setup\", or what it installs on that machine), then " + next
	}
	return detail
}

func status(s int) string {
	if s == 0 {
		return ""
	}
	return fmt.Sprintf(" (HTTP %d)", s)
}

// cliErrors maps the CLI's "error" field of an API error message (and of
// StopFailure hooks, api_retry lines) to a failure kind. Kinds it does not
// list (invalid_request, max_output_tokens, unknown) are the run's own:
// retrying the same conversation after a wait would not change them.
var cliErrors = map[string]FailureKind{
	"authentication_failed":  FailAuth,
	"oauth_org_not_allowed":  FailAuth,
	"account_on_hold":        FailAuth,
	"verification_required":  FailAuth,
	"cloud_credential_error": FailAuth,
	"billing_error":          FailBilling,
	"model_not_found":        FailModel,
	"rate_limit":             FailRateLimit,
	"overloaded":             FailOverloaded,
	"server_error":           FailServer,
}

// Failure classifies the end of a run from its structured output: the
// result line, the API error messages, the CLI's retries and rate-limit
// events, and stopFailure, the error the run's StopFailure hook reported
// ("" if none). It returns false when the run ended on its own terms,
// successful or not: then the agent's work is what gets judged.
func (r Result) Failure(stopFailure string) (Failure, bool) {
	f := Failure{Status: r.APIErrorStatus, ResetsAt: r.RateLimitResetsAt, RetryAfter: r.RetryDelay, Detail: oneLine(r.Text), Workers: r.Workers}
	switch {
	case r.SetupFailure != "":
		// Its output's end is what a person needs: kept whole.
		f.Kind, f.Detail = FailSetup, r.SetupFailure
		return f, true
	case r.Ended == EndStartFailed:
		f.Kind, f.Detail = FailCLIMissing, ""
		if r.Err != nil {
			f.Detail = r.Err.Error()
		}
		return f, true
	case r.StartupFailure != "":
		f.Kind, f.Code = FailStartup, r.StartupFailure
		f.Detail = oneLine(firstNonEmpty(strings.TrimSpace(r.StderrTail), r.Text))
		return f, true
	case r.Ended == EndAuthRefused:
		// Killed at the CLI's first retry of a 401: no result came.
		f.Kind, f.Code = FailAuth, firstNonEmpty(r.APIError, "authentication_failed")
		f.Detail = fmt.Sprintf("the API refused the credentials (HTTP %d, %s); the run was stopped at the CLI's first retry", r.APIErrorStatus, f.Code)
		return f, true
	case r.Ended != EndExited:
		return Failure{}, false // killed: a timeout or the daemon's own doing
	}
	code := firstNonEmpty(r.APIError, stopFailure)
	if r.IsError || code != "" {
		if k, ok := cliErrors[code]; ok {
			f.Kind, f.Code = k, code
			if k == FailServer {
				// The CLI names overload and unreachable servers
				// server_error too; the status tells them apart.
				switch f.Status {
				case 0:
					f.Kind = FailNetwork // no answer came at all
				case 529:
					f.Kind = FailOverloaded
				}
			}
			return f, true
		}
		if r.IsError && r.TerminalReason == "api_error" {
			if k := byStatus(r.APIErrorStatus); k != "" {
				f.Kind, f.Code = k, code
				return f, true
			}
		}
	}
	if !r.SawResult && !r.SawInit && r.ExitCode != 0 {
		// No session ever began: nothing the agent did ended it.
		f.Kind = FailCLICrashed
		f.Detail = oneLine(firstNonEmpty(strings.TrimSpace(r.StderrTail), r.Text))
		if f.Detail == "" {
			f.Detail = fmt.Sprintf("exit status %d, no output", r.ExitCode)
		}
		switch {
		case strings.Contains(strings.ToLower(f.Detail), "no space left on device"):
			f.Kind = FailNoSpace
		case r.ExitCode == -1:
			// Exit status -1 is a death by signal; nothing of the
			// daemon's sent it (those ends are not EndExited).
			f.Kind, f.Detail = FailCLIKilled, ""
		}
		return f, true
	}
	return Failure{}, false
}

// byStatus classifies an API error by its HTTP status alone, for errors the
// CLI gave no name.
func byStatus(s int) FailureKind {
	switch {
	case s == 401 || s == 403:
		return FailAuth
	case s == 429:
		return FailRateLimit
	case s == 529:
		return FailOverloaded
	case s >= 500 && s < 600:
		return FailServer
	}
	return ""
}

func oneLine(s string) string {
	return textcut.Line(s, 300)
}
