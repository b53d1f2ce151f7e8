package admit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"pgregory.net/rapid"
)

// The property test drives a gate with random sequences of try / acquire /
// cancel / timeout / done / double done / capacity change / close, inside a
// synctest bubble so that every step settles before the next: after each
// step every goroutine is either finished or parked in the gate's queue.
// An independent model counts what the callers saw (permits returned,
// refusals by reason, Done calls by outcome, callers still blocked) and
// the gate's Stats must agree with it at every step, as must the safety
// and liveness rules below.

const propMaxWait = 50 * time.Millisecond

type propWaiter struct {
	id       int
	kind     admit.Kind
	n        int64
	deadline time.Time // when MaxWait refuses it
	cancel   context.CancelFunc
	res      chan result
}

type propHeld struct {
	p    *admit.Permit
	kind admit.Kind
	n    int64
	done bool
}

type propModel struct {
	g        *admit.Gate
	capacity int64
	closed   bool

	offered   [3]uint64
	admitted  [3]uint64
	rejected  [3][admit.NumReasons]uint64
	completed [3][admit.NumOutcomes]uint64
	misuse    uint64

	held    []*propHeld
	waiters []*propWaiter // in arrival order
	nextID  int
}

func (m *propModel) inUse() int64 {
	var u int64
	for _, h := range m.held {
		if !h.done {
			u += h.n
		}
	}
	return u
}

// kindIndex maps the handles the test uses to the gate's kinds "a", "b".
func kindIndex(k admit.Kind) int { return int(k) }

func (m *propModel) record(kind admit.Kind, n int64, p *admit.Permit, err error) error {
	ki := kindIndex(kind)
	if err != nil {
		var rej *admit.RejectedError
		if !errors.As(err, &rej) || !errors.Is(err, admit.ErrRejected) {
			return fmt.Errorf("refusal %v is not a RejectedError", err)
		}
		if want := m.g.KindName(kind); rej.Kind() != want {
			return fmt.Errorf("refusal kind %q, want %q", rej.Kind(), want)
		}
		m.rejected[ki][rej.Reason()]++
		return nil
	}
	if p.Weight() != n {
		return fmt.Errorf("permit weight %d, want %d", p.Weight(), n)
	}
	m.admitted[ki]++
	m.held = append(m.held, &propHeld{p: p, kind: kind, n: n})
	return nil
}

// settle lets the bubble run until everything is parked, then collects
// the waiters that finished.
func (m *propModel) settle() error {
	synctest.Wait()
	var still []*propWaiter
	for _, w := range m.waiters {
		select {
		case r := <-w.res:
			w.cancel()
			if err := m.record(w.kind, w.n, r.p, r.err); err != nil {
				return err
			}
		default:
			still = append(still, w)
		}
	}
	m.waiters = still
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
		s.Waiting != int64(len(m.waiters)) || s.InUse != m.inUse() || s.Misuse != m.misuse {
		return fmt.Errorf("gate offered %d admitted %d inflight %d waiting %d inUse %d misuse %d; model %d %d %d %d %d %d",
			s.Offered, s.Admitted, s.Inflight, s.Waiting, s.InUse, s.Misuse,
			offered, admitted, inflight, len(m.waiters), m.inUse(), m.misuse)
	}
	if s.Offered != s.Admitted+s.Rejected.Total()+uint64(s.Waiting) || s.Admitted != s.Completed.Total()+uint64(s.Inflight) {
		return fmt.Errorf("invariants broken: %+v", s)
	}
	// Liveness: the oldest waiter that could fit is blocked only because
	// it does not fit now (no lost wake-up, no slot stranded).
	for _, w := range m.waiters {
		if w.n > m.capacity {
			continue
		}
		if m.inUse()+w.n <= m.capacity && !m.closed {
			return fmt.Errorf("waiter %d (n=%d) still queued with %d of %d slots in use", w.id, w.n, m.inUse(), m.capacity)
		}
		break
	}
	return nil
}

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

func propCase(rt *rapid.T) {
	capacity := rapid.Int64Range(1, 4).Draw(rt, "capacity")
	g, err := admit.New(admit.Config{
		Capacity: capacity, MaxWaiters: 3, MaxWait: propMaxWait,
		NoTiming: rapid.Bool().Draw(rt, "untimed"), // untimed gates take the bare fast path
		Kinds:    []string{"a", "b"}, MaxOvertakes: rapid.IntRange(-1, 3).Draw(rt, "overtakes"),
	})
	if err != nil {
		rt.Fatal(err)
	}
	m := &propModel{g: g, capacity: capacity}
	defer func() { // leave nothing running in the bubble
		for _, w := range m.waiters {
			w.cancel()
		}
		g.Close()
		synctest.Wait()
	}()
	kindGen := rapid.SampledFrom([]admit.Kind{0, 1})
	weightGen := rapid.Int64Range(1, 3)
	actions := map[string]func(*rapid.T){
		"try": func(rt *rapid.T) {
			k, n := kindGen.Draw(rt, "kind"), weightGen.Draw(rt, "n")
			m.offered[kindIndex(k)]++
			wantAdmit := !m.closed && len(m.waiters) == 0 && m.inUse()+n <= m.capacity
			p, err := g.TryAcquireFor(admit.Request{Kind: k, Weight: n})
			if (err == nil) != wantAdmit {
				rt.Fatalf("TryAcquireN(%d) admitted=%v, want %v (inUse %d cap %d waiters %d)", n, err == nil, wantAdmit, m.inUse(), m.capacity, len(m.waiters))
			}
			var pp *admit.Permit
			if err == nil {
				pp = &p
			}
			if err := m.record(k, n, pp, err); err != nil {
				rt.Fatal(err)
			}
		},
		"acquire": func(rt *rapid.T) {
			k, n := kindGen.Draw(rt, "kind"), weightGen.Draw(rt, "n")
			m.offered[kindIndex(k)]++
			ctx, cancel := context.WithCancel(context.Background())
			w := &propWaiter{id: m.nextID, kind: k, n: n, deadline: time.Now().Add(propMaxWait), cancel: cancel, res: make(chan result, 1)}
			m.nextID++
			go func() {
				p, err := g.AcquireFor(ctx, admit.Request{Kind: k, Weight: n})
				if err != nil {
					w.res <- result{err: err}
					return
				}
				w.res <- result{p: &p}
			}()
			m.waiters = append(m.waiters, w)
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
			m.completed[kindIndex(h.kind)][o]++
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
			if len(m.waiters) == 0 {
				rt.Skip("nobody waiting")
			}
			rapid.SampledFrom(m.waiters).Draw(rt, "waiter").cancel()
		},
		"time passes": func(rt *rapid.T) {
			time.Sleep(time.Duration(rapid.Int64Range(1, 2*int64(propMaxWait)).Draw(rt, "sleep")))
		},
		"setCapacity": func(rt *rapid.T) {
			c := rapid.Int64Range(0, 5).Draw(rt, "capacity")
			if err := g.SetCapacity(c); err != nil {
				rt.Fatal(err)
			}
			if !m.closed {
				m.capacity = c
			}
		},
		"close": func(rt *rapid.T) {
			if rapid.IntRange(0, 9).Draw(rt, "rarely") != 0 {
				rt.Skip("close is rare")
			}
			g.Close()
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

	// Wind down: end every permit and wait for every waiter.
	for _, w := range m.waiters {
		w.cancel()
	}
	for len(m.waiters) > 0 || anyLive(m.held) {
		for _, h := range m.held {
			if !h.done {
				h.p.Done(admit.OutcomeOK)
				h.done = true
				m.completed[kindIndex(h.kind)][admit.OutcomeOK]++
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
