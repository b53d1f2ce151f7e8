package proxy

import (
	"context"
	"sync"
	"time"
)

// callCtx is a natively forwarded call's context: no deadline, no
// values, canceled once (the client left, or the call ended). It does
// what context.WithCancel(context.Background()) would, in the call's own
// allocation, and it lets the upstream client watch it through one
// function in a field (upstream.CancelWatcher) instead of
// context.AfterFunc's child context, closure and registration: together
// about 5% of a proxied request's CPU. One watch at a time; a second
// watcher is told no and uses context.AfterFunc, which watches Done.
type callCtx struct {
	mu    sync.Mutex
	err   error
	done  chan struct{} // made when asked for
	watch func()        // the watch in place, nil when none
}

var _ context.Context = (*callCtx)(nil)

func (c *callCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *callCtx) Value(any) any               { return nil }

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// cancel ends the context (context.Canceled) and calls the watch in
// place, if any; later calls do nothing.
func (c *callCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	f := c.watch
	c.watch = nil
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// WatchCancel arranges for f to be called when the context ends, at once
// if it has; false when a watch is in place.
func (c *callCtx) WatchCancel(f func()) bool {
	c.mu.Lock()
	if c.watch != nil {
		c.mu.Unlock()
		return false
	}
	if c.err != nil {
		c.mu.Unlock()
		f()
		return true
	}
	c.watch = f
	c.mu.Unlock()
	return true
}

// StopWatch ends the watch in place; false when cancel has taken it
// (f has been called or is being called).
func (c *callCtx) StopWatch() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.watch != nil
	c.watch = nil
	return ok
}
