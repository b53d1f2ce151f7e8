package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// callCtx behaves as context.WithCancel(context.Background()) does, and
// its one watch runs exactly once if the context ends while it is in
// place, never after StopWatch reported it stopped.
func TestCallCtx(t *testing.T) {
	var c callCtx
	if c.Err() != nil {
		t.Fatal("a new context has ended")
	}
	done := c.Done()
	var runs atomic.Int32
	if !c.WatchCancel(func() { runs.Add(1) }) {
		t.Fatal("the first watch was refused")
	}
	if c.WatchCancel(func() {}) {
		t.Fatal("a second watch was taken: the first would be lost")
	}
	if !c.StopWatch() || c.StopWatch() {
		t.Fatal("StopWatch: want true for the watch in place, then false")
	}
	if !c.WatchCancel(func() { runs.Add(1) }) {
		t.Fatal("a watch after StopWatch was refused")
	}
	c.cancel()
	c.cancel()
	if runs.Load() != 1 || c.StopWatch() {
		t.Fatalf("after cancel: the watch ran %d times, StopWatch true: want once, false", runs.Load())
	}
	select {
	case <-done:
	default:
		t.Fatal("Done not closed by cancel")
	}
	if c.Err() != context.Canceled {
		t.Fatalf("Err %v, want context.Canceled", c.Err())
	}
	if _, ok := c.Deadline(); ok {
		t.Fatal("a deadline out of nowhere")
	}
	ran := false
	if !c.WatchCancel(func() { ran = true }) || !ran {
		t.Fatal("a watch on an ended context did not run at once")
	}
	select {
	case <-c.Done(): // asked for after the end: made closed
	default:
		t.Fatal("Done asked for after cancel is open")
	}

	// A watched context propagates to its children as any does.
	var p callCtx
	child, stop := context.WithCancel(&p)
	defer stop()
	p.cancel()
	<-child.Done()
}

// Concurrently: watches started and stopped while the context ends.
// Each watch either was stopped (StopWatch true) and never runs, or was
// taken by the end (StopWatch false) and runs exactly once.
func TestCallCtxConcurrent(t *testing.T) {
	const watches = 10
	for range 300 {
		var c callCtx
		var ran [watches]atomic.Int32
		var stopped [watches]bool
		n := 0 // watches started
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range watches {
				n++
				if !c.WatchCancel(func() { ran[i].Add(1) }) {
					t.Error("a watch refused with none in place")
					return
				}
				if stopped[i] = c.StopWatch(); !stopped[i] {
					return // taken by the end
				}
			}
		}()
		go func() {
			defer wg.Done()
			c.cancel()
		}()
		wg.Wait()
		for i := range n {
			if r := ran[i].Load(); stopped[i] && r != 0 || !stopped[i] && r != 1 {
				t.Fatalf("watch %d: stopped %v, ran %d times", i, stopped[i], r)
			}
		}
		<-c.Done()
	}
}

// A call's first attempt lives in the call; every later one has storage
// of its own, so that nothing left of an earlier attempt (a timer, a
// body someone still holds) can touch a later one.
func TestAttemptStorage(t *testing.T) {
	c := &call{Context: context.Background()}
	first, second, third := c.attemptStorage(), c.attemptStorage(), c.attemptStorage()
	if first != &c.first {
		t.Fatal("the first attempt is not the call's own storage")
	}
	if second == first || third == first || third == second {
		t.Fatal("a later attempt shares an earlier one's storage")
	}
	var none *call
	if a, b := none.attemptStorage(), none.attemptStorage(); a == nil || a == b {
		t.Fatal("without a call, attempts must still be distinct")
	}
}
