package admit

import (
	"context"
	"time"
)

// waiter states, guarded by Gate.mu.
const (
	waiterQueued = iota
	waiterGranted
	waiterClosed
)

// A waiter is one caller queued in Acquire. It sits in the gate's
// intrusive doubly linked list so that a caller who gives up leaves the
// queue in O(1).
type waiter struct {
	n          int64
	kind       Kind
	state      int           // guarded by Gate.mu
	overtaken  int           // times a later waiter went first; guarded by Gate.mu
	ready      chan struct{} // buffered(1): granted or closed
	prev, next *waiter
}

// wait queues the caller and blocks until it is granted, refused or gives
// up. The caller has already failed the fast path.
func (g *Gate) wait(ctx context.Context, k Kind, n int64) (Permit, error) {
	g.mu.Lock()
	// Announce ourselves before the last look at the slots: a release that
	// misses this announcement happened before it, so take sees its slot.
	g.nwait.Add(1)
	if g.closed {
		g.nwait.Add(-1)
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, ReasonClosed)
	}
	if g.head == nil {
		if used, ok := g.take(n); ok {
			g.nwait.Add(-1)
			g.mu.Unlock()
			return g.admit(k, n, used, 0, false), nil
		}
	}
	if n > g.capacity.Load() {
		// It could never fit: refuse now rather than block the queue.
		g.nwait.Add(-1)
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, ReasonFull)
	}
	if g.qlen >= g.maxWaiters {
		g.nwait.Add(-1)
		g.mu.Unlock()
		return Permit{}, g.refuse(k, n, ReasonQueueFull)
	}
	w := &waiter{n: n, kind: k, ready: make(chan struct{}, 1)}
	g.link(w)
	g.perKind[k].waiting.Add(1)
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
	g.waitNanos.Add(int64(waited))

	g.mu.Lock()
	state := w.state
	if state == waiterQueued {
		g.unlink(w)
		// Leaving may unblock smaller waiters stuck behind us.
		g.grantLocked()
	}
	g.mu.Unlock()
	g.perKind[k].waiting.Add(-1)

	switch {
	case state == waiterGranted && reason == ReasonNone:
		// Take the slot up: it stops being pending and becomes inflight.
		g.pending.Add(-1)
		g.nwait.Add(-1)
		return g.admit(k, n, g.InUse(), waited, true), nil
	case state == waiterGranted:
		// Granted at the moment we gave up: hand the slot back and on.
		g.pending.Add(-1)
		if n > 1 {
			g.extra.Add(-(n - 1))
		}
		g.state.Add(-uint64(n))
		g.nwait.Add(-1)
		g.grant()
	case state == waiterClosed:
		reason = ReasonClosed
		g.nwait.Add(-1)
	default:
		g.nwait.Add(-1)
	}
	return Permit{}, g.refuseAfter(k, n, reason, waited)
}

// grant hands free slots to queued callers.
func (g *Gate) grant() {
	g.mu.Lock()
	g.grantLocked()
	g.mu.Unlock()
}

// grantLocked walks the queue in FIFO order and grants every waiter that
// fits, letting later waiters overtake one that does not fit at most
// maxOvertakes times (bounded head-of-line blocking in both directions).
// Waiters that could never fit at the current capacity are skipped; their
// own timeout or context removes them.
func (g *Gate) grantLocked() {
	c := g.capacity.Load()
	var blocked *waiter
	for w := g.head; w != nil; {
		next := w.next
		if int64(g.state.Load()&usedMask) >= c {
			return // nothing left to give
		}
		if w.n > c {
			w = next
			continue
		}
		if blocked != nil && blocked.overtaken >= g.maxOvertakes {
			return
		}
		if used, ok := g.take(w.n); ok {
			g.unlink(w)
			w.state = waiterGranted
			g.pending.Add(1)
			if w.n > 1 {
				g.extra.Add(w.n - 1)
			}
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
}
