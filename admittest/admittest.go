package admittest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// DefaultTimeout bounds WaitInUse, WaitQueued and WaitIdle: long enough
// for a loaded CI machine, short enough to fail before the test binary's
// own timeout.
const DefaultTimeout = 10 * time.Second

// Polling intervals: the first poll comes soon, later ones back off.
const (
	firstPoll = 50 * time.Microsecond
	maxPoll   = 5 * time.Millisecond
)

// WaitInUse waits until exactly n slots of g are held (granted slots
// included: a waiter that was handed slots holds them even before it
// wakes up). It fails the test after DefaultTimeout.
func WaitInUse(t testing.TB, g *admit.Gate, n int64) {
	t.Helper()
	Wait(t, g, DefaultTimeout, fmt.Sprintf("%d slots in use", n), func(s admit.Stats) bool {
		return s.InUse == n
	})
}

// WaitQueued waits until exactly n callers wait in g's queue. It fails
// the test after DefaultTimeout.
func WaitQueued(t testing.TB, g *admit.Gate, n int64) {
	t.Helper()
	Wait(t, g, DefaultTimeout, fmt.Sprintf("%d callers queued", n), func(s admit.Stats) bool {
		return s.Queued == n
	})
}

// WaitIdle waits until g holds no slot and nobody waits in its queue:
// every permit handed out has been ended. It fails the test after
// DefaultTimeout.
func WaitIdle(t testing.TB, g *admit.Gate) {
	t.Helper()
	Wait(t, g, DefaultTimeout, "idle (nothing in use, nobody queued)", func(s admit.Stats) bool {
		return s.InUse == 0 && s.Waiting == 0
	})
}

// Wait polls cond with a fresh snapshot of g's Stats until it returns
// true, and fails the test with t.Fatalf, naming what (the state waited
// for) and showing the last snapshot, when timeout passes first. A
// timeout of zero or less means DefaultTimeout.
func Wait(t testing.TB, g *admit.Gate, timeout time.Duration, what string, cond func(admit.Stats) bool) {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	pause := firstPoll
	for {
		s := g.Stats()
		if cond(s) {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("admittest: gate %q not %s after %v: %d of %d slots in use, %d queued, %d waiting, %d admitted",
				g.Name(), what, timeout, s.InUse, s.Capacity, s.Queued, s.Waiting, s.Admitted)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
}
