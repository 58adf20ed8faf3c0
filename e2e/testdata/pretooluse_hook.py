#!/usr/bin/env python3
"""A PreToolUse hook written the usual way, in Python: the baseline of
BenchmarkHook (e2e/bench_test.go).

It makes the check ctxgraphd's role-write-policy gate makes for the daemon's
mirror (guard.judgeWrite and guard.judgeBash, code "session_state"): no agent
writes .claude/progress/session-state.json, with a file tool or a shell
command. It reads the same payload, applies the same rule and prints the same
decision JSON as `ctxgraphd hook pre-tool-use`: nothing when the call is
allowed, a deny with the structured reason when it is not.
"""
import json
import os
import re
import sys

SESSION_STATE = "session-state.json"
SESSION_STATE_PATH = os.path.join(".claude", "progress", SESSION_STATE)

# guard.writeRe: the shell idioms that change files.
WRITE_RE = re.compile(
    r">|\btee\b|\bsed\s+-i|\bperl\s+-[a-z]*i|\bmv\b|\bcp\b|\brm\b|\btruncate\b|\bdd\b"
    r"|\bpython3?\b|\bnode\b|\bruby\b|\bjq\b.*>|\bln\b|\binstall\b|\bchmod\b|\btouch\b"
)

FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}


def denied(payload):
    tool = payload.get("tool_name", "")
    tool_input = payload.get("tool_input") or {}
    if tool in FILE_TOOLS:
        path = tool_input.get(FILE_TOOLS[tool], "")
        if not path:
            return False
        project = os.environ.get("CLAUDE_PROJECT_DIR") or payload.get("cwd", "")
        path = os.path.normpath(os.path.join(project, path))
        return os.path.relpath(path, project) == SESSION_STATE_PATH
    if tool == "Bash":
        command = tool_input.get("command", "")
        return SESSION_STATE in command and WRITE_RE.search(command) is not None
    return False


def main():
    payload = json.load(sys.stdin)
    if not denied(payload):
        return
    reason = json.dumps(
        {
            "status": "blocked",
            "gate": "role-write-policy",
            "code": "session_state",
            "message": "session-state.json is written by the daemon only",
            "suggestion": "read it if you need the state; do not write it",
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )
    decision = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
    sys.stdout.write(json.dumps(decision, separators=(",", ":"), sort_keys=True, ensure_ascii=False))


if __name__ == "__main__":
    main()
