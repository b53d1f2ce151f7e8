package admit

import (
	"context"
	"time"
)

// waiter states, guarded by Gate.mu.
const (
	waiterQueued  = iota
	waiterGranted // its slots are taken and counted in slowUsed; it still counts as waiting
	waiterClosed  // the gate closed
	waiterTooBig  // the capacity shrank below its weight
	waiterShed    // pushed out of a full queue by a higher class
	waiterExpired // its deadline passed before a slot was free
)

// A waiter is one caller queued in Acquire. It sits in the gate's
// intrusive doubly linked list so that a caller who gives up leaves the
// queue in O(1).
type waiter struct {
	n          int64
	kind       Kind
	class      Class
	seq        uint64        // arrival order
	enq        int64         // when it queued, ns since the gate's epoch
	deadline   int64         // its context's deadline, ns since the gate's epoch; 0 for none
	visit      uint64        // the last grant pass that looked at it
	state      int           // guarded by Gate.mu
	overtaken  int           // times a later waiter went first; guarded by Gate.mu
	ready      chan struct{} // buffered(1): granted, closed or too big
	prev, next *waiter
}

// wait queues the caller and blocks until it is granted, refused or gives
// up. The caller has already failed the fast path.
func (g *Gate) wait(ctx context.Context, k Kind, n int64, cl Class) (Permit, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, cl, ReasonClosed)
	}
	if n > g.capacity.Load() {
		// It could never fit: refuse now rather than block the queue.
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, cl, ReasonFull)
	}
	// Announce ourselves before the last look at the slots: a release
	// that misses this announcement happened before it, so take sees its
	// slot; one that sees it will grant from the queue after we link.
	g.announce()
	if g.head == nil {
		if flags, ok := g.tryTake(k, n, cl, true); ok {
			g.unannounce()
			g.mu.Unlock()
			return g.admitted(k, n, cl, flags, 0, 0), nil
		}
	}
	if g.qlen >= g.maxWaiters && !g.shedFor(cl) {
		r := ReasonQueueFull
		if g.queueHasAbove(cl) {
			r = ReasonShed // the queue is full of more important work
		}
		g.unannounce()
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, cl, r)
	}
	now := g.now()
	maxWait := g.maxWait
	if g.discipline == DisciplineCoDel {
		// Controlled delay: a newcomer to a queue that has stood for an
		// interval may wait only the target.
		limit := g.codelInterval
		if g.qlen > 0 && time.Duration(now-g.queueSince) > g.codelInterval {
			limit = g.codelTarget
		}
		if maxWait <= 0 || limit < maxWait {
			maxWait = limit
		}
	}
	g.seq++
	w := &waiter{n: n, kind: k, class: cl, seq: g.seq, enq: now, ready: make(chan struct{}, 1)}
	if dl, ok := ctx.Deadline(); ok {
		w.deadline = max(int64(dl.Sub(g.epoch)), 1)
	}
	g.link(w) // the announcement now counts this waiter
	g.acct.RLock()
	g.perKind[k].waiting.Add(1)
	if cl != 0 {
		g.perClass[cl].waiting.Add(1)
	}
	g.acct.RUnlock()
	// Free slots held back from a big head waiter may go to us if the
	// overtaking rule allows it.
	g.grantLocked()
	g.mu.Unlock()

	start := time.Now()
	var timeout <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timeout = t.C
	}
	reason := ReasonNone
	select {
	case <-w.ready:
		if err := ctx.Err(); err != nil {
			// Granted, but the caller's context ended too: work whose
			// caller is gone never starts.
			reason = ctxReason(err)
		}
	case <-ctx.Done():
		reason = ctxReason(ctx.Err())
	case <-timeout:
		reason = ReasonWaitTimeout
	}
	waited := time.Since(start)
	g.waitSeconds.Add(waited.Seconds())

	g.mu.Lock()
	state := w.state
	if state == waiterQueued {
		g.unlink(w)
		// Leaving may unblock smaller waiters stuck behind us.
		g.grantLocked()
	}
	g.mu.Unlock()

	kc := &g.perKind[k]
	var cc *classCounters
	if cl != 0 {
		cc = &g.perClass[cl]
	}
	switch {
	case state == waiterGranted && reason == ReasonNone:
		// Take the slot up: the caller stops waiting and is admitted.
		g.acct.RLock()
		kc.waiting.Add(-1)
		kc.admitted.Add(1)
		if cc != nil {
			cc.waiting.Add(-1)
			cc.admitted.Add(1)
		}
		g.acct.RUnlock()
		return g.admitted(k, n, cl, 0, waited, 0), nil
	case state == waiterGranted:
		// Granted at the moment we gave up: hand the slots back and on.
		g.acct.RLock()
		g.state.Add(^uint64(n - 1))
		g.slowUsed.Add(-n)
		kc.waiting.Add(-1)
		kc.rejected[reason].Add(1)
		if cc != nil {
			cc.used.Add(-n)
			cc.waiting.Add(-1)
			cc.rejected[reason].Add(1)
		}
		g.acct.RUnlock()
		if g.queued.Load() > 0 {
			g.grant()
		}
	case state == waiterClosed:
		reason = ReasonClosed
		g.unwait(kc, cc, reason)
	case state == waiterTooBig:
		reason = ReasonFull
		g.unwait(kc, cc, reason)
	case state == waiterShed:
		reason = ReasonShed
		g.unwait(kc, cc, reason)
	case state == waiterExpired:
		reason = ReasonDeadline
		g.unwait(kc, cc, reason)
	default:
		g.unwait(kc, cc, reason)
	}
	return Permit{}, g.rejection(k, n, reason, waited)
}

// unwait counts a waiter's rejection: it stops waiting and is rejected, in
// one step as Stats sees it.
func (g *Gate) unwait(kc *kindCounters, cc *classCounters, r Reason) {
	g.acct.RLock()
	kc.waiting.Add(-1)
	kc.rejected[r].Add(1)
	if cc != nil {
		cc.waiting.Add(-1)
		cc.rejected[r].Add(1)
	}
	g.acct.RUnlock()
}

// grant hands free slots to queued callers.
func (g *Gate) grant() {
	g.mu.Lock()
	g.grantLocked()
	g.mu.Unlock()
}

// grantLocked walks the queue in arrival order and grants every waiter
// that fits. When the oldest waiter that does not fit (the blocked one) has
// been overtaken maxOvertakes times, nobody behind it is granted until it
// fits: bounded head-of-line blocking in both directions. Every queued
// waiter fits the capacity (SetCapacity refuses those that no longer do).
func (g *Gate) grantLocked() {
	if g.discipline != DisciplineFIFO || g.classQueued > 0 {
		g.grantOrdered()
		return
	}
	c := g.capacity.Load()
	var blocked *waiter
	var now int64
	for w := g.head; w != nil; {
		next := w.next
		if !g.mayGrant(c, blocked) {
			return
		}
		if w.deadline != 0 {
			if now == 0 {
				now = g.now()
			}
			if g.expire(w, now) {
				w = next
				continue
			}
		}
		var stop bool
		if blocked, stop = g.handOver(w, blocked); stop {
			return
		}
		w = next
	}
}

// mayGrant reports whether a grant pass may go on: a slot is free under
// capacity c, and the blocked waiter (the first in service order that did
// not fit, if any) has not been overtaken its MaxOvertakes times yet.
// Called with mu held.
func (g *Gate) mayGrant(c int64, blocked *waiter) bool {
	if int64(g.state.Load()&usedMask) >= c {
		return false // nothing left to give
	}
	return blocked == nil || blocked.overtaken < g.maxOvertakes
}

// handOver grants w its slots if they are free: w leaves the queue, is
// woken, and the blocked waiter (if any) counts one more overtaking. If
// they are not, w becomes the blocked waiter unless there is one already.
// It returns the blocked waiter, and whether the pass must stop there
// (strict order, MaxOvertakes negative, stops at the first waiter that
// does not fit). Both grant passes, arrival order and service order, hand
// slots over here. Called with mu held.
func (g *Gate) handOver(w, blocked *waiter) (*waiter, bool) {
	g.acct.RLock()
	used, ok := g.take(w.n, true)
	if ok {
		g.slowUsed.Add(w.n)
		if w.class != 0 {
			g.perClass[w.class].used.Add(w.n)
		}
	}
	g.acct.RUnlock()
	if !ok {
		if blocked == nil {
			return w, g.maxOvertakes < 0
		}
		return blocked, false
	}
	g.unlink(w)
	w.state = waiterGranted
	if used > g.peak.Load() {
		g.raisePeak(used)
	}
	if blocked != nil {
		blocked.overtaken++
	}
	w.ready <- struct{}{}
	return blocked, false
}

func (g *Gate) link(w *waiter) {
	w.prev = g.tail
	if g.tail != nil {
		g.tail.next = w
	} else {
		g.head = w
		g.oldest.Store(w.enq + 1)
	}
	if g.qlen == 0 {
		g.queueSince = w.enq
	}
	g.tail = w
	g.qlen++
	if w.class != 0 {
		g.classQueued++
		g.classQ[w.class]++
	}
}

// unlink removes w from the queue; the queued count drops with it.
func (g *Gate) unlink(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		g.head = w.next
		if g.head != nil {
			g.oldest.Store(g.head.enq + 1)
		} else {
			g.oldest.Store(0)
		}
	}
	if w.class != 0 {
		g.classQueued--
		g.classQ[w.class]--
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		g.tail = w.prev
	}
	w.prev, w.next = nil, nil
	g.qlen--
	g.unannounce()
}

// announce counts a caller as queued (it is about to link, or to make its
// last attempt at the slots first): from now on, admissions that do not
// come from the queue go behind it. Called with mu held.
func (g *Gate) announce() {
	if g.queued.Add(1) == 1 {
		g.state.Add(queuedBit)
	}
}

// unannounce undoes announce. Called with mu held.
func (g *Gate) unannounce() {
	if g.queued.Add(-1) == 0 {
		g.state.Add(^uint64(queuedBit - 1))
	}
}
