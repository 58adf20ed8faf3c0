package eventually

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A condition that comes to hold is seen, asked no later than the pause
// after it does; one that never holds is given up at the bound, after a
// last ask there. (synctest: the clock is the bubble's.)
func TestWithin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		holdsAt := start.Add(time.Second)
		if !Within(time.Minute, func() bool { return !time.Now().Before(holdsAt) }) {
			t.Fatal("a condition that held after a second was not seen within a minute")
		}
		if late := time.Since(start) - time.Second; late < 0 || late > maxPause {
			t.Errorf("seen %s after it held; at most one pause (%s) late", late, maxPause)
		}

		start = time.Now()
		asks := 0
		var last time.Time
		if Within(time.Second, func() bool { asks++; last = time.Now(); return false }) {
			t.Fatal("a condition that never holds was reported to hold")
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("gave up after %s, want at the bound (1s)", took)
		}
		if !last.Equal(start.Add(time.Second)) {
			t.Errorf("last asked at %s, want once more at the bound", last.Sub(start))
		}
		if asks < 2 || asks > 1+int(time.Second/firstPause) {
			t.Errorf("asked %d times in a second", asks)
		}
	})
}

// A condition that costs to ask (it takes 100ms, as starting a process
// does) is asked at most a fifth of the time: never back to back, however
// long the wait; a cheap one still at the short pauses. (synctest: the
// clock is the bubble's.)
func TestWithinAsksACostlyConditionLessOften(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const cost, bound = 100 * time.Millisecond, 10 * time.Second
		asks := 0
		Within(bound, func() bool { asks++; time.Sleep(cost); return false })
		if most := 2 + int(bound/((1+costFactor)*cost)); asks > most {
			t.Errorf("a condition that takes %s was asked %d times in %s, want at most %d", cost, asks, bound, most)
		}
		cheap := 0
		Within(bound, func() bool { cheap++; return false })
		if least := int(bound / maxPause); cheap < least {
			t.Errorf("a condition that costs nothing was asked %d times in %s, want at least %d", cheap, bound, least)
		}
	})
}

// A condition that holds at once costs no wait.
func TestWithinHoldingAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Within(time.Minute, func() bool { return true }) || time.Since(start) != 0 {
			t.Errorf("a condition that held at once took %s", time.Since(start))
		}
	})
}

// fatalTB records the failure True reports and ends the goroutine, as
// t.Fatalf does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// True fails the test naming the bound and what was waited for, and does
// not when the condition comes to hold.
func TestTrue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(cond func() bool) string {
			f := &fatalTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				True(f, 2*time.Second, cond, "the %s ended", "run")
			}()
			<-done
			return f.msg
		}
		if msg := run(func() bool { return false }); msg != "not within 2s: the run ended" {
			t.Errorf("failure reads %q", msg)
		}
		n := 0
		if msg := run(func() bool { n++; return n > 3 }); msg != "" {
			t.Errorf("a condition that came to hold failed the test: %q", msg)
		}
	})
}
