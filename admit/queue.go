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
)

// A waiter is one caller queued in Acquire. It sits in the gate's
// intrusive doubly linked list so that a caller who gives up leaves the
// queue in O(1).
type waiter struct {
	n          int64
	kind       Kind
	state      int           // guarded by Gate.mu
	overtaken  int           // times a later waiter went first; guarded by Gate.mu
	ready      chan struct{} // buffered(1): granted, closed or too big
	prev, next *waiter
}

// wait queues the caller and blocks until it is granted, refused or gives
// up. The caller has already failed the fast path.
func (g *Gate) wait(ctx context.Context, k Kind, n int64) (Permit, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, ReasonClosed)
	}
	if n > g.capacity.Load() {
		// It could never fit: refuse now rather than block the queue.
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, ReasonFull)
	}
	// Announce ourselves before the last look at the slots: a release
	// that misses this announcement happened before it, so take sees its
	// slot; one that sees it will grant from the queue after we link.
	g.announce()
	if g.head == nil {
		if flags, ok := g.tryTake(k, n, true); ok {
			g.unannounce()
			g.mu.Unlock()
			return g.admitted(k, n, flags, 0), nil
		}
	}
	if g.qlen >= g.maxWaiters {
		g.unannounce()
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, ReasonQueueFull)
	}
	w := &waiter{n: n, kind: k, ready: make(chan struct{}, 1)}
	g.link(w) // the announcement now counts this waiter
	g.acct.RLock()
	g.perKind[k].waiting.Add(1)
	g.acct.RUnlock()
	// Free slots held back from a big head waiter may go to us if the
	// overtaking rule allows it.
	g.grantLocked()
	g.mu.Unlock()

	start := time.Now()
	var timeout <-chan time.Time
	if g.maxWait > 0 {
		t := time.NewTimer(g.maxWait)
		defer t.Stop()
		timeout = t.C
	}
	reason := ReasonNone
	select {
	case <-w.ready:
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
	switch {
	case state == waiterGranted && reason == ReasonNone:
		// Take the slot up: the caller stops waiting and is admitted.
		g.acct.RLock()
		kc.waiting.Add(-1)
		kc.admitted.Add(1)
		g.acct.RUnlock()
		return g.admitted(k, n, 0, waited), nil
	case state == waiterGranted:
		// Granted at the moment we gave up: hand the slots back and on.
		g.acct.RLock()
		g.state.Add(^uint64(n - 1))
		g.slowUsed.Add(-n)
		kc.waiting.Add(-1)
		kc.rejected[reason].Add(1)
		g.acct.RUnlock()
		if g.queued.Load() > 0 {
			g.grant()
		}
	case state == waiterClosed:
		reason = ReasonClosed
		g.unwait(kc, reason)
	case state == waiterTooBig:
		reason = ReasonFull
		g.unwait(kc, reason)
	default:
		g.unwait(kc, reason)
	}
	return Permit{}, g.rejection(k, n, reason, waited)
}

// unwait counts a waiter's refusal: it stops waiting and is rejected, in
// one step as Stats sees it.
func (g *Gate) unwait(kc *kindCounters, r Reason) {
	g.acct.RLock()
	kc.waiting.Add(-1)
	kc.rejected[r].Add(1)
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
	c := g.capacity.Load()
	var blocked *waiter
	for w := g.head; w != nil; {
		next := w.next
		if int64(g.state.Load()&usedMask) >= c {
			return // nothing left to give
		}
		if blocked != nil && blocked.overtaken >= g.maxOvertakes {
			return
		}
		g.acct.RLock()
		used, ok := g.take(w.n, true)
		if ok {
			g.slowUsed.Add(w.n)
		}
		g.acct.RUnlock()
		if ok {
			g.unlink(w)
			w.state = waiterGranted
			if used > g.peak.Load() {
				g.raisePeak(used)
			}
			if blocked != nil {
				blocked.overtaken++
			}
			w.ready <- struct{}{}
		} else if blocked == nil {
			blocked = w
			if g.maxOvertakes < 0 {
				return
			}
		}
		w = next
	}
}

func (g *Gate) link(w *waiter) {
	w.prev = g.tail
	if g.tail != nil {
		g.tail.next = w
	} else {
		g.head = w
	}
	g.tail = w
	g.qlen++
}

// unlink removes w from the queue; the queued count drops with it.
func (g *Gate) unlink(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		g.head = w.next
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
