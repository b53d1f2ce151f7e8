package admit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"pgregory.net/rapid"
)

// The property test drives a gate with random sequences of try / acquire /
// cancel / time passing / done / double done / capacity change / close,
// inside a synctest bubble so that every step settles before the next:
// after each step every goroutine is either finished or parked in the
// gate's queue. An independent model of the queue predicts, step by step,
// which callers are granted (arrival order, bounded overtaking), refused
// (and why) or still waiting; the gate must do exactly that, and its Stats
// must match the model's counts. Weights are drawn across the whole int64
// range and capacities up to MaxCapacity.
//
// Time moves one nanosecond before every arrival, so no two waiters share
// a deadline: with a tie, which of two simultaneous time-outs the runtime
// runs first is not the gate's choice, and the model could not predict it.

const propMaxWait = 50 * time.Millisecond

type propWaiter struct {
	id        int
	kind      admit.Kind
	n         int64
	deadline  time.Time // when MaxWait refuses it
	overtaken int
	cancel    context.CancelFunc
	res       chan result
	// what the model says: still queued, or decided
	decided bool
	granted bool
	reason  admit.Reason
}

type propHeld struct {
	p    *admit.Permit
	kind admit.Kind
	n    int64
	done bool
}

type propModel struct {
	g            *admit.Gate
	capacity     int64
	maxWaiters   int
	maxOvertakes int
	closed       bool

	offered   [2]uint64
	admitted  [2]uint64
	rejected  [2][admit.NumReasons]uint64
	completed [2][admit.NumOutcomes]uint64
	misuse    uint64

	held    []*propHeld
	queue   []*propWaiter // queued, in arrival order
	pending []*propWaiter // decided by the model, result not yet collected
	nextID  int
}

func (m *propModel) inUse() int64 {
	var u int64
	for _, h := range m.held {
		if !h.done {
			u += h.n
		}
	}
	for _, w := range m.pending {
		if w.granted {
			u += w.n
		}
	}
	return u
}

// grant is the model's queue rule: walk the queue in arrival order and
// grant every waiter that fits; a waiter that does not fit (the first
// such, "blocked") may be overtaken by later ones at most maxOvertakes
// times, after which nobody behind it is granted until it fits.
func (m *propModel) grant() {
	if m.closed {
		return
	}
	var blocked *propWaiter
	var keep []*propWaiter
	stopped := false
	for _, w := range m.queue {
		switch {
		case stopped:
		case m.inUse() >= m.capacity:
			stopped = true
		case blocked != nil && blocked.overtaken >= m.maxOvertakes:
			stopped = true
		case m.inUse()+w.n <= m.capacity:
			m.decide(w, true, admit.ReasonNone)
			if blocked != nil {
				blocked.overtaken++
			}
			continue
		case blocked == nil:
			blocked = w
			if m.maxOvertakes < 0 {
				stopped = true
			}
		}
		keep = append(keep, w)
	}
	m.queue = keep
}

func (m *propModel) decide(w *propWaiter, granted bool, r admit.Reason) {
	w.decided, w.granted, w.reason = true, granted, r
	m.pending = append(m.pending, w)
}

// leave removes a queued waiter that gave up, then lets the queue move.
func (m *propModel) leave(w *propWaiter, r admit.Reason) {
	for i, q := range m.queue {
		if q == w {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			m.decide(w, false, r)
			m.grant()
			return
		}
	}
}

// advance moves the model's clock to now, refusing the waiters whose
// MaxWait passed, earliest first.
func (m *propModel) advance(now time.Time) {
	for {
		var first *propWaiter
		for _, w := range m.queue {
			if !w.deadline.After(now) && (first == nil || w.deadline.Before(first.deadline)) {
				first = w
			}
		}
		if first == nil {
			return
		}
		m.leave(first, admit.ReasonWaitTimeout)
	}
}

func (m *propModel) record(kind admit.Kind, n int64, p *admit.Permit, err error) error {
	if err != nil {
		var rej *admit.RejectedError
		if !errors.As(err, &rej) || !errors.Is(err, admit.ErrRejected) {
			return fmt.Errorf("refusal %v is not a RejectedError", err)
		}
		if want := m.g.KindName(kind); rej.Kind() != want {
			return fmt.Errorf("refusal kind %q, want %q", rej.Kind(), want)
		}
		m.rejected[kind][rej.Reason()]++
		return nil
	}
	if p.Weight() != n {
		return fmt.Errorf("permit weight %d, want %d", p.Weight(), n)
	}
	m.admitted[kind]++
	m.held = append(m.held, &propHeld{p: p, kind: kind, n: n})
	return nil
}

// settle lets the bubble run until everything is parked, then checks that
// exactly the waiters the model decided have finished, each as predicted.
func (m *propModel) settle() error {
	synctest.Wait()
	for _, w := range m.queue {
		select {
		case r := <-w.res:
			return fmt.Errorf("waiter %d (kind %d, n %d) finished (err %v) but the model has it queued", w.id, w.kind, w.n, r.err)
		default:
		}
	}
	for _, w := range m.pending {
		var r result
		select {
		case r = <-w.res:
		default:
			return fmt.Errorf("waiter %d (kind %d, n %d): model says granted=%v reason=%v, but it is still waiting", w.id, w.kind, w.n, w.granted, w.reason)
		}
		w.cancel()
		if w.granted != (r.err == nil) {
			return fmt.Errorf("waiter %d (n %d): granted=%v, model says %v (%v)", w.id, w.n, r.err == nil, w.granted, w.reason)
		}
		if r.err != nil {
			var rej *admit.RejectedError
			if errors.As(r.err, &rej) && rej.Reason() != w.reason {
				return fmt.Errorf("waiter %d: refused %v, model says %v", w.id, rej.Reason(), w.reason)
			}
		}
		if err := m.record(w.kind, w.n, r.p, r.err); err != nil {
			return err
		}
	}
	m.pending = nil
	return nil
}

func (m *propModel) check() error {
	s := m.g.Stats()
	var offered, admitted uint64
	for ki, ks := range s.Kinds {
		if ks.Rejected != admit.ReasonCounts(m.rejected[ki]) {
			return fmt.Errorf("kind %s rejected %v, model %v", ks.Kind, ks.Rejected, m.rejected[ki])
		}
		if ks.Completed != admit.OutcomeCounts(m.completed[ki]) {
			return fmt.Errorf("kind %s completed %v, model %v", ks.Kind, ks.Completed, m.completed[ki])
		}
		if ks.Admitted != m.admitted[ki] || ks.Offered != m.offered[ki] {
			return fmt.Errorf("kind %s offered/admitted %d/%d, model %d/%d", ks.Kind, ks.Offered, ks.Admitted, m.offered[ki], m.admitted[ki])
		}
		offered += m.offered[ki]
		admitted += m.admitted[ki]
	}
	var inflight int64
	for _, h := range m.held {
		if !h.done {
			inflight++
		}
	}
	if s.Offered != offered || s.Admitted != admitted || s.Inflight != inflight ||
		s.Waiting != int64(len(m.queue)) || s.Queued != int64(len(m.queue)) || s.InUse != m.inUse() || s.Misuse != m.misuse {
		return fmt.Errorf("gate offered %d admitted %d inflight %d waiting %d queued %d inUse %d misuse %d; model %d %d %d %d %d %d %d",
			s.Offered, s.Admitted, s.Inflight, s.Waiting, s.Queued, s.InUse, s.Misuse,
			offered, admitted, inflight, len(m.queue), len(m.queue), m.inUse(), m.misuse)
	}
	if s.Offered != s.Admitted+s.Rejected.Total()+uint64(s.Waiting) || s.Admitted != s.Completed.Total()+uint64(s.Inflight) {
		return fmt.Errorf("invariants broken: %+v", s)
	}
	return nil
}

// About 2 s under -race: rapid's cases (1,000 by default), each settled
// step by step in a synctest bubble.
func TestPropertyInvariantsUnderRandomInterleavings(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// Each case runs in its own bubble. rapid reports failures by
		// panicking on the goroutine it runs the case on, so a panic inside
		// the bubble is carried out and raised again there.
		var failure any
		synctest.Test(t, func(*testing.T) {
			defer func() { failure = recover() }()
			propCase(rt)
		})
		if failure != nil {
			panic(failure)
		}
	})
}

// capacityGen draws small capacities mostly, and ones near MaxCapacity.
func capacityGen(min int64) *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64Range(min, 4), rapid.Int64Range(admit.MaxCapacity-3, admit.MaxCapacity))
}

func propCase(rt *rapid.T) {
	capacity := capacityGen(1).Draw(rt, "capacity")
	maxOvertakes := rapid.IntRange(-1, 3).Draw(rt, "overtakes")
	g, err := admit.New(admit.Config{
		Capacity: capacity, MaxWaiters: 3, MaxWait: propMaxWait,
		NoTiming: rapid.Bool().Draw(rt, "untimed"), // untimed gates take the bare fast path
		Kinds:    []string{"a", "b"}, MaxOvertakes: maxOvertakes,
	})
	if err != nil {
		rt.Fatal(err)
	}
	if maxOvertakes == 0 {
		maxOvertakes = admit.DefaultMaxOvertakes
	}
	m := &propModel{g: g, capacity: capacity, maxWaiters: 3, maxOvertakes: maxOvertakes}
	defer func() { // leave nothing running in the bubble
		for _, w := range append(m.queue, m.pending...) {
			w.cancel()
		}
		g.Close()
		synctest.Wait()
	}()
	kindGen := rapid.SampledFrom([]admit.Kind{0, 1})
	// Weights: mostly small, sometimes near the current capacity, and now
	// and then anything an int64 holds (invalid ones must touch nothing).
	weight := func(rt *rapid.T) int64 {
		switch rapid.IntRange(0, 9).Draw(rt, "weightKind") {
		case 0:
			return rapid.Int64().Draw(rt, "anyWeight")
		case 1, 2:
			c := max(m.capacity, 1)
			return rapid.Int64Range(c-2, c+1).Draw(rt, "nearCapacity")
		}
		return rapid.Int64Range(0, 3).Draw(rt, "n")
	}
	// valid returns the effective weight and whether the request is valid.
	valid := func(n int64) (int64, bool) {
		if n == 0 {
			return 1, true
		}
		return n, n >= 1 && n <= admit.MaxCapacity
	}
	actions := map[string]func(*rapid.T){
		"try": func(rt *rapid.T) {
			k, w := kindGen.Draw(rt, "kind"), weight(rt)
			p, err := g.TryAcquireFor(admit.Request{Kind: k, Weight: w})
			n, ok := valid(w)
			if !ok {
				if !errors.Is(err, admit.ErrInvalidRequest) {
					rt.Fatalf("TryAcquireFor(weight %d) = %v, want ErrInvalidRequest", w, err)
				}
				return
			}
			m.offered[k]++
			wantAdmit := !m.closed && len(m.queue) == 0 && m.inUse()+n <= m.capacity
			if (err == nil) != wantAdmit {
				rt.Fatalf("TryAcquireFor(n %d) admitted=%v, want %v (inUse %d cap %d queued %d)", n, err == nil, wantAdmit, m.inUse(), m.capacity, len(m.queue))
			}
			var pp *admit.Permit
			if err == nil {
				pp = &p
			} else if want := map[bool]admit.Reason{true: admit.ReasonClosed, false: admit.ReasonFull}[m.closed]; reasonOf(rt, err) != want {
				rt.Fatalf("TryAcquireFor refused %v, want %v", reasonOf(rt, err), want)
			}
			if err := m.record(k, n, pp, err); err != nil {
				rt.Fatal(err)
			}
		},
		"acquire": func(rt *rapid.T) {
			k, w := kindGen.Draw(rt, "kind"), weight(rt)
			time.Sleep(time.Nanosecond) // distinct deadlines (see above)
			m.advance(time.Now())
			n, ok := valid(w)
			if !ok {
				if _, err := g.AcquireFor(context.Background(), admit.Request{Kind: k, Weight: w}); !errors.Is(err, admit.ErrInvalidRequest) {
					rt.Fatalf("AcquireFor(weight %d) = %v, want ErrInvalidRequest", w, err)
				}
				return
			}
			m.offered[k]++
			ctx, cancel := context.WithCancel(context.Background())
			wt := &propWaiter{id: m.nextID, kind: k, n: n, deadline: time.Now().Add(propMaxWait), cancel: cancel, res: make(chan result, 1)}
			m.nextID++
			go func() {
				p, err := g.AcquireFor(ctx, admit.Request{Kind: k, Weight: w})
				if err != nil {
					wt.res <- result{err: err}
					return
				}
				wt.res <- result{p: &p}
			}()
			switch {
			case m.closed:
				m.decide(wt, false, admit.ReasonClosed)
			case len(m.queue) == 0 && m.inUse()+n <= m.capacity:
				m.decide(wt, true, admit.ReasonNone)
			case n > m.capacity:
				m.decide(wt, false, admit.ReasonFull)
			case len(m.queue) >= m.maxWaiters:
				m.decide(wt, false, admit.ReasonQueueFull)
			default:
				m.queue = append(m.queue, wt)
				m.grant()
			}
		},
		"done": func(rt *rapid.T) {
			var live []*propHeld
			for _, h := range m.held {
				if !h.done {
					live = append(live, h)
				}
			}
			if len(live) == 0 {
				rt.Skip("nothing held")
			}
			h := rapid.SampledFrom(live).Draw(rt, "permit")
			o := admit.Outcome(rapid.IntRange(0, admit.NumOutcomes-1).Draw(rt, "outcome"))
			h.p.Done(o)
			h.done = true
			m.completed[h.kind][o]++
			m.grant()
		},
		"doubleDone": func(rt *rapid.T) {
			var done []*propHeld
			for _, h := range m.held {
				if h.done {
					done = append(done, h)
				}
			}
			if len(done) == 0 {
				rt.Skip("nothing done yet")
			}
			rapid.SampledFrom(done).Draw(rt, "permit").p.Done(admit.OutcomeOK)
			m.misuse++
		},
		"cancel": func(rt *rapid.T) {
			if len(m.queue) == 0 {
				rt.Skip("nobody waiting")
			}
			w := rapid.SampledFrom(m.queue).Draw(rt, "waiter")
			w.cancel()
			m.leave(w, admit.ReasonCanceled)
		},
		"time passes": func(rt *rapid.T) {
			time.Sleep(time.Duration(rapid.Int64Range(1, 2*int64(propMaxWait)).Draw(rt, "sleep")))
			m.advance(time.Now())
		},
		"setCapacity": func(rt *rapid.T) {
			c := rapid.OneOf(capacityGen(0), rapid.Int64Range(0, 5)).Draw(rt, "newCapacity")
			if err := g.SetCapacity(c); err != nil {
				rt.Fatal(err)
			}
			if m.closed {
				return
			}
			m.capacity = c
			var keep []*propWaiter
			for _, w := range m.queue {
				if w.n > c {
					m.decide(w, false, admit.ReasonFull)
					continue
				}
				keep = append(keep, w)
			}
			m.queue = keep
			m.grant()
		},
		"badCapacity": func(rt *rapid.T) {
			c := rapid.OneOf(rapid.Int64Range(math.MinInt64, -1), rapid.Int64Range(admit.MaxCapacity+1, math.MaxInt64)).Draw(rt, "badCapacity")
			if err := g.SetCapacity(c); !errors.Is(err, admit.ErrInvalidConfig) {
				rt.Fatalf("SetCapacity(%d) = %v, want ErrInvalidConfig", c, err)
			}
		},
		"close": func(rt *rapid.T) {
			if rapid.IntRange(0, 9).Draw(rt, "rarely") != 0 {
				rt.Skip("close is rare")
			}
			g.Close()
			for _, w := range m.queue {
				m.decide(w, false, admit.ReasonClosed)
			}
			m.queue = nil
			m.closed = true
		},
		"": func(rt *rapid.T) { // check after every action
			if err := m.settle(); err != nil {
				rt.Fatal(err)
			}
			if err := m.check(); err != nil {
				rt.Fatal(err)
			}
		},
	}
	rt.Repeat(actions)

	// Wind down: cancel the waiters one by one (each leaving may grant the
	// next), then end every permit and wait for every waiter.
	for len(m.queue) > 0 {
		w := m.queue[0]
		w.cancel()
		m.leave(w, admit.ReasonCanceled)
		if err := m.settle(); err != nil {
			rt.Fatal(err)
		}
	}
	for len(m.queue) > 0 || len(m.pending) > 0 || anyLive(m.held) {
		for _, h := range m.held {
			if !h.done {
				h.p.Done(admit.OutcomeOK)
				h.done = true
				m.completed[h.kind][admit.OutcomeOK]++
			}
		}
		if err := m.settle(); err != nil {
			rt.Fatal(err)
		}
	}
	if err := m.check(); err != nil {
		rt.Fatal(err)
	}
	if s := g.Stats(); s.Inflight != 0 || s.Waiting != 0 || s.InUse != 0 {
		rt.Fatalf("after all work ended: inflight %d waiting %d inUse %d", s.Inflight, s.Waiting, s.InUse)
	}
}

func anyLive(hs []*propHeld) bool {
	for _, h := range hs {
		if !h.done {
			return true
		}
	}
	return false
}
