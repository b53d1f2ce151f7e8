package admit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// queueOne starts one AcquireFor in the background and waits until it has
// settled (queued, admitted or refused). Call it inside a synctest bubble.
func queueOne(ctx context.Context, g *admit.Gate, id int, r admit.Request, out chan<- result) {
	go func() {
		p, err := g.AcquireFor(ctx, r)
		if err != nil {
			out <- result{id: id, err: err}
			return
		}
		out <- result{id: id, p: &p}
	}()
	synctest.Wait()
}

// serveOrder frees held, then collects n grants one by one (each grantee
// ends its permit at once, letting the next in), and returns their ids.
func serveOrder(t *testing.T, held *admit.Permit, out <-chan result, n int) []int {
	t.Helper()
	var ids []int
	held.Done(admit.OutcomeOK)
	for range n {
		r := <-out
		if r.err != nil {
			t.Fatalf("waiter %d refused: %v", r.id, r.err)
		}
		ids = append(ids, r.id)
		r.p.Done(admit.OutcomeOK)
	}
	return ids
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLIFOServesNewestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, Queueing: admit.Queueing{Discipline: admit.DisciplineLIFO}})
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		for id := 1; id <= 4; id++ {
			queueOne(context.Background(), g, id, admit.Request{}, out)
		}
		if got, want := serveOrder(t, &held, out, 4), []int{4, 3, 2, 1}; !equalInts(got, want) {
			t.Fatalf("LIFO served %v, want %v", got, want)
		}
		checkInvariants(t, g.Stats())
	})
}

// The controlled-delay discipline: FIFO with the interval as the longest
// wait while the queue keeps emptying; once it has stood for an interval,
// newcomers get the short target and the newest is served first.
func TestCoDelShortensWaitsOnceTheQueueStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second, Queueing: admit.Queueing{Discipline: admit.DisciplineCoDel}})
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		start := time.Now()
		queueOne(context.Background(), g, 1, admit.Request{}, out) // t=0: may wait the interval (100ms)
		time.Sleep(60 * time.Millisecond)
		queueOne(context.Background(), g, 2, admit.Request{}, out) // t=60ms: not standing yet, 100ms
		r := <-out                                                 // waiter 1 gives up at t=100ms
		if r.id != 1 || reasonOf(t, r.err) != admit.ReasonWaitTimeout || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("first waiter: id %d err %v after %v, want a wait_timeout after the 100ms interval", r.id, r.err, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
		// t=120ms: the queue has not been empty for 120ms > interval.
		joined := time.Now()
		queueOne(context.Background(), g, 3, admit.Request{}, out)
		r = <-out
		if r.id != 3 || reasonOf(t, r.err) != admit.ReasonWaitTimeout || time.Since(joined) != admit.DefaultCoDelTarget {
			t.Fatalf("newcomer to a standing queue: id %d err %v after %v, want a wait_timeout after the 5ms target", r.id, r.err, time.Since(joined))
		}
		// Still standing (waiter 2 is there): served newest first.
		queueOne(context.Background(), g, 4, admit.Request{}, out)
		if got := serveOrder(t, &held, out, 2); !equalInts(got, []int{4, 2}) {
			t.Fatalf("standing CoDel queue served %v, want newest first [4 2]", got)
		}
		// The queue emptied: FIFO again, with the interval as the limit.
		held, _ = g.TryAcquire()
		queueOne(context.Background(), g, 5, admit.Request{}, out)
		queueOne(context.Background(), g, 6, admit.Request{}, out)
		if got := serveOrder(t, &held, out, 2); !equalInts(got, []int{5, 6}) {
			t.Fatalf("fresh CoDel queue served %v, want oldest first [5 6]", got)
		}
		checkInvariants(t, g.Stats())
	})
}

// buildHold gives g's hold-time average exactly d (every permit timed).
func buildHold(t *testing.T, g *admit.Gate, d time.Duration) {
	t.Helper()
	for range 3 {
		p, err := g.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		p.Done(admit.OutcomeOK)
	}
	if got := g.Stats().RecentHold; got != d {
		t.Fatalf("recent hold %v, want %v", got, d)
	}
}

// The deadline check reads the clock once, and a permit it lets through is
// timed from that reading: its hold is exactly the time it was held (a
// start off by one nanosecond, or taken from another clock, shows).
func TestDeadlineCheckedPermitIsTimedFromTheCheck(t *testing.T) {
	for _, waiters := range []int{0, 8} { // the no-queue and the queue path
		synctest.Test(t, func(t *testing.T) {
			cfg := admit.Config{Capacity: 1, MaxWaiters: waiters, SampleEvery: 1}
			if waiters > 0 {
				cfg.MaxWait = time.Second
			}
			g := mustGate(t, cfg)
			buildHold(t, g, 10*time.Millisecond) // three samples: the check now has a hold time and reads the clock
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			p, err := g.Acquire(ctx)
			if err != nil {
				t.Fatalf("an hour left for 10ms of work: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
			p.Done(admit.OutcomeOK)
			if s := g.Stats(); s.HoldTime != 50*time.Millisecond || s.HoldSamples != 4 {
				t.Errorf("waiters %d: hold time %v over %d samples, want 50ms over 4", waiters, s.HoldTime, s.HoldSamples)
			}
		})
	}
}

func TestDeadlineShorterThanExpectedWaitIsRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second, SampleEvery: 1})
		buildHold(t, g, 10*time.Millisecond)

		// A free slot, but less time left than the work takes.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		if _, err := g.Acquire(ctx); reasonOf(t, err) != admit.ReasonDeadline || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("5ms left for 10ms of work: %v, want a deadline refusal", err)
		}
		// Enough for the work alone: admitted.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 15*time.Millisecond)
		defer cancel2()
		held, err := g.Acquire(ctx2)
		if err != nil {
			t.Fatalf("15ms left for 10ms of work on a free slot: %v", err)
		}
		// Full now: the wait (10ms) plus the work (10ms) is 20ms.
		before := time.Now()
		ctx3, cancel3 := context.WithTimeout(context.Background(), 15*time.Millisecond)
		defer cancel3()
		if _, err := g.Acquire(ctx3); reasonOf(t, err) != admit.ReasonDeadline || time.Since(before) != 0 {
			t.Fatalf("15ms left behind a full gate: %v after %v, want a deadline refusal at once", err, time.Since(before))
		}
		out := make(chan result, 1)
		ctx4, cancel4 := context.WithTimeout(context.Background(), 25*time.Millisecond)
		defer cancel4()
		queueOne(ctx4, g, 1, admit.Request{}, out)
		if g.Queued() != 1 {
			t.Fatalf("25ms left for 20ms expected: queued %d, want 1", g.Queued())
		}
		held.Done(admit.OutcomeOK)
		if r := <-out; r.err != nil {
			t.Fatalf("waiter with time enough: %v", r.err)
		} else {
			r.p.Done(admit.OutcomeOK)
		}
		s := g.Stats()
		if s.Rejected[admit.ReasonDeadline] != 2 {
			t.Fatalf("deadline refusals %d, want 2", s.Rejected[admit.ReasonDeadline])
		}
		checkInvariants(t, s)

		// NoDeadlineCheck turns it off.
		g2 := mustGate(t, admit.Config{Capacity: 1, SampleEvery: 1, NoDeadlineCheck: true})
		buildHold(t, g2, 10*time.Millisecond)
		ctx5, cancel5 := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel5()
		p, err := g2.Acquire(ctx5)
		if err != nil {
			t.Fatalf("NoDeadlineCheck: %v", err)
		}
		p.Done(admit.OutcomeOK)
	})
}

// lateContext reports a deadline but never ends by itself: the timer of
// a real context can fire late on a loaded machine, and the gate must not
// start work whose deadline has passed just because Done has not closed.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

func TestExpiredWaiterNeverStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second, NoTiming: true})
		held, _ := g.TryAcquire()
		out := make(chan result, 2)
		late := lateContext{Context: context.Background(), deadline: time.Now().Add(10 * time.Millisecond)}
		queueOne(late, g, 1, admit.Request{}, out)
		queueOne(context.Background(), g, 2, admit.Request{}, out)
		time.Sleep(20 * time.Millisecond)
		held.Done(admit.OutcomeOK)
		got := map[int]result{}
		for range 2 {
			r := <-out
			got[r.id] = r
		}
		if r := got[1]; r.err == nil || reasonOf(t, r.err) != admit.ReasonDeadline {
			t.Fatalf("waiter past its deadline: %v, want a deadline refusal (it must never start)", r.err)
		}
		if r := got[2]; r.err != nil {
			t.Fatalf("the next waiter should get the slot: %v", r.err)
		} else {
			r.p.Done(admit.OutcomeOK)
		}
		checkInvariants(t, g.Stats())
	})
}

func TestHigherClassesAreServedFirst(t *testing.T) {
	for _, d := range []admit.Discipline{admit.DisciplineFIFO, admit.DisciplineLIFO, admit.DisciplineCoDel} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second, Queueing: admit.Queueing{Discipline: d, ClassAging: -1}})
				held, _ := g.TryAcquire()
				out := make(chan result, 8)
				queueOne(context.Background(), g, 1, admit.Request{Class: admit.ClassSheddable}, out)
				queueOne(context.Background(), g, 2, admit.Request{Class: admit.ClassSheddablePlus}, out)
				queueOne(context.Background(), g, 3, admit.Request{}, out) // critical, the default
				queueOne(context.Background(), g, 4, admit.Request{Class: admit.ClassCriticalPlus}, out)
				queueOne(context.Background(), g, 5, admit.Request{}, out)
				want := []int{4, 3, 5, 2, 1}
				if d == admit.DisciplineLIFO {
					want = []int{4, 5, 3, 2, 1}
				}
				if got := serveOrder(t, &held, out, 5); !equalInts(got, want) {
					t.Fatalf("served %v, want %v", got, want)
				}
				s := g.Stats()
				checkInvariants(t, s)
				for c, cs := range s.Classes {
					want := uint64(1)
					if admit.Class(c) == admit.ClassCritical {
						want = 2 + 1 // two queued, plus the held one
					}
					if cs.Admitted != want || cs.InUse != 0 || cs.Waiting != 0 {
						t.Fatalf("class %v stats %+v, want %d admitted, nothing held or waiting", admit.Class(c), cs, want)
					}
				}
			})
		})
	}
}

func TestFullQueueShedsTheLowestClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 2, MaxWait: time.Second})
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		queueOne(context.Background(), g, 1, admit.Request{Class: admit.ClassSheddable}, out)
		queueOne(context.Background(), g, 2, admit.Request{Class: admit.ClassSheddable}, out)
		// A critical newcomer pushes out the newest sheddable waiter.
		queueOne(context.Background(), g, 3, admit.Request{}, out)
		if r := <-out; r.id != 2 || reasonOf(t, r.err) != admit.ReasonShed {
			t.Fatalf("got %d (%v), want waiter 2 shed", r.id, r.err)
		}
		// Another critical: waiter 1 goes too.
		queueOne(context.Background(), g, 4, admit.Request{}, out)
		if r := <-out; r.id != 1 || reasonOf(t, r.err) != admit.ReasonShed {
			t.Fatalf("got %d (%v), want waiter 1 shed", r.id, r.err)
		}
		// The queue is full of critical work: a sheddable newcomer is shed,
		// a critical one finds the queue full.
		queueOne(context.Background(), g, 5, admit.Request{Class: admit.ClassSheddable}, out)
		if r := <-out; r.id != 5 || reasonOf(t, r.err) != admit.ReasonShed {
			t.Fatalf("got %d (%v), want waiter 5 shed", r.id, r.err)
		}
		queueOne(context.Background(), g, 6, admit.Request{}, out)
		if r := <-out; r.id != 6 || reasonOf(t, r.err) != admit.ReasonQueueFull {
			t.Fatalf("got %d (%v), want waiter 6 refused queue_full", r.id, r.err)
		}
		if got := serveOrder(t, &held, out, 2); !equalInts(got, []int{3, 4}) {
			t.Fatalf("served %v, want [3 4]", got)
		}
		s := g.Stats()
		checkInvariants(t, s)
		if sh := s.Classes[admit.ClassSheddable]; sh.Rejected[admit.ReasonShed] != 3 || sh.Admitted != 0 {
			t.Fatalf("sheddable class %+v, want 3 shed and none admitted", sh)
		}
	})
}

func TestClassShareIsServedBeforeHigherClasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{
			Capacity:   4,
			MaxWaiters: 8,
			MaxWait:    time.Second,
			Queueing:   admit.Queueing{ClassAging: -1, ClassShares: admit.ClassShares{admit.ClassSheddable: 0.25}},
		})
		var held [4]admit.Permit
		for i := range held {
			held[i], _ = g.TryAcquire()
		}
		out := make(chan result, 8)
		queueOne(context.Background(), g, 1, admit.Request{}, out)
		queueOne(context.Background(), g, 2, admit.Request{Class: admit.ClassSheddable}, out)
		queueOne(context.Background(), g, 3, admit.Request{}, out)
		queueOne(context.Background(), g, 4, admit.Request{Class: admit.ClassSheddable}, out)
		// sheddable holds nothing, below its one-slot share: it goes first.
		held[0].Done(admit.OutcomeOK)
		r := <-out
		if r.id != 2 {
			t.Fatalf("first freed slot went to %d, want the sheddable waiter 2 (below its share)", r.id)
		}
		// Now at its share: critical work goes ahead of the second one.
		held[1].Done(admit.OutcomeOK)
		if r2 := <-out; r2.id != 1 {
			t.Fatalf("second freed slot went to %d, want critical waiter 1", r2.id)
		} else {
			defer r2.p.Done(admit.OutcomeOK)
		}
		// Sheddable is below its share again once its permit ends.
		r.p.Done(admit.OutcomeOK)
		r3 := <-out
		if r3.id != 4 {
			t.Fatalf("third freed slot went to %d, want sheddable waiter 4 (below its share again)", r3.id)
		}
		r3.p.Done(admit.OutcomeOK)
		held[2].Done(admit.OutcomeOK)
		if r4 := <-out; r4.id != 3 {
			t.Fatalf("got %d, want 3", r4.id)
		} else {
			r4.p.Done(admit.OutcomeOK)
		}
		held[3].Done(admit.OutcomeOK)
		checkInvariants(t, g.Stats())
	})
}

func TestShareProtectsFromShedding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{
			Capacity:   2,
			MaxWaiters: 1,
			MaxWait:    time.Second,
			Queueing:   admit.Queueing{ClassShares: admit.ClassShares{admit.ClassSheddable: 0.5}},
		})
		held, _ := g.TryAcquire()
		held2, _ := g.TryAcquire()
		out := make(chan result, 4)
		queueOne(context.Background(), g, 1, admit.Request{Class: admit.ClassSheddable}, out)
		queueOne(context.Background(), g, 2, admit.Request{}, out)
		if r := <-out; r.id != 2 || reasonOf(t, r.err) != admit.ReasonQueueFull {
			t.Fatalf("got %d (%v), want the critical newcomer refused: the sheddable waiter is below its share", r.id, r.err)
		}
		held2.Done(admit.OutcomeOK)
		if got := serveOrder(t, &held, out, 1); !equalInts(got, []int{1}) {
			t.Fatalf("served %v", got)
		}
	})
}

func TestQueuedAgeBeatsClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second, Queueing: admit.Queueing{ClassAging: 50 * time.Millisecond}})
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		queueOne(context.Background(), g, 1, admit.Request{Class: admit.ClassSheddable}, out)
		time.Sleep(10 * time.Millisecond)
		queueOne(context.Background(), g, 2, admit.Request{}, out)
		// Young: the class decides.
		held.Done(admit.OutcomeOK)
		r := <-out
		if r.id != 2 {
			t.Fatalf("young queue served %d first, want critical 2", r.id)
		}
		queueOne(context.Background(), g, 3, admit.Request{}, out)
		time.Sleep(50 * time.Millisecond)
		queueOne(context.Background(), g, 4, admit.Request{Class: admit.ClassCriticalPlus}, out)
		// Waiter 1 has waited 60ms > 50ms: it is not overtaken again.
		if got := serveOrder(t, r.p, out, 3); !equalInts(got, []int{1, 3, 4}) {
			t.Fatalf("served %v, want the aged sheddable waiter first, then by age [1 3 4]", got)
		}
	})
}

func TestOldestWaitIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second, Queueing: admit.Queueing{Discipline: admit.DisciplineLIFO}})
		if g.OldestWait() != 0 {
			t.Fatal("empty queue has an age")
		}
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		queueOne(context.Background(), g, 1, admit.Request{}, out)
		time.Sleep(30 * time.Millisecond)
		queueOne(context.Background(), g, 2, admit.Request{}, out)
		time.Sleep(10 * time.Millisecond)
		if got := g.Stats().OldestWait; got != 40*time.Millisecond {
			t.Fatalf("oldest wait %v, want 40ms", got)
		}
		held.Done(admit.OutcomeOK) // LIFO: 2 goes, 1 stays oldest
		r := <-out
		if got := g.OldestWait(); got != 40*time.Millisecond {
			t.Fatalf("after serving the newest, oldest wait %v, want 40ms", got)
		}
		r.p.Done(admit.OutcomeOK)
		r = <-out
		if got := g.OldestWait(); got != 0 {
			t.Fatalf("empty queue: oldest wait %v", got)
		}
		// FIFO: when the oldest is served, the next one's age shows.
		g2 := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second})
		held2, _ := g2.TryAcquire()
		queueOne(context.Background(), g2, 3, admit.Request{}, out)
		time.Sleep(30 * time.Millisecond)
		queueOne(context.Background(), g2, 4, admit.Request{}, out)
		time.Sleep(10 * time.Millisecond)
		held2.Done(admit.OutcomeOK)
		r2 := <-out
		if got := g2.OldestWait(); r2.id != 3 || got != 10*time.Millisecond {
			t.Fatalf("served %d; oldest wait %v, want 10ms (waiter 4's age)", r2.id, got)
		}
		r2.p.Done(admit.OutcomeOK)
		(<-out).p.Done(admit.OutcomeOK)
		r.p.Done(admit.OutcomeOK)
	})
}

func TestClassAndDisciplineParsing(t *testing.T) {
	for in, want := range map[string]admit.Class{
		"critical_plus": admit.ClassCriticalPlus, "CRITICAL": admit.ClassCritical,
		"sheddable-plus": admit.ClassSheddablePlus, "sheddable": admit.ClassSheddable,
	} {
		if got, ok := admit.ParseClass(in); !ok || got != want {
			t.Errorf("ParseClass(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "urgent", "critical_plus_plus", string(make([]byte, 100))} {
		if got, ok := admit.ParseClass(in); ok || got != admit.ClassCritical {
			t.Errorf("ParseClass(%q) = %v, %v; want the default class and false", in, got, ok)
		}
	}
	for _, d := range []admit.Discipline{admit.DisciplineFIFO, admit.DisciplineLIFO, admit.DisciplineCoDel} {
		if got, err := admit.ParseDiscipline(d.String()); err != nil || got != d {
			t.Errorf("ParseDiscipline(%q) = %v, %v", d, got, err)
		}
	}
	if _, err := admit.ParseDiscipline("random"); !errors.Is(err, admit.ErrInvalidConfig) {
		t.Errorf("ParseDiscipline(random) = %v", err)
	}
	for _, q := range []admit.Queueing{
		{Discipline: 9},
		{CoDelTarget: -1},
		{CoDelTarget: time.Second, CoDelInterval: time.Millisecond},
		{ClassShares: admit.ClassShares{0.6, 0.6}},
		{ClassShares: admit.ClassShares{-0.1}},
	} {
		if _, err := admit.New(admit.Config{Queueing: q}); !errors.Is(err, admit.ErrInvalidConfig) {
			t.Errorf("New with %+v = %v, want ErrInvalidConfig", q, err)
		}
	}
	g := mustGate(t, admit.Config{})
	if _, err := g.TryAcquireFor(admit.Request{Class: 7}); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Errorf("unknown class: %v", err)
	}
	if s := g.Stats(); s.Offered != 0 {
		t.Errorf("an invalid class was counted: %+v", s)
	}
}

func FuzzParseClass(f *testing.F) {
	for _, s := range []string{"critical", "sheddable_plus", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := admit.ParseClass(s)
		if c.Rank() >= admit.NumClasses || (!ok && c != admit.ClassCritical) {
			t.Fatalf("ParseClass(%q) = %v, %v", s, c, ok)
		}
	})
}

func TestSetQueueingAndContextClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: time.Second})
		if err := g.SetQueueing(admit.Queueing{ClassShares: admit.ClassShares{0.9, 0.9}}); !errors.Is(err, admit.ErrInvalidConfig) {
			t.Fatalf("shares summing to 1.8: %v", err)
		}
		if g.Discipline() != admit.DisciplineFIFO {
			t.Fatal("a refused policy changed the discipline")
		}
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		shed := admit.WithClass(context.Background(), admit.ClassSheddable)
		// Without ContextClass the context's class is ignored: FIFO.
		queueOne(shed, g, 1, admit.Request{}, out)
		if err := g.SetQueueing(admit.Queueing{Discipline: admit.DisciplineLIFO, ContextClass: true, ClassAging: -1}); err != nil {
			t.Fatal(err)
		}
		queueOne(shed, g, 2, admit.Request{}, out)
		queueOne(context.Background(), g, 3, admit.Request{}, out)
		queueOne(context.Background(), g, 4, admit.Request{}, out)
		// 1 and 3, 4 are critical (LIFO among them), 2 is sheddable.
		if got := serveOrder(t, &held, out, 4); !equalInts(got, []int{4, 3, 1, 2}) {
			t.Fatalf("served %v, want [4 3 1 2]", got)
		}
		if s := g.Stats(); s.Classes[admit.ClassSheddable].Admitted != 1 {
			t.Fatalf("sheddable admitted %d, want 1 (from the context)", s.Classes[admit.ClassSheddable].Admitted)
		}
		if admit.ClassFrom(context.Background()) != admit.ClassCritical {
			t.Fatal("no class in the context is not the default")
		}
	})
}

func FuzzParseDiscipline(f *testing.F) {
	for _, s := range []string{"fifo", "LIFO", "codel", "", "red"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := admit.ParseDiscipline(s)
		if err == nil && d.String() != strings.ToLower(s) {
			t.Fatalf("ParseDiscipline(%q) = %v", s, d)
		}
		if err != nil && !errors.Is(err, admit.ErrInvalidConfig) {
			t.Fatalf("ParseDiscipline(%q) error %v does not wrap ErrInvalidConfig", s, err)
		}
	})
}
