package admit_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/admit"
)

// TestGrantRacingCancellationIsHandedOn makes a release grant the slot to a
// waiter that has already given up but not yet left the queue: its context
// was canceled (its select chose ctx.Done) and, before it runs again, a
// release hands it the slot. The waiter must hand the slot back, and on to
// the next in line, never lose it.
func TestGrantRacingCancellationIsHandedOn(t *testing.T) {
	oneProc(t)
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 4, MaxWait: -1})
			held, _ := g.TryAcquire()
			ctx, cancel := context.WithCancel(context.Background())
			out := make(chan result, 2)
			startWaiters(ctx, g, []int{1}, 1, out)
			startWaiters(context.Background(), g, []int{2}, 1, out)
			cancel()                   // waiter 1 gives up (wakes, but cannot run yet)
			held.Done(admit.OutcomeOK) // and is granted the slot at the same moment
			r := <-out
			if r.id != 1 || reasonOf(t, r.err) != admit.ReasonCanceled {
				t.Fatalf("waiter 1: %+v, want canceled", r)
			}
			r = <-out
			if r.id != 2 || r.err != nil {
				t.Fatalf("waiter 2: %+v, want the handed-on slot", r)
			}
			r.p.Done(admit.OutcomeOK)
			s := g.Stats()
			checkInvariants(t, s)
			if s.InUse != 0 || s.Inflight != 0 || s.Waiting != 0 || s.Rejected[admit.ReasonCanceled] != 1 {
				t.Fatalf("slot lost: %+v", s)
			}
			// The slot is really free: a newcomer gets it.
			p, err := g.TryAcquire()
			if err != nil {
				t.Fatalf("slot not usable after the race: %v", err)
			}
			p.Done(admit.OutcomeOK)
		})
	}
}

// oneProc runs the test on one P, so that a goroutine made runnable by a
// channel send does not run until the test goroutine blocks: both racing
// events then reach the waiter's select together.
func oneProc(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestConcurrentHammer runs real goroutines (not a bubble) against one gate
// under -race and checks that capacity is never exceeded and the books
// balance afterwards.
func TestConcurrentHammer(t *testing.T) {
	const capacity = 3
	g := mustGate(t, admit.Config{Capacity: capacity, MaxWaiters: 16, Kinds: []string{"a", "b"}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	holding, worst := 0, 0
	for w := range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for i := range 300 {
				var p admit.Permit
				var err error
				if (w+i)%3 == 0 {
					p, err = g.TryAcquireFor(admit.Request{Kind: admit.Kind(i % 2)})
				} else {
					p, err = g.AcquireFor(ctx, admit.Request{Kind: admit.Kind(i % 2)})
				}
				if err != nil {
					continue
				}
				mu.Lock()
				holding++
				worst = max(worst, holding)
				mu.Unlock()
				mu.Lock()
				holding--
				mu.Unlock()
				p.Done(admit.Outcome(i % admit.NumOutcomes))
			}
		})
	}
	wg.Wait()
	if worst > capacity {
		t.Errorf("%d holders at once, capacity %d", worst, capacity)
	}
	s := g.Stats()
	checkInvariants(t, s)
	if s.InUse != 0 || s.Waiting != 0 || s.Offered != 8*300 || s.PeakInUse > capacity {
		t.Errorf("after the hammer: %+v", s)
	}
}
