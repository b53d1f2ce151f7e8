package admit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// Each test here is one defect a review found in an earlier gate, kept so
// it cannot come back.

// A weight outside 1..MaxCapacity is an error that names it and touches
// nothing; a valid weight above the capacity is refused at once. Earlier,
// math.MaxInt64 overflowed `used + n`, was admitted, and left the gate
// refusing everything for good.
func TestWeightOutsideRangeTouchesNothing(t *testing.T) {
	g := mustGate(t, admit.Config{Capacity: 4, MaxWaiters: 2})
	held, _ := g.TryAcquire()
	defer held.Done(admit.OutcomeOK)
	before := g.Stats()
	for _, w := range []int64{-1, -2, math.MinInt64, admit.MaxCapacity + 1, math.MaxInt64, math.MaxInt64 - 1} {
		_, err := g.TryAcquireFor(admit.Request{Weight: w})
		if !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("TryAcquireFor(weight %d) = %v, want ErrInvalidRequest", w, err)
		}
		_, err = g.AcquireFor(context.Background(), admit.Request{Weight: w})
		if !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("AcquireFor(weight %d) = %v, want ErrInvalidRequest", w, err)
		}
	}
	if after := g.Stats(); after.Offered != before.Offered || after.InUse != 1 {
		t.Fatalf("invalid weights changed the gate: offered %d -> %d, in use %d", before.Offered, after.Offered, after.InUse)
	}
	for _, acquire := range []func() error{
		func() error { _, err := g.TryAcquireFor(admit.Request{Weight: 5}); return err },
		func() error {
			_, err := g.AcquireFor(context.Background(), admit.Request{Weight: admit.MaxCapacity})
			return err
		},
	} {
		if r := reasonOf(t, acquire()); r != admit.ReasonFull {
			t.Errorf("weight above capacity: reason %v, want full", r)
		}
	}
	p, err := g.TryAcquireFor(admit.Request{Weight: 3})
	if err != nil {
		t.Fatalf("the gate no longer admits what fits: %v", err)
	}
	p.Done(admit.OutcomeOK)
	if s := g.Stats(); s.InUse != 1 || s.Rejected[admit.ReasonFull] != 2 {
		t.Errorf("in use %d, full refusals %d; want 1 and 2", s.InUse, s.Rejected[admit.ReasonFull])
	}
}

// TryAcquire refuses only when the slots are taken or a waiter that can
// still be served is queued ahead. Earlier, a waiter that a capacity
// shrink left unable to fit stayed queued, and TryAcquire answered
// "full (inflight 0/4)" until its wait ended (never, without a MaxWait).
func TestShrinkRefusesWaitersThatNoLongerFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 4, MaxWaiters: 4, MaxWait: -1})
		held, _ := g.TryAcquireFor(admit.Request{Weight: 4})
		out := make(chan result, 1)
		startWaiters(context.Background(), g, []int{1}, 3, out)
		if err := g.SetCapacity(2); err != nil {
			t.Fatal(err)
		}
		r := <-out
		if r.err == nil || reasonOf(t, r.err) != admit.ReasonFull {
			t.Fatalf("waiter of weight 3 after shrink to 2: %+v, want refused full", r)
		}
		held.Done(admit.OutcomeOK)
		p, err := g.TryAcquire()
		if err != nil {
			t.Fatalf("TryAcquire on an idle gate after the shrink: %v", err)
		}
		p.Done(admit.OutcomeOK)
		s := g.Stats()
		checkInvariants(t, s)
		if s.Waiting != 0 || s.Queued != 0 || s.Rejected[admit.ReasonFull] != 1 {
			t.Errorf("waiting %d queued %d full %d", s.Waiting, s.Queued, s.Rejected[admit.ReasonFull])
		}
	})
}

// A waiter that was granted its slot but has not run yet is no longer
// queued: TryAcquire must not refuse because of it when slots are free.
func TestGrantedWaiterDoesNotBlockTryAcquire(t *testing.T) {
	oneProc(t)
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 2, MaxWaiters: 4, MaxWait: -1})
		a, _ := g.TryAcquire()
		b, _ := g.TryAcquire()
		out := make(chan result, 1)
		startWaiters(context.Background(), g, []int{1}, 1, out)
		a.Done(admit.OutcomeOK) // granted to the waiter, which cannot run yet (one P, we keep it)
		b.Done(admit.OutcomeOK) // a free slot, and nobody queued
		p, err := g.TryAcquire()
		if err != nil {
			t.Fatalf("TryAcquire with a free slot and only a granted waiter: %v", err)
		}
		r := <-out
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		r.p.Done(admit.OutcomeOK)
		p.Done(admit.OutcomeOK)
		checkInvariants(t, g.Stats())
	})
}

// Releasing more than was taken never wraps the slot count: a Permit
// copied and ended twice panics with ErrOverRelease when the release
// would free more than is held, and the gate keeps working. Earlier, the
// 20-bit slot field wrapped to 0xFFFFF and the gate refused everything.
func TestOverReleaseThroughACopyPanics(t *testing.T) {
	for _, cfg := range []admit.Config{{Capacity: 2, NoTiming: true}, {Capacity: 2, SampleEvery: 1}, {Capacity: 2, Kinds: []string{"a", "b"}}} {
		g := mustGate(t, cfg)
		ch := make(chan *admit.Permit, 2)
		p, _ := g.TryAcquireFor(admit.Request{Kind: admit.Kind(len(cfg.Kinds) / 2)})
		copied := copyPermit(&p) // what `ch <- p` does to a value
		ch <- &p
		ch <- copied
		(<-ch).Done(admit.OutcomeOK)
		func() {
			defer func() {
				v := recover()
				err, _ := v.(error)
				if !errors.Is(err, admit.ErrOverRelease) {
					t.Errorf("second release of a copy: recovered %v, want ErrOverRelease", v)
				}
			}()
			(<-ch).Done(admit.OutcomeOK)
		}()
		s := g.Stats()
		if s.InUse != 0 || s.Misuse != 1 {
			t.Fatalf("after the over-release: in use %d misuse %d", s.InUse, s.Misuse)
		}
		for range 2 {
			q, err := g.TryAcquire()
			if err != nil {
				t.Fatalf("gate jammed after an over-release: %v", err)
			}
			defer q.Done(admit.OutcomeOK)
		}
	}
}

// copyPermit copies a Permit the way a channel send of a value would,
// which vet's copylocks check does not see.
func copyPermit(p *admit.Permit) *admit.Permit {
	c := new(admit.Permit)
	reflect.ValueOf(c).Elem().Set(reflect.ValueOf(p).Elem())
	return c
}

// Refusals caused by the caller's context unwrap to the context's error.
func TestContextRefusalsUnwrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, MaxWaiters: 2, MaxWait: -1})
		held, _ := g.TryAcquire()
		defer held.Done(admit.OutcomeOK)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := g.Acquire(ctx)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, admit.ErrRejected) {
			t.Errorf("canceled: %v does not match context.Canceled and ErrRejected", err)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		_, err = g.Acquire(dctx) // queues, then the deadline passes
		if !errors.Is(err, context.DeadlineExceeded) || reasonOf(t, err) != admit.ReasonDeadline {
			t.Errorf("deadline: %v does not match context.DeadlineExceeded", err)
		}
		_, err = g.TryAcquire()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("overload refusal %v matches a context error", err)
		}
	})
}

// RetryAfter follows recent hold times, not the lifetime average: after a
// long run of fast work, a slowdown shows in a few dozen completions.
// Dropped work does not feed it, and absurd hold times cannot overflow it.
func TestRetryAfterFollowsRecentHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 1, SampleEvery: 1, MaxRetryAfter: time.Hour})
		hold := func(d time.Duration, o admit.Outcome) {
			p, err := g.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
			p.Done(o)
		}
		retryAfter := func() time.Duration {
			p, _ := g.TryAcquire()
			defer p.Done(admit.OutcomeDropped)
			_, err := g.TryAcquire()
			var rej *admit.RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("not refused: %v", err)
			}
			return rej.RetryAfter()
		}
		for range 2000 {
			hold(10*time.Millisecond, admit.OutcomeOK)
		}
		if got := retryAfter(); got != time.Second {
			t.Fatalf("after fast work: retry after %v, want 1s", got)
		}
		for range 30 {
			hold(4*time.Second, admit.OutcomeOK)
		}
		// The lifetime mean is (2000×10ms + 30×4s)/2030 ≈ 69ms; the recent
		// holds are 4s.
		if got := retryAfter(); got < 3*time.Second || got > 4*time.Second {
			t.Fatalf("after a slowdown to 4s holds: retry after %v, want 3-4s", got)
		}
		for range 50 {
			hold(time.Minute, admit.OutcomeDropped) // abandoned work says nothing about service time
		}
		if got := retryAfter(); got < 3*time.Second || got > 4*time.Second {
			t.Fatalf("dropped work moved the estimate: retry after %v", got)
		}
		hold(100*365*24*time.Hour, admit.OutcomeOK) // a century (the bubble's clock allows no more)
		s := g.Stats()
		if got := retryAfter(); got != time.Hour {
			t.Errorf("after absurd holds: retry after %v, want the 1h cap", got)
		}
		if s.HoldTime <= 0 || s.RecentHold <= 0 {
			t.Errorf("hold sums overflowed: total %v recent %v", s.HoldTime, s.RecentHold)
		}
	})
}

// Hold time is measured on a sample of permits by default; the sample is
// unbiased, and every permit is timed when the gate has an observer.
func TestHoldSampling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8000
		sampled := mustGate(t, admit.Config{Capacity: 1})
		every := mustGate(t, admit.Config{Capacity: 1, Observer: &countingObserver{}})
		for _, g := range []*admit.Gate{sampled, every} {
			for range n {
				p, _ := g.TryAcquire()
				time.Sleep(time.Millisecond)
				p.Done(admit.OutcomeOK)
			}
		}
		s := sampled.Stats()
		if s.HoldSamples < n/8-300 || s.HoldSamples > n/8+300 {
			t.Errorf("default gate timed %d of %d permits, want about 1 in 8", s.HoldSamples, n)
		}
		if mean := s.HoldTime / time.Duration(max(s.HoldSamples, 1)); mean < time.Millisecond-time.Microsecond || mean > time.Millisecond+time.Microsecond {
			t.Errorf("sampled mean hold %v, want 1ms", mean)
		}
		if s := every.Stats(); s.HoldSamples != n || (s.HoldTime-n*time.Millisecond).Abs() > time.Microsecond {
			t.Errorf("gate with an observer timed %d permits, %v; want all %d, %v", s.HoldSamples, s.HoldTime, n, n*time.Millisecond)
		}
	})
}

type typedNilObserver struct{ n int }

func (o *typedNilObserver) ObserveAdmission(admit.AdmissionEvent)   { o.n++ }
func (o *typedNilObserver) ObserveCompletion(admit.CompletionEvent) { o.n++ }

// A typed nil Observer (a nil *T stored in the interface) observes
// nothing instead of panicking on the first event.
func TestTypedNilObserverIsNoObserver(t *testing.T) {
	var o *typedNilObserver
	g := mustGate(t, admit.Config{Observer: o})
	p, err := g.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	p.Done(admit.OutcomeOK)
	if admit.Observers(o, nil) != nil {
		t.Error("Observers of typed nils is not nil")
	}
}

func TestOutcomeFor(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want admit.Outcome
	}{
		{nil, admit.OutcomeOK},
		{context.Canceled, admit.OutcomeCanceled},
		{context.DeadlineExceeded, admit.OutcomeCanceled},
		{errors.Join(errors.New("read"), context.Canceled), admit.OutcomeCanceled},
		{errors.New("disk on fire"), admit.OutcomeError},
	} {
		if got := admit.OutcomeFor(tt.err); got != tt.want {
			t.Errorf("OutcomeFor(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TryAcquire never takes a free slot from under a queued waiter: with a
// big waiter at the head that does not fit yet, a free slot is held back
// for it, not given to whoever asks without queueing.
func TestTryAcquireDoesNotJumpTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := mustGate(t, admit.Config{Capacity: 2, MaxWaiters: 2, MaxWait: -1, MaxOvertakes: -1})
		held, _ := g.TryAcquire()
		out := make(chan result, 1)
		startWaiters(context.Background(), g, []int{1}, 2, out) // needs both slots
		if _, err := g.TryAcquire(); err == nil || reasonOf(t, err) != admit.ReasonFull {
			t.Fatalf("TryAcquire with a waiter queued ahead: %v, want refused full", err)
		}
		if _, err := g.TryAcquireFor(admit.Request{Weight: 1}); err == nil {
			t.Fatal("TryAcquireFor with a waiter queued ahead was admitted")
		}
		held.Done(admit.OutcomeOK)
		r := <-out
		if r.err != nil {
			t.Fatalf("the queued waiter: %v", r.err)
		}
		r.p.Done(admit.OutcomeOK)
		checkInvariants(t, g.Stats())
	})
}

// Once any caller has been refused because the gate is closed, no later
// call may be admitted. Close (and SetCapacity) store the new capacity
// before they invalidate admissions decided on the old one, and a
// refusal that read the new capacity used to come before a one-CAS
// admission that still used the old limit: the linearizability tests saw
// a TryAcquire refused as closed and the same client's next TryAcquire
// admitted. Each round here closes a gate while two goroutines alternate
// the slow path (weight 2) and the fast path (one slot), each checking
// that nothing is admitted after it saw the gate closed.
func TestNoAdmissionAfterAClosedRefusal(t *testing.T) {
	rounds := 6000
	if testing.Short() {
		rounds /= 4
	}
	for round := range rounds {
		g := mustGate(t, admit.Config{Capacity: 64, NoTiming: true})
		if p, err := g.TryAcquire(); err == nil { // raise the peak: the fast path is open
			p.Done(admit.OutcomeOK)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		bad := make(chan string, 2)
		for range 2 {
			wg.Go(func() {
				<-start
				for {
					p, err := g.TryAcquireFor(admit.Request{Weight: 2}) // the slow path
					if err == nil {
						p.Done(admit.OutcomeOK)
						continue
					}
					if !errors.Is(err, admit.ErrClosed) {
						continue
					}
					if p, err := g.TryAcquire(); err == nil { // the fast path, after the gate was seen closed
						p.Done(admit.OutcomeOK)
						bad <- fmt.Sprintf("round %d: admitted after a refusal as closed", round)
					}
					return
				}
			})
		}
		close(start)
		g.Close()
		wg.Wait()
		close(bad)
		for msg := range bad {
			t.Fatal(msg)
		}
	}
}

// A full queue sheds a waiter of a class without a share for a newcomer
// of a higher class, even while a permit of another class is released:
// the per-class usage that shedding (and the share order) reads used to
// be read apart from the slots in use, so a release in between made the
// default class look below a share it does not have, and the newcomer
// was refused queue_full. TestLinearizableQueues found it.
func TestSheddingDuringAReleaseOfAnotherClass(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds /= 4
	}
	for round := range rounds {
		g := mustGate(t, admit.Config{
			Capacity:   2,
			MaxWaiters: 1,
			MaxWait:    -1,
			Queueing:   admit.Queueing{ClassAging: -1, ClassShares: admit.ClassShares{admit.ClassSheddable: 0.5}},
		})
		held, err := g.TryAcquireFor(admit.Request{Weight: 2, Class: admit.ClassSheddable})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		waiter := make(chan error, 1)
		go func() {
			p, err := g.AcquireFor(ctx, admit.Request{}) // critical, no share
			if err == nil {
				p.Done(admit.OutcomeOK)
			}
			waiter <- err
		}()
		for g.Stats().Waiting == 0 {
			runtime.Gosched()
		}
		newcomer := make(chan error, 1)
		go func() {
			p, err := g.AcquireFor(ctx, admit.Request{Class: admit.ClassCriticalPlus})
			if err == nil {
				p.Done(admit.OutcomeOK)
			}
			newcomer <- err
		}()
		held.Done(admit.OutcomeOK)
		cancel()
		err = <-newcomer
		<-waiter
		var rej *admit.RejectedError
		if errors.As(err, &rej) && rej.Reason() == admit.ReasonQueueFull {
			t.Fatalf("round %d: a critical_plus newcomer was refused queue_full while the queue held only a critical waiter", round)
		}
	}
}
