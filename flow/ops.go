package flow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Buffer groups up's values into slices of n (at least 1). Demand is
// translated, not hidden: a request for k groups becomes a request for
// k*n values upstream, so memory is budgeted in upstream values, not in
// groups. The last group may be shorter when up completes. Canceling the
// returned stream cancels up; up's error fails it.
func Buffer[T any](up *Stream[T], n int) *Stream[[]T] {
	n = max(n, 1)
	return New(up.parent, func(ctx context.Context, e *Emitter[[]T]) error {
		defer up.Cancel()
		var asked int64 // requested upstream and not yet received
		for {
			groups, err := e.Wait()
			if err != nil {
				return err
			}
			if asked != Unbounded {
				want := int64(Unbounded)
				if groups <= Unbounded/int64(n) {
					want = groups * int64(n)
				}
				if need := want - asked; need > 0 {
					_ = up.Request(need) // need > 0
					asked = addSat(asked, need)
				}
			}
			group := make([]T, 0, n)
			for len(group) < n {
				v, err := up.Recv(ctx)
				if err == io.EOF {
					if len(group) > 0 {
						return e.Emit(group)
					}
					return nil
				}
				if err != nil {
					return err
				}
				if asked != Unbounded {
					asked--
				}
				group = append(group, v)
			}
			if err := e.Emit(group); err != nil {
				return err
			}
		}
	})
}

// WhenFull says what Overflow does with a value that arrives when
// its buffer is full. The zero value is OverflowFail.
type WhenFull uint8

// What Overflow does with a value that finds its buffer full.
const (
	// OverflowFail fails the stream: upstream is canceled at once, and the
	// values already buffered are delivered before the *OverflowError.
	OverflowFail WhenFull = iota
	// DropOldest throws away the oldest buffered value to make room (the
	// newest data wins: a latest reading, a UI refresh).
	DropOldest
	// DropLatest throws away the value that arrived (the buffered data
	// wins).
	DropLatest
	numWhenFull
)

var overflowNames = [numWhenFull]string{"fail", "drop_oldest", "drop_latest"}

// String returns the name, e.g. "drop_oldest".
func (p WhenFull) String() string {
	if p < numWhenFull {
		return overflowNames[p]
	}
	return "overflow(" + strconv.Itoa(int(p)) + ")"
}

// ErrOverflow is matched by every *OverflowError.
var ErrOverflow = errors.New("flow: overflow")

// OverflowError fails a stream whose Overflow buffer was full under
// OverflowFail; errors.Is(err, ErrOverflow) holds for it. Capacity is the
// buffer's size in values.
type OverflowError struct {
	Capacity int
}

func (e *OverflowError) Error() string {
	return fmt.Sprintf("flow: overflow: buffer of %d full", e.Capacity)
}

// Is makes errors.Is(err, ErrOverflow) true.
func (e *OverflowError) Is(target error) bool { return target == ErrOverflow }

// Overflow is for sources that should not be slowed down (telemetry, a
// socket that must be drained): it requests Unbounded from up at once and
// holds what downstream has not asked for yet in a buffer of capacity
// values (at least 1): up's own outbox, which Overflow bounds. When a
// value arrives with the buffer full, whenFull decides what is lost; under
// OverflowFail, up stops and the buffered values are delivered before
// the *OverflowError. Values thrown away are counted in Stats.Dropped of
// both streams. Overflow takes up over: nobody else may receive from it.
// Canceling the returned stream cancels up.
func Overflow[T any](up *Stream[T], capacity int, whenFull WhenFull) *Stream[T] {
	up.mu.Lock()
	up.limit, up.whenFull = max(capacity, 1), whenFull
	dropped := up.dropped
	up.mu.Unlock()
	_ = up.Request(Unbounded)
	return newStream(up.parent, dropped, func(ctx context.Context, e *Emitter[T]) error {
		defer up.Cancel()
		for {
			// Values wait for demand; the end of up never does.
			ok, err := up.ready(ctx)
			if !ok {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if _, err := e.Wait(); err != nil {
				return err
			}
			v, err := up.Recv(ctx)
			if err != nil {
				continue // up ended meanwhile; ready reports how
			}
			if err := e.Emit(v); err != nil {
				return err
			}
		}
	})
}

// Map applies f to up's values on at most concurrency goroutines (at
// least 1) and emits the results in the order they finish. prefetch (at
// least 1) is how many values are kept requested from up ahead of the
// workers, so they do not wait for upstream latency; each value a worker
// takes is replaced by a request for one more. A worker takes a value
// only when downstream demand is not already promised to another worker,
// so Map never computes a result nobody asked for, and holds at most
// prefetch values plus concurrency results. The first error from f or up
// fails the stream and cancels the other calls' context and up.
func Map[T, R any](up *Stream[T], concurrency, prefetch int, f func(context.Context, T) (R, error)) *Stream[R] {
	concurrency, prefetch = max(concurrency, 1), max(prefetch, 1)
	return New(up.parent, func(ctx context.Context, e *Emitter[R]) error {
		defer up.Cancel()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		_ = up.Request(int64(prefetch))
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				if err := mapWorker(ctx, up, e, f); err != nil {
					cancel(err)
				}
			})
		}
		wg.Wait()
		if err := context.Cause(ctx); err != nil {
			return err
		}
		return nil
	})
}

func mapWorker[T, R any](ctx context.Context, up *Stream[T], e *Emitter[R], f func(context.Context, T) (R, error)) error {
	for {
		if err := e.reserve(); err != nil {
			return err
		}
		v, err := up.Recv(ctx)
		if err != nil {
			e.unreserve()
			if err == io.EOF {
				return nil
			}
			return err
		}
		_ = up.Request(1)
		r, err := f(ctx, v)
		if err != nil {
			e.unreserve()
			return err
		}
		if err := e.emitReserved(r); err != nil {
			return err
		}
	}
}
