package admit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/admit"
	"pgregory.net/rapid"
)

// The class property test drives a gate with random classes, shares,
// disciplines (FIFO or LIFO), weights of one or two slots, acquisitions,
// cancellations and completions, and predicts every grant and shed with
// an independent model of the service order:
//
//   - a class holding less than its guaranteed share goes first,
//   - then the higher class, then arrival order (FIFO) or its reverse (LIFO),
//   - a full queue sheds the newest waiter of the lowest class below the
//     newcomer that is not protected by its share,
//   - and, the point of shares, no class with a share starves: whenever it
//     waits below its share, the gate has no slot it could have given it.
//
// Time does not move, so CoDel and queued age (covered by their own tests)
// play no part.
// About 2 s under -race: rapid's cases, each settled step by step in a
// synctest bubble.
func TestPropertyClassesNeverStarve(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var failure any
		synctest.Test(t, func(*testing.T) {
			defer func() { failure = recover() }()
			classCase(rt)
		})
		if failure != nil {
			panic(failure)
		}
	})
}

type classWaiter struct {
	id     int
	class  admit.Class
	n      int64
	seq    int
	cancel context.CancelFunc
	res    chan result
	// the model's verdict
	granted bool
	reason  admit.Reason
}

type classHeld struct {
	p     *admit.Permit
	class admit.Class
	n     int64
}

type classModel struct {
	g          *admit.Gate
	capacity   int64
	maxWaiters int
	lifo       bool
	shares     admit.ClassShares
	queue      []*classWaiter
	pending    []*classWaiter
	held       []*classHeld
	seq        int
}

func (m *classModel) used() (u [admit.NumClasses]int64, total int64) {
	for _, h := range m.held {
		u[h.class] += h.n
		total += h.n
	}
	for _, w := range m.pending {
		if w.granted {
			u[w.class] += w.n
			total += w.n
		}
	}
	return u, total
}

func (m *classModel) minSlots(c admit.Class) int64 {
	f := m.shares[c]
	if f <= 0 {
		return 0
	}
	return max(int64(f*float64(m.capacity)), 1)
}

// less is the model's service order.
func (m *classModel) less(a, b *classWaiter, used [admit.NumClasses]int64) bool {
	da, db := used[a.class] < m.minSlots(a.class), used[b.class] < m.minSlots(b.class)
	if da != db {
		return da
	}
	if a.class.Rank() != b.class.Rank() {
		return a.class.Rank() < b.class.Rank()
	}
	if m.lifo {
		return a.seq > b.seq
	}
	return a.seq < b.seq
}

// grant hands out free slots in service order; the first waiter that does
// not fit may be overtaken MaxOvertakes (default 16) times.
func (m *classModel) grant() {
	var blocked *classWaiter
	overtaken := 0
	visited := map[*classWaiter]bool{}
	for {
		used, total := m.used()
		if total >= m.capacity || (blocked != nil && overtaken >= admit.DefaultMaxOvertakes) {
			return
		}
		var best *classWaiter
		for _, w := range m.queue {
			if !visited[w] && (best == nil || m.less(w, best, used)) {
				best = w
			}
		}
		if best == nil {
			return
		}
		visited[best] = true
		if total+best.n <= m.capacity {
			m.remove(best)
			best.granted = true
			m.pending = append(m.pending, best)
			if blocked != nil {
				overtaken++
			}
		} else if blocked == nil {
			blocked = best
		}
	}
}

func (m *classModel) remove(w *classWaiter) {
	for i, q := range m.queue {
		if q == w {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			return
		}
	}
}

func (m *classModel) refuse(w *classWaiter, r admit.Reason) {
	m.remove(w)
	w.granted, w.reason = false, r
	m.pending = append(m.pending, w)
}

func (m *classModel) settle() error {
	synctest.Wait()
	for _, w := range m.queue {
		select {
		case r := <-w.res:
			return fmt.Errorf("waiter %d (%v, n %d) finished (%v) but the model has it queued; gate %+v; model %s", w.id, w.class, w.n, r.err, m.g.Stats().Classes, m.describe())
		default:
		}
	}
	for _, w := range m.pending {
		var r result
		select {
		case r = <-w.res:
		default:
			return fmt.Errorf("waiter %d (%v, n %d): model says granted=%v reason=%v, but it still waits", w.id, w.class, w.n, w.granted, w.reason)
		}
		w.cancel()
		if w.granted != (r.err == nil) {
			return fmt.Errorf("waiter %d (%v, n %d): granted=%v (%v), model says %v (%v)", w.id, w.class, w.n, r.err == nil, r.err, w.granted, w.reason)
		}
		if r.err != nil {
			if got := reasonOf(rtFatal{}, r.err); got != w.reason {
				return fmt.Errorf("waiter %d refused %v, model says %v", w.id, got, w.reason)
			}
			continue
		}
		m.held = append(m.held, &classHeld{p: r.p, class: w.class, n: w.n})
	}
	m.pending = nil
	// Compare with the gate, and check that no class with a share starves.
	s := m.g.Stats()
	used, total := m.used()
	var waiting [admit.NumClasses]int64
	for _, w := range m.queue {
		waiting[w.class]++
	}
	for c := range admit.NumClasses {
		cs := s.Classes[c]
		if cs.InUse != used[c] || cs.Waiting != waiting[c] {
			return fmt.Errorf("class %v: gate in use %d waiting %d, model %d %d", admit.Class(c), cs.InUse, cs.Waiting, used[c], waiting[c])
		}
		if waiting[c] > 0 && used[c] < m.minSlots(admit.Class(c)) && total < m.capacity {
			// Only a waiter too big for the free slots may wait here.
			for _, w := range m.queue {
				if w.class == admit.Class(c) && total+w.n <= m.capacity {
					return fmt.Errorf("class %v starves: below its share (%d < %d) with a free slot", admit.Class(c), used[c], m.minSlots(admit.Class(c)))
				}
			}
		}
	}
	if s.InUse != total || s.Queued != int64(len(m.queue)) {
		return fmt.Errorf("gate in use %d queued %d, model %d %d", s.InUse, s.Queued, total, len(m.queue))
	}
	return nil
}

func (m *classModel) describe() string {
	var b []string
	for _, h := range m.held {
		b = append(b, fmt.Sprintf("held %v/%d", h.class, h.n))
	}
	for _, w := range m.queue {
		b = append(b, fmt.Sprintf("queued %d %v/%d", w.id, w.class, w.n))
	}
	for _, w := range m.pending {
		b = append(b, fmt.Sprintf("pending %d %v/%d %v %v", w.id, w.class, w.n, w.granted, w.reason))
	}
	return strings.Join(b, "; ")
}

// rtFatal lets reasonOf be used where a failure is returned, not raised.
type rtFatal struct{}

func (rtFatal) Helper()                   {}
func (rtFatal) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func classCase(rt *rapid.T) {
	capacity := rapid.Int64Range(1, 5).Draw(rt, "capacity")
	var shares admit.ClassShares
	left := 1.0
	for c := range admit.NumClasses {
		if rapid.Bool().Draw(rt, "hasShare") {
			f := rapid.Float64Range(0, left).Draw(rt, "share")
			shares[c], left = f, left-f
		}
	}
	lifo := rapid.Bool().Draw(rt, "lifo")
	d := admit.DisciplineFIFO
	if lifo {
		d = admit.DisciplineLIFO
	}
	maxWaiters := rapid.IntRange(1, 6).Draw(rt, "maxWaiters")
	g, err := admit.New(admit.Config{Capacity: capacity, MaxWaiters: maxWaiters, MaxWait: -1,
		NoTiming: true, Queueing: admit.Queueing{Discipline: d, ClassShares: shares, ClassAging: -1}})
	if err != nil {
		rt.Fatal(err)
	}
	m := &classModel{g: g, capacity: capacity, maxWaiters: maxWaiters, lifo: lifo, shares: shares}
	defer func() {
		for _, w := range append(m.queue, m.pending...) {
			w.cancel()
		}
		g.Close()
		synctest.Wait()
	}()
	classGen := rapid.SampledFrom([]admit.Class{admit.ClassCriticalPlus, admit.ClassCritical, admit.ClassSheddablePlus, admit.ClassSheddable})
	rt.Repeat(map[string]func(*rapid.T){
		"acquire": func(rt *rapid.T) {
			cl := classGen.Draw(rt, "class")
			n := rapid.Int64Range(1, min(2, capacity)).Draw(rt, "n")
			ctx, cancel := context.WithCancel(context.Background())
			m.seq++
			w := &classWaiter{id: m.seq, class: cl, n: n, seq: m.seq, cancel: cancel, res: make(chan result, 1)}
			go func() {
				p, err := g.AcquireFor(ctx, admit.Request{Class: cl, Weight: n})
				if err != nil {
					w.res <- result{err: err}
					return
				}
				w.res <- result{p: &p}
			}()
			_, total := m.used()
			switch {
			case len(m.queue) == 0 && total+n <= capacity:
				w.granted = true
				m.pending = append(m.pending, w)
				return
			case len(m.queue) >= maxWaiters:
				used, _ := m.used()
				var victim *classWaiter
				for _, q := range m.queue {
					if !cl.Above(q.class) || used[q.class] < m.minSlots(q.class) {
						continue
					}
					if victim == nil || victim.class.Above(q.class) || (victim.class == q.class && q.seq > victim.seq) {
						victim = q
					}
				}
				if victim == nil {
					r := admit.ReasonQueueFull
					for _, q := range m.queue {
						if q.class.Above(cl) {
							r = admit.ReasonShed
						}
					}
					w.reason = r
					m.pending = append(m.pending, w)
					return
				}
				m.refuse(victim, admit.ReasonShed)
			}
			m.queue = append(m.queue, w)
			m.grant()
		},
		"done": func(rt *rapid.T) {
			if len(m.held) == 0 {
				rt.Skip("nothing held")
			}
			i := rapid.IntRange(0, len(m.held)-1).Draw(rt, "permit")
			m.held[i].p.Done(admit.OutcomeOK)
			m.held = append(m.held[:i:i], m.held[i+1:]...)
			m.grant()
		},
		"cancel": func(rt *rapid.T) {
			if len(m.queue) == 0 {
				rt.Skip("nobody waiting")
			}
			w := rapid.SampledFrom(m.queue).Draw(rt, "waiter")
			w.cancel()
			m.refuse(w, admit.ReasonCanceled)
			m.grant()
		},
		"": func(rt *rapid.T) {
			if err := m.settle(); err != nil {
				rt.Fatal(err)
			}
		},
	})
	// Drain: end everything, then every class that waited got through.
	for len(m.queue) > 0 || len(m.held) > 0 || len(m.pending) > 0 {
		if len(m.held) == 0 {
			rt.Fatalf("nothing held, yet %s", m.describe())
		}
		m.held[0].p.Done(admit.OutcomeOK) // one at a time: each release grants
		m.held = m.held[1:]
		m.grant()
		if err := m.settle(); err != nil {
			rt.Fatal(err)
		}
	}
	if s := g.Stats(); s.Offered != s.Admitted+s.Rejected.Total() || s.InUse != 0 || s.Waiting != 0 {
		rt.Fatalf("after the drain: %+v", s)
	}
}
