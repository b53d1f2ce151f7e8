package admit

import (
	"context"
	"fmt"
	"time"
)

// Queueing is how a gate orders and sheds its queue. It is part of
// Config, and Gate.SetQueueing changes it on a gate built elsewhere (a
// file server's disk gate, say). The zero Queueing is FIFO with no shares,
// the default aging, and classes taken only from the Request. Only a gate
// with a queue (Config.MaxWaiters) has anything to order.
type Queueing struct {
	// Discipline is the order the queue is served in (within a class; see
	// Class): FIFO (the zero value), LIFO or CoDel.
	Discipline Discipline

	// CoDelTarget and CoDelInterval tune DisciplineCoDel: once the queue
	// has not been empty for CoDelInterval, a newcomer waits at most
	// CoDelTarget (and MaxWait), else at most CoDelInterval (and MaxWait).
	// Zero means DefaultCoDelTarget and DefaultCoDelInterval; negative is
	// an error, and so is a target above the interval.
	CoDelTarget, CoDelInterval time.Duration

	// ClassShares guarantees classes a minimum share of the capacity (see
	// ClassShares). The zero value guarantees nothing.
	ClassShares ClassShares

	// ClassAging is how long a queued caller waits before its class stops
	// mattering: when the queue holds more than one class, a waiter queued
	// for ClassAging is served as if it were critical_plus, so a steady
	// stream of higher classes cannot overtake old work for ever. Zero
	// means MaxWait/2 (500ms when MaxWait is negative); negative means
	// queued age never counts.
	ClassAging time.Duration

	// ContextClass makes AcquireFor take the class from the caller's
	// context (see WithClass) when the Request leaves it zero: for gates
	// entered deep inside code that does not know about classes, such as
	// a file server's disk reads, while a middleware read the class from
	// the request. Off by default, as it costs a context lookup.
	ContextClass bool
}

// configureQueue checks and applies the queue's discipline, classes and
// deadline settings. It runs after MaxWait got its default.
func (g *Gate) configureQueue(cfg Config) error {
	g.deadlineCheck = !cfg.NoDeadlineCheck && g.timed
	return g.SetQueueing(cfg.Queueing)
}

// SetQueueing changes the queue's discipline, class shares, aging and
// class source (see Queueing). Waiters already queued are served by the
// new rules from the next grant on. It returns an error wrapping
// ErrInvalidConfig, and changes nothing, for invalid rules.
func (g *Gate) SetQueueing(q Queueing) error {
	if q.Discipline >= numDisciplines {
		return fmt.Errorf("%w: gate %q: unknown queue discipline %d", ErrInvalidConfig, g.name, q.Discipline)
	}
	target, interval := q.CoDelTarget, q.CoDelInterval
	if target == 0 {
		target = DefaultCoDelTarget
	}
	if interval == 0 {
		interval = DefaultCoDelInterval
	}
	switch {
	case target < 0 || interval < 0:
		return fmt.Errorf("%w: gate %q: negative CoDel target or interval", ErrInvalidConfig, g.name)
	case target > interval:
		return fmt.Errorf("%w: gate %q: CoDel target %v above its interval %v", ErrInvalidConfig, g.name, target, interval)
	}
	if err := q.ClassShares.validate(); err != nil {
		return fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, g.name, err)
	}
	aging := q.ClassAging
	switch {
	case aging < 0:
		aging = -1
	case aging == 0 && g.maxWait > 0:
		aging = g.maxWait / 2
	case aging == 0:
		aging = 500 * time.Millisecond
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.discipline = q.Discipline
	g.disciplineNow.Store(uint32(q.Discipline))
	g.codelTarget, g.codelInterval = target, interval
	g.shares = q.ClassShares
	g.hasShares = false
	for _, f := range g.shares {
		g.hasShares = g.hasShares || f > 0
	}
	g.aging = aging
	g.contextClass.Store(q.ContextClass)
	g.grantLocked()
	return nil
}

// now is the gate's monotonic clock: nanoseconds since its epoch.
func (g *Gate) now() int64 { return int64(time.Since(g.epoch)) }

// tooLate reports whether work of weight n whose caller's deadline is dl
// could not finish in time: the deadline is nearer than the expected wait
// (the queue ahead of it, or the slots it needs, worked off at the
// recent hold time across the capacity) plus the recent hold time
// itself. Without a hold-time sample it never refuses. When it reads the
// clock it returns the reading plus one (g.now()+1, a permit's start),
// else 0.
func (g *Gate) tooLate(dl time.Time, n int64) (bool, int64) {
	hold := g.holdEWMA.Load()
	c := g.capacity.Load()
	if hold <= 0 || c <= 0 {
		return false, 0
	}
	expected := float64(hold)
	if q := g.queued.Load(); q > 0 || g.InUse()+n > c {
		ahead := q
		if Discipline(g.disciplineNow.Load()) != DisciplineFIFO {
			ahead = 0 // newest first (or soon): a newcomer waits for the next release
		}
		expected += float64(hold) * float64(ahead+n) / float64(c)
	}
	// dl.Sub(g.epoch) needs no clock read (both carry a monotonic reading;
	// a deadline without one is compared on the wall clock, as time.Until
	// does), and the one read here is the permit's start as well.
	now := g.now()
	return float64(dl.Sub(g.epoch)-time.Duration(now)) < expected, now + 1
}

func (g *Gate) countClassAdmitted(cl Class, n int64) {
	if cl != 0 {
		g.perClass[cl].admitted.Add(1)
		g.perClass[cl].used.Add(n)
	}
}

func (g *Gate) countClassRejected(cl Class, r Reason) {
	if cl != 0 {
		g.perClass[cl].rejected[r].Add(1)
	}
}

// classUsed returns the slots held per class (granted waiters included).
// It reads them under acct, exclusively: a class other than the default
// changes its count together with the state word under acct, so the two
// are never read apart (a release in between made the default class look
// below a share it does not have). Called with mu held, only when the
// gate has shares.
func (g *Gate) classUsed() (u [numClasses]int64) {
	g.acct.Lock()
	u[0] = int64(g.state.Load() & usedMask)
	for c := Class(1); c < numClasses; c++ {
		u[c] = g.perClass[c].used.Load()
		u[0] -= u[c]
	}
	g.acct.Unlock()
	return u
}

// queueHasAbove reports whether a class above cl is queued. Called with
// mu held.
func (g *Gate) queueHasAbove(cl Class) bool {
	for c := range numClasses {
		if c.Above(cl) && g.queuedOf(c) > 0 {
			return true
		}
	}
	return false
}

// queuedOf is the number of queued waiters of class c. Called with mu held.
func (g *Gate) queuedOf(c Class) int {
	if c == 0 {
		return g.qlen - g.classQueued
	}
	return g.classQ[c]
}

// shedFor makes room in a full queue for a newcomer of class cl by
// refusing (ReasonShed) the newest waiter of the lowest class below cl,
// unless that class is below its guaranteed share. It reports whether it
// made room. Called with mu held.
func (g *Gate) shedFor(cl Class) bool {
	lower := false
	for c := range numClasses {
		lower = lower || (cl.Above(c) && g.queuedOf(c) > 0)
	}
	if !lower {
		return false // the common case, one class: no walk over the queue
	}
	var used [numClasses]int64
	if g.hasShares {
		used = g.classUsed()
	}
	c := g.capacity.Load()
	var victim *waiter
	for w := g.tail; w != nil; w = w.prev {
		if !cl.Above(w.class) || (victim != nil && !victim.class.Above(w.class)) {
			continue
		}
		if g.hasShares && used[w.class] < g.shares.minSlots(w.class, c) {
			continue // protected by its share
		}
		victim = w
	}
	if victim == nil {
		return false
	}
	g.unlink(victim)
	victim.state = waiterShed
	victim.ready <- struct{}{}
	return true
}

// expire refuses a queued waiter whose deadline has passed (ReasonDeadline)
// rather than granting it slots for work that can no longer matter, and
// reports whether it did. Called with mu held.
func (g *Gate) expire(w *waiter, now int64) bool {
	if w.deadline == 0 || now < w.deadline {
		return false
	}
	g.unlink(w)
	w.state = waiterExpired
	w.ready <- struct{}{}
	return true
}

// grantOrdered grants queued waiters in service order, for queues that
// are not plain FIFO (another discipline, or several classes):
//
//  1. waiters of a class below its guaranteed share first,
//  2. then by class, highest first, a waiter queued for ClassAging
//     counting as critical_plus when more than one class is queued,
//  3. then oldest first (FIFO, and CoDel while the queue has not stood for
//     an interval) or newest first (LIFO, and CoDel while it has).
//
// The weighted-work rule is the same as in arrival order: the first
// waiter in service order that does not fit may be overtaken by later
// ones MaxOvertakes times at most. Called with mu held.
func (g *Gate) grantOrdered() {
	c := g.capacity.Load()
	if g.head == nil || int64(g.state.Load()&usedMask) >= c {
		return
	}
	now := g.now()
	newestFirst := g.discipline == DisciplineLIFO ||
		g.discipline == DisciplineCoDel && time.Duration(now-g.queueSince) > g.codelInterval
	classes := 0
	for cl := range numClasses {
		if g.queuedOf(cl) > 0 {
			classes++
		}
	}
	aging := g.aging >= 0 && classes > 1
	g.round++
	var blocked *waiter
	for g.mayGrant(c, blocked) {
		var deficit [numClasses]bool
		if g.hasShares {
			used := g.classUsed()
			for cl := range numClasses {
				deficit[cl] = used[cl] < g.shares.minSlots(cl, c)
			}
		}
		var best *waiter
		var bestKey [3]int64
		for w := g.head; w != nil; w = w.next {
			if w.visit == g.round {
				continue
			}
			key := [3]int64{1, int64(classRank[w.class]), int64(w.seq)}
			if deficit[w.class] {
				key[0] = 0
			}
			if aging && time.Duration(now-w.enq) >= g.aging {
				key[1] = 0
			}
			if newestFirst {
				key[2] = -key[2]
			}
			if best == nil || keyLess(key, bestKey) {
				best, bestKey = w, key
			}
		}
		if best == nil {
			return
		}
		w := best
		w.visit = g.round
		if g.expire(w, now) {
			continue
		}
		var stop bool
		if blocked, stop = g.handOver(w, blocked); stop {
			return
		}
	}
}

func keyLess(a, b [3]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// OldestWait returns how long the oldest caller still in the queue has
// been waiting, or 0 when nobody is queued: a queue whose oldest entry
// keeps ageing is not moving.
func (g *Gate) OldestWait() time.Duration {
	o := g.oldest.Load()
	if o == 0 {
		return 0
	}
	return max(time.Duration(g.now()-(o-1)), 0)
}

// Discipline returns the gate's queue discipline.
func (g *Gate) Discipline() Discipline { return Discipline(g.disciplineNow.Load()) }

type classKey struct{}

// WithClass returns a context that carries class c, for gates configured
// with ContextClass (see Queueing.ContextClass).
func WithClass(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// ClassFrom returns the class ctx carries (WithClass), or the default
// class when it carries none or an invalid one.
func ClassFrom(ctx context.Context) Class {
	if c, ok := ctx.Value(classKey{}).(Class); ok && c < numClasses {
		return c
	}
	return ClassCritical
}
