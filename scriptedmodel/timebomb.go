package scriptedmodel

import (
	"fmt"
	"time"
)

// TimeBomb, on attempt 1, writes code (a feature of kind Shell) that is
// right until a moment after it was written, its fuse (Fuse), and wrong
// from then on: it prints the working line until then and WentOff after.
// Its tester and the daemon's verdict run it before the fuse has burnt, so
// it is tested; the branch then holds a feature whose test fails, for
// whichever feature's sweep comes next. Later attempts are honest.
//
// A feature whose After is a time bomb waits, on its first attempt, for
// the bomb to land and then for its fuse to burn, so that its own claim is
// judged on a branch where the bomb went off.
const TimeBomb Behavior = "time-bomb"

// Fuse is how long a time bomb's code stays right after it is written:
// longer than the rest of its coder's run, its tester's run and its
// verdict take on a busy machine, so that the bomb is tested before it
// goes off.
const Fuse = 90 * time.Second

// WentOff is what a time bomb's code of feature id prints once its fuse
// has burnt.
func WentOff(id string) string { return id + " went off" }

// timeBombSource is the code of feature id that is right until at (Unix
// seconds).
func timeBombSource(id string, at int64) string {
	return fmt.Sprintf("#!/bin/sh\nif [ \"$(date +%%s)\" -lt %d ]; then echo '%s'; else echo '%s'; fi\n", at, workingLine(id), WentOff(id))
}

// bombWrite is the step that writes feature id's time bomb to src, its
// fuse lit as it is written.
func (t *turn) bombWrite(id, src string) step {
	return t.write(src, func() (string, error) { return timeBombSource(id, time.Now().Add(Fuse).Unix()), nil })
}

// awaitFuse is the shell command that waits until the fuse of the time
// bomb in src, on the project's branch, has burnt: the moment its code
// holds. Like awaitEnd it reads the project (a lane's origin), and gives
// up within the ten minutes Bash allows.
func awaitFuse(other, src string) string {
	return fmt.Sprintf(`project=$(git remote get-url origin 2>/dev/null || pwd)
at=$(git -C "$project" show HEAD:%[2]s | sed -n 's/.*-lt \([0-9][0-9]*\).*/\1/p')
[ -n "$at" ] || { echo 'no fuse in %[2]s'; exit 1; }
n=0
until [ "$(date +%%s)" -ge "$at" ]; do
	n=$((n+1)); [ "$n" -lt 2700 ] || { echo 'the fuse of %[1]s has not burnt'; exit 1; }; sleep 0.2
done
echo '%[3]s'`, other, src, FuseBurnt(other))
}

// FuseBurnt is what the coder of a feature whose After is the time bomb
// other prints once its fuse has burnt.
func FuseBurnt(other string) string { return "the fuse of " + other + " has burnt" }

// awaitingFuse adds, after the wait for a time bomb to land (awaiting),
// the wait for its fuse to burn.
func (s *Server) awaitingFuse(t *turn, sc script) script {
	f, ok := s.features[t.cmd.Context.FeatureID]
	if !ok || f.After == "" || t.cmd.attempt() > 1 || s.features[f.After].Behavior != TimeBomb {
		return sc
	}
	c := bashCall(awaitFuse(f.After, s.files(f.After).Source), "Wait for "+f.After+"'s moment to pass")
	c.Input["timeout"] = awaitTimeout
	wait := step{tool: "Bash", call: func() (toolCall, error) { return c, nil }}.tolerant()
	// After the wait for its landing, which awaiting put first.
	sc.steps = append([]step{sc.steps[0], wait}, sc.steps[1:]...)
	sc.bound++
	return sc
}
