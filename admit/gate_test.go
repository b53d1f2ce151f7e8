package admit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(rapidMain{m})
}

// rapidMain turns off rapid's failure files and runs 1,000 property cases
// by default (see testutil.RapidMain).
type rapidMain struct{ m *testing.M }

func (r rapidMain) Run() int { return testutil.RapidMain(r.m, 1000) }

func mustGate(t testing.TB, cfg admit.Config) *admit.Gate {
	t.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return g
}

// checkInvariants asserts the DESIGN.md invariants on a quiet gate.
func checkInvariants(t testing.TB, s admit.Stats) {
	t.Helper()
	if got := s.Admitted + s.Rejected.Total() + uint64(s.Waiting); s.Offered != got {
		t.Errorf("offered %d != admitted %d + rejected %d + waiting %d", s.Offered, s.Admitted, s.Rejected.Total(), s.Waiting)
	}
	if got := s.Completed.Total() + uint64(s.Inflight); s.Admitted != got {
		t.Errorf("admitted %d != completed %d + inflight %d", s.Admitted, s.Completed.Total(), s.Inflight)
	}
	var off, adm uint64
	for _, k := range s.Kinds {
		if got := k.Admitted + k.Rejected.Total() + uint64(k.Waiting); k.Offered != got {
			t.Errorf("kind %s: offered %d != admitted + rejected + waiting = %d", k.Kind, k.Offered, got)
		}
		if got := k.Completed.Total() + uint64(k.Inflight); k.Admitted != got {
			t.Errorf("kind %s: admitted %d != completed + inflight = %d", k.Kind, k.Admitted, got)
		}
		off += k.Offered
		adm += k.Admitted
	}
	if off != s.Offered || adm != s.Admitted {
		t.Errorf("kinds sum to offered %d admitted %d, gate says %d %d", off, adm, s.Offered, s.Admitted)
	}
}

// fataler is what reasonOf needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func reasonOf(t fataler, err error) admit.Reason {
	t.Helper()
	var rej *admit.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("error %v (%T) is not a *RejectedError", err, err)
	}
	if !errors.Is(err, admit.ErrRejected) {
		t.Fatalf("errors.Is(%v, ErrRejected) = false", err)
	}
	return rej.Reason()
}

func TestNewValidatesConfig(t *testing.T) {
	bad := []admit.Config{
		{Capacity: -1},
		{Capacity: admit.MaxCapacity + 1},
		{MaxWaiters: -1},
		{MaxRetryAfter: -time.Second},
		{Name: "has space"},
		{Name: strings.Repeat("x", 65)},
		{Kinds: []string{"read", "read"}},
		{MaxWait: time.Second}, // a wait with no queue to wait in
		{MaxWait: -1},
		{SampleEvery: -1},
		{Kinds: []string{""}},
		{Kinds: make([]string, admit.MaxKinds+1)},
	}
	for _, cfg := range bad {
		if _, err := admit.New(cfg); !errors.Is(err, admit.ErrInvalidConfig) {
			t.Errorf("New(%+v) err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	g := mustGate(t, admit.Config{})
	if g.Name() != "default" || g.Capacity() != admit.DefaultCapacity {
		t.Errorf("zero Config gave gate %q capacity %d", g.Name(), g.Capacity())
	}
	if got := g.Kinds(); len(got) != 1 || got[0] != "default" {
		t.Errorf("zero Config kinds = %v", got)
	}
}

func TestTryAcquireUpToCapacityThenFull(t *testing.T) {
	// Timed, untimed (the one-CAS fast path) and observed gates take
	// different paths through TryAcquire and Done.
	for _, cfg := range []admit.Config{
		{Name: "disk", Capacity: 2},
		{Name: "disk", Capacity: 2, NoTiming: true},
		{Name: "disk", Capacity: 2, Observer: &countingObserver{}},
	} {
		tryUpToCapacity(t, cfg)
	}
}

func tryUpToCapacity(t *testing.T, cfg admit.Config) {
	t.Helper()
	g := mustGate(t, cfg)
	p1, err := g.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	p2, err := g.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.TryAcquire()
	if r := reasonOf(t, err); r != admit.ReasonFull {
		t.Fatalf("third TryAcquire reason = %v, want full", r)
	}
	var rej *admit.RejectedError
	errors.As(err, &rej)
	if rej.Gate() != "disk" || rej.Kind() != "default" || rej.Inflight() != 2 || rej.Capacity() != 2 || rej.RetryAfter() < time.Second {
		t.Errorf("refusal = %+v", rej)
	}
	if errors.Is(err, admit.ErrClosed) {
		t.Error("overload refusal matches ErrClosed")
	}
	p1.Done(admit.OutcomeOK)
	p3, err := g.TryAcquire()
	if err != nil {
		t.Fatalf("slot not freed by Done: %v", err)
	}
	p2.Done(admit.OutcomeError)
	p3.Done(admit.OutcomeOK)
	s := g.Stats()
	checkInvariants(t, s)
	if s.Offered != 4 || s.Admitted != 3 || s.Rejected[admit.ReasonFull] != 1 || s.Inflight != 0 ||
		s.Completed[admit.OutcomeOK] != 2 || s.Completed[admit.OutcomeError] != 1 || s.PeakInUse != 2 {
		t.Errorf("stats = %+v", s)
	}
}

func TestDoubleDoneIsCountedAndFreesNothing(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 1})
	p, _ := g.TryAcquire()
	p.Done(admit.OutcomeOK)
	other, err := g.TryAcquire() // someone else now holds the only slot
	if err != nil {
		t.Fatal(err)
	}
	p.Done(admit.OutcomeOK) // misuse: must not free other's slot
	if _, err := g.TryAcquire(); err == nil {
		t.Fatal("a second Done freed a slot it did not hold")
	}
	if !other.Held() || p.Held() {
		t.Errorf("Held: other %v, p %v", other.Held(), p.Held())
	}
	other.Done(admit.OutcomeOK)
	s := g.Stats()
	checkInvariants(t, s)
	if s.Misuse != 1 || s.Completed.Total() != 2 || s.InUse != 0 {
		t.Errorf("misuse %d completed %d inUse %d", s.Misuse, s.Completed.Total(), s.InUse)
	}
}

func TestRefusedPermitHoldsNothing(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 1})
	held, _ := g.TryAcquire()
	refused, err := g.TryAcquire()
	if err == nil {
		t.Fatal("admitted past capacity")
	}
	refused.Done(admit.OutcomeOK)
	refused.Done(admit.OutcomeOK)
	var zero admit.Permit
	zero.Done(admit.OutcomeOK)
	if g.InUse() != 1 {
		t.Fatalf("Done on a refused permit changed slots in use to %d", g.InUse())
	}
	held.Done(admit.OutcomeOK)
	if s := g.Stats(); s.Misuse != 0 || s.Completed.Total() != 1 {
		t.Errorf("misuse %d completed %d", s.Misuse, s.Completed.Total())
	}
}

func TestKindsAreStrict(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 10, Kinds: []string{"read", "stream"}})
	if g.Kind("read") != 0 || g.Kind("stream") != 1 || g.KindName(1) != "stream" || g.KindName(200) != "" {
		t.Fatalf("kind lookup wrong")
	}
	if _, ok := g.LookupKind("nope"); ok {
		t.Error("LookupKind found a kind the gate does not have")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Kind(typo) did not panic")
			}
		}()
		g.Kind("raed")
	}()
	for _, k := range []admit.Kind{g.Kind("read"), g.Kind("stream"), g.Kind("stream")} {
		p, err := g.TryAcquireFor(admit.Request{Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Done(admit.OutcomeDropped)
	}
	before := g.Stats()
	for _, r := range []admit.Request{{Kind: 2}, {Kind: 999}, {Weight: -1}, {Weight: admit.MaxCapacity + 1}, {Weight: math.MinInt64}, {Weight: math.MaxInt64}} {
		if _, err := g.TryAcquireFor(r); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("TryAcquireFor(%+v) err = %v, want ErrInvalidRequest", r, err)
		}
		if _, err := g.AcquireFor(context.Background(), r); !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("AcquireFor(%+v) err = %v, want ErrInvalidRequest", r, err)
		}
	}
	s := g.Stats()
	if s.Offered != before.Offered || s.InUse != before.InUse {
		t.Errorf("invalid requests touched the gate: offered %d -> %d, in use %d -> %d", before.Offered, s.Offered, before.InUse, s.InUse)
	}
	checkInvariants(t, s)
	want := map[string]uint64{"read": 1, "stream": 2}
	for _, k := range s.Kinds {
		if k.Admitted != want[k.Kind] || k.Inflight != int64(want[k.Kind]) {
			t.Errorf("kind %s admitted %d inflight %d, want %d", k.Kind, k.Admitted, k.Inflight, want[k.Kind])
		}
	}
	if len(s.Kinds) != 2 {
		t.Errorf("kinds = %d, want 2 (no extra label)", len(s.Kinds))
	}
}

func TestAcquireWithoutQueueRefusesAtOnce(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 1})
	p, _ := g.Acquire(context.Background())
	defer p.Done(admit.OutcomeOK)
	if _, err := g.Acquire(context.Background()); reasonOf(t, err) != admit.ReasonFull {
		t.Fatalf("reason = %v, want full", err)
	}
}

func TestAcquireWithDoneContextIsRefused(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 4})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Acquire(ctx); reasonOf(t, err) != admit.ReasonCanceled {
		t.Errorf("canceled ctx: %v", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if _, err := g.Acquire(dctx); reasonOf(t, err) != admit.ReasonDeadline {
		t.Errorf("past deadline: %v", err)
	}
	if g.InUse() != 0 {
		t.Error("a refused acquisition holds a slot")
	}
}

// queue starts n waiters on g and waits until all are queued. Each result
// arrives on the returned channel.
type result struct {
	p   *admit.Permit
	err error
	id  int
}

func startWaiters(ctx context.Context, g *admit.Gate, ids []int, weight int64, out chan<- result) {
	for _, id := range ids {
		go func() {
			p, err := g.AcquireFor(ctx, admit.Request{Weight: weight})
			if err != nil {
				out <- result{err: err, id: id}
				return
			}
			out <- result{p: &p, id: id}
		}()
		synctest.Wait() // queued in order
	}
}

func TestQueuePaths(t *testing.T) {
	tests := []struct {
		name   string
		cfg    admit.Config
		act    func(g *admit.Gate, held *admit.Permit, cancel context.CancelFunc)
		reason admit.Reason // ReasonNone: the waiter is admitted
	}{
		{"release grants the waiter", admit.Config{MaxWaiters: 1}, func(_ *admit.Gate, held *admit.Permit, _ context.CancelFunc) { held.Done(admit.OutcomeOK) }, admit.ReasonNone},
		{"capacity growth grants the waiter", admit.Config{MaxWaiters: 1}, func(g *admit.Gate, _ *admit.Permit, _ context.CancelFunc) { g.SetCapacity(2) }, admit.ReasonNone},
		{"wait timeout", admit.Config{MaxWaiters: 1, MaxWait: 100 * time.Millisecond}, func(*admit.Gate, *admit.Permit, context.CancelFunc) { time.Sleep(time.Second) }, admit.ReasonWaitTimeout},
		{"caller cancels", admit.Config{MaxWaiters: 1, MaxWait: -1}, func(_ *admit.Gate, _ *admit.Permit, cancel context.CancelFunc) { cancel() }, admit.ReasonCanceled},
		{"caller deadline", admit.Config{MaxWaiters: 1, MaxWait: time.Hour}, func(*admit.Gate, *admit.Permit, context.CancelFunc) { time.Sleep(2 * time.Minute) }, admit.ReasonDeadline},
		{"close refuses the queue", admit.Config{MaxWaiters: 1}, func(g *admit.Gate, _ *admit.Permit, _ context.CancelFunc) { g.Close() }, admit.ReasonClosed},
	}
	for _, tt := range tests {
		for _, untimed := range []bool{false, true} { // untimed gates take the bare fast path
			t.Run(fmt.Sprintf("%s/untimed=%v", tt.name, untimed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := tt.cfg
					cfg.Capacity = 1
					cfg.NoTiming = untimed
					g := mustGate(t, cfg)
					held, _ := g.TryAcquire()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					out := make(chan result, 2)
					startWaiters(ctx, g, []int{1}, 1, out)
					if s := g.Stats(); s.Waiting != 1 {
						t.Fatalf("waiting = %d, want 1", s.Waiting)
					}
					// A second waiter finds the one-place queue full.
					if _, err := g.Acquire(ctx); reasonOf(t, err) != admit.ReasonQueueFull {
						t.Fatalf("second waiter: %v, want queue_full", err)
					}
					tt.act(g, &held, cancel)
					r := <-out
					if tt.reason == admit.ReasonNone {
						if r.err != nil {
							t.Fatalf("waiter refused: %v", r.err)
						}
						r.p.Done(admit.OutcomeOK)
					} else if got := reasonOf(t, r.err); got != tt.reason {
						t.Fatalf("waiter reason = %v, want %v", got, tt.reason)
					}
					if tt.reason == admit.ReasonClosed && !errors.Is(r.err, admit.ErrClosed) {
						t.Error("closed refusal does not match ErrClosed")
					}
					held.Done(admit.OutcomeOK)
					s := g.Stats()
					checkInvariants(t, s)
					if s.Waiting != 0 || s.Inflight != 0 || s.InUse != 0 {
						t.Errorf("after all work: waiting %d inflight %d inUse %d", s.Waiting, s.Inflight, s.InUse)
					}
					if tt.reason != admit.ReasonNone && s.Rejected[tt.reason] != 1 {
						t.Errorf("rejected[%v] = %d, want 1", tt.reason, s.Rejected[tt.reason])
					}
					if tt.reason == admit.ReasonWaitTimeout && s.WaitTime != 100*time.Millisecond {
						t.Errorf("wait time = %v, want 100ms", s.WaitTime)
					}
				})
			})
		}
	}
}

func TestCanceledWaiterLeavesQueueAndNextIsServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8, MaxWait: -1})
		held, _ := g.TryAcquire()
		ctxA, cancelA := context.WithCancel(context.Background())
		out := make(chan result, 4)
		startWaiters(ctxA, g, []int{1}, 1, out)
		startWaiters(context.Background(), g, []int{2}, 1, out)
		cancelA()
		if r := <-out; r.id != 1 || reasonOf(t, r.err) != admit.ReasonCanceled {
			t.Fatalf("first result %+v, want waiter 1 canceled", r)
		}
		held.Done(admit.OutcomeOK)
		r := <-out
		if r.id != 2 || r.err != nil {
			t.Fatalf("second result %+v, want waiter 2 admitted", r)
		}
		r.p.Done(admit.OutcomeOK)
		s := g.Stats()
		checkInvariants(t, s)
		if s.InUse != 0 || s.Waiting != 0 {
			t.Errorf("inUse %d waiting %d", s.InUse, s.Waiting)
		}
	})
}

func TestQueueIsFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 8})
		held, _ := g.TryAcquire()
		out := make(chan result, 8)
		startWaiters(context.Background(), g, []int{1, 2, 3, 4}, 1, out)
		// TryAcquire never jumps the queue, even when a slot is free.
		held.Done(admit.OutcomeOK)
		for want := 1; want <= 4; want++ {
			r := <-out
			if r.id != want || r.err != nil {
				t.Fatalf("got waiter %d (%v), want %d", r.id, r.err, want)
			}
			r.p.Done(admit.OutcomeOK)
		}
	})
}

func TestShrinkNeverRevokes(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 3})
	var ps [3]admit.Permit
	for i := range ps {
		ps[i], _ = g.TryAcquire()
	}
	if err := g.SetCapacity(1); err != nil {
		t.Fatal(err)
	}
	if err := g.SetCapacity(-1); !errors.Is(err, admit.ErrInvalidConfig) {
		t.Errorf("SetCapacity(-1) = %v", err)
	}
	for i := range ps {
		if !ps[i].Held() {
			t.Fatal("shrinking revoked a permit")
		}
	}
	ps[0].Done(admit.OutcomeOK)
	ps[1].Done(admit.OutcomeOK)
	if _, err := g.TryAcquire(); err == nil {
		t.Fatal("admitted while in use (1) >= new capacity (1)")
	}
	ps[2].Done(admit.OutcomeOK)
	p, err := g.TryAcquire()
	if err != nil {
		t.Fatalf("not admitted after draining below the new capacity: %v", err)
	}
	p.Done(admit.OutcomeOK)
	if err := g.SetCapacity(0); err != nil {
		t.Fatal(err)
	}
	if _, err := g.TryAcquire(); reasonOf(t, err) != admit.ReasonFull {
		t.Errorf("capacity 0 admitted: %v", err)
	}
}

func TestWeighted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 4, MaxWaiters: 8, MaxOvertakes: 2, MaxWait: -1})
		p3, err := g.TryAcquireFor(admit.Request{Weight: 3})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.TryAcquireFor(admit.Request{Weight: 2}); err == nil {
			t.Fatal("weight 2 admitted with 1 slot free")
		}
		if _, err := g.AcquireFor(context.Background(), admit.Request{Weight: 5}); reasonOf(t, err) != admit.ReasonFull {
			t.Fatal("weight above capacity was not refused at once")
		}
		s := g.Stats()
		if s.InUse != 3 || s.Inflight != 1 {
			t.Fatalf("inUse %d inflight %d, want 3 and 1", s.InUse, s.Inflight)
		}
		// A big waiter (4) at the head; small ones (1) behind it may overtake
		// it twice, then the gate holds slots back for the big one.
		out := make(chan result, 8)
		startWaiters(context.Background(), g, []int{100}, 4, out)
		startWaiters(context.Background(), g, []int{1, 2, 3}, 1, out)
		var small []*admit.Permit
		// The free slot goes to small waiter 1 (overtake #1).
		r := <-out
		if r.id != 1 {
			t.Fatalf("got %d, want small waiter 1 to overtake", r.id)
		}
		small = append(small, r.p)
		p3.Done(admit.OutcomeOK) // 3 free: waiter 2 overtakes (#2), then no more
		r = <-out
		if r.id != 2 {
			t.Fatalf("got %d, want small waiter 2", r.id)
		}
		small = append(small, r.p)
		synctest.Wait()
		if st := g.Stats(); st.Waiting != 2 || st.InUse != 2 {
			t.Fatalf("waiting %d inUse %d: small waiter 3 overtook past the limit", st.Waiting, st.InUse)
		}
		for _, p := range small {
			p.Done(admit.OutcomeOK)
		}
		r = <-out
		if r.id != 100 || r.p.Weight() != 4 {
			t.Fatalf("got %d, want big waiter", r.id)
		}
		r.p.Done(admit.OutcomeOK)
		r = <-out
		if r.id != 3 {
			t.Fatalf("got %d, want small waiter 3 last", r.id)
		}
		r.p.Done(admit.OutcomeOK)
		st := g.Stats()
		checkInvariants(t, st)
		if st.InUse != 0 || st.Inflight != 0 || st.Admitted != 5 {
			t.Errorf("final stats %+v", st)
		}
	})
}

func TestStrictFIFOBlocksSmallBehindBig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 2, MaxWaiters: 8, MaxOvertakes: -1, MaxWait: -1})
		p, _ := g.TryAcquire()
		out := make(chan result, 4)
		startWaiters(context.Background(), g, []int{1}, 2, out)
		startWaiters(context.Background(), g, []int{2}, 1, out)
		synctest.Wait()
		if s := g.Stats(); s.Waiting != 2 {
			t.Fatalf("strict FIFO let a small waiter overtake: waiting %d", s.Waiting)
		}
		p.Done(admit.OutcomeOK)
		for _, want := range []int{1, 2} {
			r := <-out
			if r.id != want {
				t.Fatalf("got %d want %d", r.id, want)
			}
			r.p.Done(admit.OutcomeOK)
		}
	})
}

func TestClose(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 2, MaxWaiters: 2})
	p, _ := g.TryAcquire()
	g.Close()
	g.Close()
	if !g.Closed() {
		t.Fatal("Closed() = false")
	}
	for _, acquire := range []func() error{
		func() error { _, err := g.TryAcquire(); return err },
		func() error { _, err := g.Acquire(context.Background()); return err },
	} {
		err := acquire()
		if reasonOf(t, err) != admit.ReasonClosed || !errors.Is(err, admit.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	}
	if err := g.SetCapacity(5); err != nil || g.Capacity() != 2 {
		t.Errorf("SetCapacity on a closed gate: err %v capacity %d", err, g.Capacity())
	}
	if !p.Held() {
		t.Fatal("Close revoked a permit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.WaitIdle(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIdle with a permit held = %v", err)
	}
	p.Done(admit.OutcomeOK)
	if err := g.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := g.Stats()
	checkInvariants(t, s)
	if !s.Closed || s.Capacity != 2 || s.Rejected[admit.ReasonClosed] != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestRetryAfterFollowsHoldTimeAndBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 10, MaxRetryAfter: 20 * time.Second, SampleEvery: 1})
		// Teach the gate that work holds its slot for 3s.
		p, _ := g.TryAcquire()
		time.Sleep(3 * time.Second)
		p.Done(admit.OutcomeOK)
		held, _ := g.TryAcquire()
		defer held.Done(admit.OutcomeOK)
		_, err := g.TryAcquire()
		var rej *admit.RejectedError
		errors.As(err, &rej)
		if rej.RetryAfter() != 3*time.Second || rej.RetryAfterSeconds() != 3 {
			t.Fatalf("retry after %v, want 3s (one recent hold)", rej.RetryAfter())
		}
		// With a backlog the estimate grows, but stays under the cap.
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan result, 10)
		startWaiters(ctx, g, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 1, out)
		_, err = g.TryAcquire()
		errors.As(err, &rej)
		if rej.RetryAfter() != 20*time.Second {
			t.Errorf("with 10 queued: retry after %v, want the 20s cap", rej.RetryAfter())
		}
		cancel()
		for range 10 {
			<-out
		}
		ung := mustGate(t, admit.Config{Capacity: 1, NoTiming: true})
		hp, _ := ung.TryAcquire()
		defer hp.Done(admit.OutcomeOK)
		_, err = ung.TryAcquire()
		errors.As(err, &rej)
		if rej.RetryAfter() != time.Second {
			t.Errorf("untimed gate retry after %v, want 1s", rej.RetryAfter())
		}
	})
}

func TestRefusalFloodReusesErrors(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 1, NoTiming: true})
	p, _ := g.TryAcquire()
	defer p.Done(admit.OutcomeOK)
	_, e1 := g.TryAcquire()
	_, e2 := g.TryAcquire()
	if e1 != e2 {
		t.Error("identical refusals allocated two errors")
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := g.TryAcquire(); err == nil {
			t.Fatal("admitted")
		}
	})
	if allocs != 0 {
		t.Errorf("refusal allocates %v times", allocs)
	}
	if g.Stats().Rejected[admit.ReasonFull] < 1002 {
		t.Error("reused refusals were not counted")
	}
}

func TestAdmissionAllocatesNothing(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 4, MaxWaiters: 4})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := g.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Done(admit.OutcomeOK)
		q, err := g.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		q.Done(admit.OutcomeOK)
	})
	if allocs != 0 {
		t.Errorf("admission allocates %v times", allocs)
	}
}

type recorder struct {
	mu       sync.Mutex
	admits   []admit.AdmissionEvent
	complete []admit.CompletionEvent
}

func (r *recorder) ObserveAdmission(e admit.AdmissionEvent) {
	r.mu.Lock()
	r.admits = append(r.admits, e)
	r.mu.Unlock()
}

func (r *recorder) ObserveCompletion(e admit.CompletionEvent) {
	r.mu.Lock()
	r.complete = append(r.complete, e)
	r.mu.Unlock()
}

func TestObserverSeesEveryDecisionAndCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &recorder{}, &recorder{}
		g := mustGate(t, admit.Config{Name: "up", Capacity: 1, Kinds: []string{"call"}, Observer: admit.Observers(a, nil, b)})
		p, _ := g.TryAcquire()
		time.Sleep(5 * time.Millisecond)
		g.TryAcquire()
		p.Done(admit.OutcomeDropped)
		q, _ := g.TryAcquire()
		time.Sleep(7 * time.Millisecond)
		q.Done(admit.OutcomePanic)
		for _, r := range []*recorder{a, b} {
			if len(r.admits) != 3 || len(r.complete) != 2 {
				t.Fatalf("events: %d admissions %d completions", len(r.admits), len(r.complete))
			}
			if e := r.admits[0]; !e.Accepted || e.Gate != "up" || e.Kind != "call" || e.Inflight != 1 || e.Capacity != 1 {
				t.Errorf("admission event %+v", e)
			}
			if e := r.admits[1]; e.Accepted || e.Reason != admit.ReasonFull {
				t.Errorf("refusal event %+v", e)
			}
			if e := r.complete[0]; e.Outcome != admit.OutcomeDropped || e.Sample() || e.Hold != 5*time.Millisecond {
				t.Errorf("dropped completion %+v sample=%v", e, e.Sample())
			}
			if e := r.complete[1]; e.Outcome != admit.OutcomePanic || !e.Sample() || e.Hold != 7*time.Millisecond {
				t.Errorf("panic completion %+v", e)
			}
		}
		if admit.Observers() != nil || admit.Observers(nil) != nil {
			t.Error("Observers of nothing is not nil")
		}
		if s := g.Stats(); s.HoldTime != 12*time.Millisecond {
			t.Errorf("hold time %v, want 12ms", s.HoldTime)
		}
	})
}

// grantRecorder is a recorder that takes grants as ObserveGrant.
type grantRecorder struct {
	recorder
	grants []int64
}

func (r *grantRecorder) ObserveGrant(inflight int64) {
	r.mu.Lock()
	r.grants = append(r.grants, inflight)
	r.mu.Unlock()
}

// A GrantObserver is told of every grant, queued ones included, through
// ObserveGrant with the slots in use after it, and of refusals through
// ObserveAdmission. Among several observers it is an Observer like any
// other and sees every event.
func TestGrantObserverGetsGrantsAsInflight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &grantRecorder{}
		g := mustGate(t, admit.Config{Capacity: 2, MaxWaiters: 1, MaxWait: time.Second, Observer: r})
		p1, _ := g.TryAcquire()
		p2, _ := g.TryAcquireFor(admit.Request{Class: admit.ClassSheddable})
		if _, err := g.TryAcquire(); err == nil {
			t.Fatal("a third slot of two")
		}
		out := make(chan result, 1)
		queueOne(t.Context(), g, 1, admit.Request{}, out)
		p1.Done(admit.OutcomeOK)
		q := <-out
		if q.err != nil {
			t.Fatal(q.err)
		}
		q.p.Done(admit.OutcomeOK)
		p2.Done(admit.OutcomeOK)
		if want := []int64{1, 2, 2}; !slices.Equal(r.grants, want) {
			t.Errorf("grants seen as inflight %v, want %v", r.grants, want)
		}
		if len(r.admits) != 1 || r.admits[0].Accepted || r.admits[0].Reason != admit.ReasonFull {
			t.Errorf("admission events %+v, want the one refusal", r.admits)
		}
		if len(r.complete) != 3 {
			t.Errorf("%d completions, want 3", len(r.complete))
		}

		// Fanned out with another observer, it gets ObserveAdmission for grants.
		r2, plain := &grantRecorder{}, &recorder{}
		g2 := mustGate(t, admit.Config{Capacity: 1, Observer: admit.Observers(r2, plain)})
		p, _ := g2.TryAcquire()
		p.Done(admit.OutcomeOK)
		if len(r2.grants) != 0 || len(r2.admits) != 1 || !r2.admits[0].Accepted || len(plain.admits) != 1 {
			t.Errorf("fanned out: grants %v, admissions %+v and %+v", r2.grants, r2.admits, plain.admits)
		}
	})
}

func TestReasonAndOutcomeLabels(t *testing.T) {
	want := []string{"", "full", "queue_full", "wait_timeout", "deadline", "canceled", "closed", "rate", "shed", "breaker_open"}
	for i, w := range want {
		if got := admit.Reason(i).String(); got != w {
			t.Errorf("Reason(%d) = %q, want %q", i, got, w)
		}
	}
	if admit.NumReasons != len(want) || !strings.HasPrefix(admit.Reason(99).String(), "reason(") {
		t.Error("reason set changed without updating labels")
	}
	if admit.ReasonClosed.Overload() || admit.ReasonCanceled.Overload() || !admit.ReasonQueueFull.Overload() {
		t.Error("Overload classification wrong")
	}
	for i, w := range []string{"ok", "error", "canceled", "panic", "dropped"} {
		if got := admit.Outcome(i).String(); got != w {
			t.Errorf("Outcome(%d) = %q, want %q", i, got, w)
		}
	}
}
