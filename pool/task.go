package pool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
)

// Task is work the pool runs. Run receives the context the task was
// submitted with, so work that outlives its caller can notice.
//
// A Task value that is already on the heap (a pointer to a struct, a
// method value stored once, a Func) is passed to the pool without
// allocating; that is what keeps Go's steady path at zero allocations.
type Task interface {
	Run(ctx context.Context) error
}

// Func adapts a function to Task. Converting a Func to a Task does not
// allocate.
type Func func(ctx context.Context) error

// Run calls f(ctx).
func (f Func) Run(ctx context.Context) error { return f(ctx) }

// Dropper is implemented by tasks that want to hear that they will never
// run: discarded because the pool was full (WhenFull), evicted from the
// queue by a newer task, expired in the queue, or left in the queue when
// Shutdown gave up.
// Drop is called exactly once, instead of Run, on the goroutine that
// dropped the task; err is a *DroppedError. Fire-and-forget tasks submitted
// with Pool.Go use it to release what they hold; Future uses it so nobody
// waits for ever.
type Dropper interface {
	Drop(err error)
}

// ErrDropped is matched by every *DroppedError.
var ErrDropped = errors.New("pool: task dropped")

// DropReason says why an accepted or submitted task never ran. It is a
// closed set, usable as a metric label; the zero value means not dropped.
type DropReason uint8

// The reasons a task is dropped.
const (
	DropNone      DropReason = iota // not dropped
	DropDiscarded                   // dropped by Discard (or DiscardOldest with nothing queued)
	DropEvicted                     // removed from the queue by DiscardOldest to make room
	DropExpired                     // its context ended while it was queued
	DropClosed                      // still queued when Shutdown's context ended
	numDropReasons
)

// NumDropReasons is the size of arrays indexed by DropReason.
const NumDropReasons = int(numDropReasons)

var dropNames = [numDropReasons]string{"", "discarded", "evicted", "expired", "closed"}

// String returns the reason's label, e.g. "evicted".
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "drop(" + strconv.Itoa(int(r)) + ")"
}

// DroppedError is what a dropped task's Future returns and what Dropper.Drop
// receives. errors.Is(err, ErrDropped) holds for every DroppedError; for
// DropExpired, errors.Is also matches the context's error
// (context.Canceled or context.DeadlineExceeded).
type DroppedError struct {
	Pool   string
	Reason DropReason
	Cause  error // the context's error for DropExpired, else nil
}

func (e *DroppedError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("pool %q: task dropped: %s: %v", e.Pool, e.Reason, e.Cause)
	}
	return fmt.Sprintf("pool %q: task dropped: %s", e.Pool, e.Reason)
}

// Is makes errors.Is(err, ErrDropped) true.
func (e *DroppedError) Is(target error) bool { return target == ErrDropped }

// Unwrap returns the cause (the context's error for expired tasks).
func (e *DroppedError) Unwrap() error { return e.Cause }

// PanicError is what a Future returns when its task panicked: the value
// passed to panic and the stack of the panicking goroutine. The pool
// recovers the panic, counts it (Stats.Completed[admit.OutcomePanic]) and
// keeps the worker. A task that calls runtime.Goexit (t.FailNow in a test
// does) ends its worker; the pool counts it as a panic too, with Value
// reporting the Goexit, and starts another worker when one is needed.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("pool: task panicked: %v", e.Value) }

// Future is a handle on one submitted task. It completes exactly once:
// with the task's result, a *PanicError, or a *DroppedError. Futures
// come from Pool.Submit; the zero value is not usable. Safe for
// concurrent use.
type Future struct {
	task  Task
	ended atomic.Bool
	err   error // written once before done is closed
	done  chan struct{}
}

// Run runs the wrapped task; the pool calls it.
func (f *Future) Run(ctx context.Context) error { return f.task.Run(ctx) }

// Drop completes the future with err and passes err on to the wrapped
// task if it is a Dropper; the pool calls it.
func (f *Future) Drop(err error) {
	f.complete(err)
	if d, ok := f.task.(Dropper); ok {
		d.Drop(err)
	}
}

func (f *Future) complete(err error) {
	if !f.ended.CompareAndSwap(false, true) {
		panic("pool: a future completed twice")
	}
	f.err = err
	close(f.done)
}

// Done is closed when the task has ended or was dropped.
func (f *Future) Done() <-chan struct{} { return f.done }

// Err is the task's result once Done is closed, and ErrPending before.
func (f *Future) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return ErrPending
	}
}

// Wait blocks until the task ends or ctx ends. It returns the task's
// result, or ctx's error if ctx ended first (the task keeps its place).
func (f *Future) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrPending is what Future.Err returns before the task has ended.
var ErrPending = errors.New("pool: task not finished")
