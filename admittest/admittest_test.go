package admittest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/admittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB whose Fatalf records the failure and ends the
// calling goroutine, as the real one does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine (Fatalf ends it) and
// reports whether f failed, and with what message.
func run(t *testing.T, f func(tb testing.TB)) (failed bool, msg string) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, r.msg
}

func newGate(t *testing.T, cfg admit.Config) *admit.Gate {
	t.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// holders starts n goroutines that each acquire a slot of g (queueing if
// they must) and hold it until release is closed.
func holders(g *admit.Gate, n int, release <-chan struct{}, wg *sync.WaitGroup) {
	for range n {
		wg.Go(func() {
			p, err := g.Acquire(context.Background())
			if err != nil {
				return
			}
			<-release
			p.Done(admit.OutcomeOK)
		})
	}
}

func TestWaitInUseQueuedIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, admit.Config{Name: "db", Capacity: 2, MaxWaiters: 4, MaxWait: -1})
		release := make(chan struct{})
		var wg sync.WaitGroup
		holders(g, 3, release, &wg)

		admittest.WaitInUse(t, g, 2)
		admittest.WaitQueued(t, g, 1)
		if s := g.Stats(); s.InUse != 2 || s.Queued != 1 {
			t.Fatalf("after the waits: %d in use, %d queued; want 2 and 1", s.InUse, s.Queued)
		}
		close(release)
		admittest.WaitIdle(t, g)
		if s := g.Stats(); s.InUse != 0 || s.Waiting != 0 || s.Admitted != 3 {
			t.Fatalf("after WaitIdle: %d in use, %d waiting, %d admitted; want 0, 0, 3", s.InUse, s.Waiting, s.Admitted)
		}
		wg.Wait()
	})
}

// The count asked for is exact: a gate that holds more is not "n in use".
func TestWaitIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, admit.Config{Name: "db", Capacity: 4, MaxWaiters: 4})
		release := make(chan struct{})
		var wg sync.WaitGroup
		holders(g, 3, release, &wg)
		admittest.WaitInUse(t, g, 3)
		if failed, _ := run(t, func(tb testing.TB) { admittest.WaitInUse(tb, g, 2) }); !failed {
			t.Error("WaitInUse(2) returned while 3 slots were in use")
		}
		if failed, _ := run(t, func(tb testing.TB) { admittest.WaitQueued(tb, g, 1) }); !failed {
			t.Error("WaitQueued(1) returned while nobody was queued")
		}
		if failed, _ := run(t, func(tb testing.TB) { admittest.WaitIdle(tb, g) }); !failed {
			t.Error("WaitIdle returned while 3 slots were in use")
		}
		close(release)
		admittest.WaitIdle(t, g)
		wg.Wait()
	})
}

// A state never reached fails the test after the timeout, with a message
// that says what was waited for and what the gate held; under synctest
// the timeout costs no real time.
func TestTimeoutFailsTheTest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, admit.Config{Name: "db", Capacity: 2})
		p, err := g.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		failed, msg := run(t, func(tb testing.TB) { admittest.WaitInUse(tb, g, 2) })
		if !failed {
			t.Fatal("WaitInUse(2) did not fail with one slot in use")
		}
		if waited := time.Since(start); waited < admittest.DefaultTimeout || waited > admittest.DefaultTimeout+time.Second {
			t.Errorf("failed after %v of fake time, want about %v", waited, admittest.DefaultTimeout)
		}
		for _, want := range []string{`"db"`, "2 slots in use", "1 of 2 slots in use"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q lacks %q", msg, want)
			}
		}
		p.Done(admit.OutcomeOK)

		start = time.Now()
		failed, _ = run(t, func(tb testing.TB) {
			admittest.Wait(tb, g, 300*time.Millisecond, "never", func(admit.Stats) bool { return false })
		})
		if waited := time.Since(start); !failed || waited < 300*time.Millisecond || waited > 310*time.Millisecond {
			t.Errorf("Wait with 300ms: failed %t after %v", failed, waited)
		}
	})
}

// A held slot, or a caller still waiting, is not idle.
func TestWaitIdleWaitsForHeldWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, admit.Config{Name: "db", Capacity: 1, MaxWaiters: 1, MaxWait: -1})
		release := make(chan struct{})
		var wg sync.WaitGroup
		holders(g, 2, release, &wg)
		admittest.WaitInUse(t, g, 1)
		admittest.WaitQueued(t, g, 1)
		if failed, msg := run(t, func(tb testing.TB) { admittest.WaitIdle(tb, g) }); !failed || !strings.Contains(msg, "1 queued") {
			t.Errorf("WaitIdle with a slot held and a caller queued: failed %t, %q", failed, msg)
		}
		close(release)
		admittest.WaitIdle(t, g)
		wg.Wait()
		if s := g.Stats(); s.Admitted != 2 || s.Inflight != 0 {
			t.Fatalf("admitted %d, inflight %d; want 2 and 0", s.Admitted, s.Inflight)
		}
	})
}

// Outside a bubble the helpers return as soon as the state is reached.
func TestWaitOutsideSynctest(t *testing.T) {
	g := newGate(t, admit.Config{Name: "db", Capacity: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		p, err := g.TryAcquire()
		if err == nil {
			p.Done(admit.OutcomeOK)
		}
	}()
	<-done
	start := time.Now()
	admittest.WaitIdle(t, g)
	if d := time.Since(start); d > time.Second {
		t.Errorf("WaitIdle on an idle gate took %v", d)
	}
}
