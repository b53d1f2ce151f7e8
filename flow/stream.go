package flow

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
)

// Unbounded is the demand that never runs out: Request(Unbounded) lets a
// source emit without limit, as does demand that adds up past it.
const Unbounded = math.MaxInt64

// ErrInvalidDemand is returned by Request for n <= 0.
var ErrInvalidDemand = errors.New("flow: demand must be positive")

// ErrCanceled is what Recv returns after Cancel, and the cause of the
// producer's context when the consumer canceled.
var ErrCanceled = errors.New("flow: stream canceled")

type state uint8

const (
	open state = iota
	completed
	failed
	canceled
)

// Stream is one subscription to a producer of T values: the consumer adds
// demand with Request, takes values with Recv, and ends it early with
// Cancel. The producer runs on its own goroutine and may emit only as many
// values as have been requested: demand flows up, data flows down.
//
// A stream ends exactly once: completed (Recv returns io.EOF once the
// emitted values are taken), failed (Recv returns the producer's error
// after the emitted values), or canceled (Recv returns ErrCanceled at
// once; values not yet taken are released). Nothing changes a stream once
// it has ended.
//
// Create streams with New, the sources (FromSeq, FromSlice) or the
// operators (Buffer, Overflow, Map). The zero value is not usable. All
// methods are safe for concurrent use.
type Stream[T any] struct {
	cancel context.CancelCauseFunc
	parent context.Context // the context New was given; operators downstream derive theirs from it
	ctx    context.Context // the producer's context
	done   chan struct{}   // closed when the producer has returned

	mu        sync.Mutex
	demand    int64 // requested and not yet emitted; Unbounded means no limit
	reserved  int64 // demand promised to emitters still computing their value
	requested int64 // total requested, saturating at Unbounded
	emitted   int64 // total emitted
	outbox    queue[T]
	// limit bounds outbox when Overflow has taken the stream over (0: no
	// bound); whenFull says what a push into a full outbox does, and dropped
	// counts what it threw away (shared with Overflow's stream).
	limit    int
	whenFull WhenFull
	dropped  *atomic.Int64
	state    state
	err      error
	changed  chan struct{} // closed and replaced on every change waiters care about
}

// New starts produce on its own goroutine and returns the stream it feeds.
// produce emits through e, which blocks until there is demand; it should
// return when Emit fails (the stream was canceled or ctx ended). Its
// return value ends the stream: nil completes it, anything else fails it.
// The context produce receives ends when the stream is canceled (cause
// ErrCanceled), when ctx ends, or when produce returns; release the
// source's resources when it ends.
func New[T any](ctx context.Context, produce func(ctx context.Context, e *Emitter[T]) error) *Stream[T] {
	return newStream(ctx, new(atomic.Int64), produce)
}

func newStream[T any](ctx context.Context, dropped *atomic.Int64, produce func(ctx context.Context, e *Emitter[T]) error) *Stream[T] {
	pctx, cancel := context.WithCancelCause(ctx)
	s := &Stream[T]{
		dropped: dropped,
		cancel:  cancel,
		parent:  ctx,
		ctx:     pctx,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		err := produce(pctx, &Emitter[T]{s: s})
		s.end(err)
		cancel(ErrCanceled)
	}()
	return s
}

// end records how the producer ended, unless the stream already ended.
func (s *Stream[T]) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != open {
		return
	}
	if err == nil {
		s.state = completed
	} else {
		s.state, s.err = failed, err
	}
	s.notify()
}

// notify wakes every waiter. Called with s.mu held.
func (s *Stream[T]) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Request adds n to the demand: the producer may emit n more values. It
// returns ErrInvalidDemand for n <= 0 and changes nothing then. Demand
// that adds up past Unbounded becomes Unbounded. Requests after the
// stream ended do nothing.
func (s *Stream[T]) Request(n int64) error {
	if n <= 0 {
		return ErrInvalidDemand
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != open {
		return nil
	}
	s.requested = addSat(s.requested, n)
	s.demand = addSat(s.demand, n)
	s.notify()
	return nil
}

func addSat(a, b int64) int64 {
	if a > Unbounded-b {
		return Unbounded
	}
	return a + b
}

// Cancel ends the stream: the producer's context is canceled with cause
// ErrCanceled, values emitted but not yet taken are released, and Recv
// returns ErrCanceled. Operators cancel their upstream in turn. Cancel
// does not wait for the producer to return; Done says when it has.
// Canceling a stream that already ended only makes sure its producer
// stops.
func (s *Stream[T]) Cancel() {
	s.mu.Lock()
	if s.state == open {
		s.state = canceled
		s.outbox.clear()
		s.notify()
	}
	s.mu.Unlock()
	s.cancel(ErrCanceled)
}

// Done is closed once the producer has returned, so the source's
// resources are released.
func (s *Stream[T]) Done() <-chan struct{} { return s.done }

// Recv returns the next emitted value. It waits for one, or for the end
// of the stream, or for ctx. It returns io.EOF once a completed stream's
// values are all taken, the producer's error once a failed stream's
// values are all taken, ErrCanceled after Cancel, or ctx's error. A value
// already emitted is returned even when ctx has ended, so Recv with an
// ended context is a non-blocking receive. Recv never adds demand.
func (s *Stream[T]) Recv(ctx context.Context) (T, error) {
	var zero T
	s.mu.Lock()
	for {
		if s.outbox.n > 0 {
			v := s.outbox.pop()
			s.mu.Unlock()
			return v, nil
		}
		if err := s.endErr(); err != nil {
			s.mu.Unlock()
			return zero, err
		}
		if err := ctx.Err(); err != nil {
			s.mu.Unlock()
			return zero, err
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		s.mu.Lock()
	}
}

// Stats is a snapshot of a stream's counters, taken under the stream's
// lock, so Emitted never exceeds Requested in any snapshot. Counts are
// values, not bytes.
type Stats struct {
	Requested int64 // total demand added (Unbounded once unbounded)
	Emitted   int64 // values the producer emitted
	Buffered  int   // emitted and not yet taken by Recv
	Dropped   int64 // values an Overflow at or below this stream threw away
	// Ended is true once the stream completed, failed or was canceled;
	// exactly one of Completed, Canceled and Err != nil holds then.
	Ended     bool
	Completed bool
	Canceled  bool
	Err       error
}

// Stats returns a snapshot of the stream's counters.
func (s *Stream[T]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Requested: s.requested,
		Emitted:   s.emitted,
		Buffered:  s.outbox.n,
		Dropped:   s.dropped.Load(),
		Ended:     s.state != open,
		Completed: s.state == completed,
		Canceled:  s.state == canceled,
		Err:       s.err,
	}
}

// Emitter is the producer's side of a stream, handed to the function given
// to New; the zero value is not usable. Its methods are safe for
// concurrent use, so a producer may emit from several goroutines.
type Emitter[T any] struct {
	s *Stream[T]
}

// Emit delivers v once there is demand for it, using up one unit. It
// returns an error, and delivers nothing, when the stream was canceled
// (ErrCanceled) or the producer's context ended: the producer should then
// return.
func (e *Emitter[T]) Emit(v T) error {
	s := e.s
	s.mu.Lock()
	for {
		if s.state != open {
			s.mu.Unlock()
			return ErrCanceled
		}
		if err := context.Cause(s.ctx); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.demand-s.reserved > 0 {
			err := s.push(v)
			s.mu.Unlock()
			return err
		}
		if err := s.waitLocked(); err != nil {
			return err
		}
	}
}

// push emits v, using one unit of demand. Called with s.mu held. When
// Overflow bounds the outbox and it is full, whenFull decides: drop the
// oldest, drop v, or fail the stream (keeping what is buffered) and stop
// the producer.
func (s *Stream[T]) push(v T) error {
	if s.demand != Unbounded {
		s.demand--
	}
	s.emitted++
	if s.limit > 0 && s.outbox.n >= s.limit {
		switch s.whenFull {
		case DropOldest:
			s.outbox.pop()
			s.dropped.Add(1)
		case DropLatest:
			s.dropped.Add(1)
			return nil
		default:
			err := &OverflowError{Capacity: s.limit}
			s.state, s.err = failed, err
			s.notify()
			s.cancel(err)
			return err
		}
	}
	s.outbox.push(v)
	s.notify()
	return nil
}

// endErr is what a reader gets once nothing is left to take: io.EOF after
// completion, the failure, ErrCanceled, or nil while the stream is open.
// Called with s.mu held.
func (s *Stream[T]) endErr() error {
	switch s.state {
	case completed:
		return io.EOF
	case failed:
		return s.err
	case canceled:
		return ErrCanceled
	}
	return nil
}

// ready waits until a value can be taken (true) or the stream has ended
// with nothing left to take (false, and what Recv would return). It
// takes nothing.
func (s *Stream[T]) ready(ctx context.Context) (bool, error) {
	s.mu.Lock()
	for {
		if s.outbox.n > 0 {
			s.mu.Unlock()
			return true, nil
		}
		if err := s.endErr(); err != nil {
			s.mu.Unlock()
			return false, err
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
		s.mu.Lock()
	}
}

// waitLocked waits for a change, with s.mu held on entry and on a nil
// return; on an error return (the producer's context ended) it is
// unlocked.
func (s *Stream[T]) waitLocked() error {
	changed := s.changed
	s.mu.Unlock()
	select {
	case <-changed:
	case <-s.ctx.Done():
		return context.Cause(s.ctx)
	}
	s.mu.Lock()
	return nil
}

// Wait blocks until there is demand and returns it: the number of values
// the producer may emit now (Unbounded for no limit). Producers that must
// ask their own sources for data (an operator asking upstream, a consumer
// asking a broker) call it first, so they fetch only what is wanted.
func (e *Emitter[T]) Wait() (int64, error) {
	s := e.s
	s.mu.Lock()
	for {
		if s.state != open {
			s.mu.Unlock()
			return 0, ErrCanceled
		}
		if err := context.Cause(s.ctx); err != nil {
			s.mu.Unlock()
			return 0, err
		}
		if d := s.demand - s.reserved; d > 0 {
			s.mu.Unlock()
			return d, nil
		}
		if err := s.waitLocked(); err != nil {
			return 0, err
		}
	}
}

// reserve waits for demand not yet promised to another emitter and
// promises one unit of it to the caller, who must then emitReserved or
// unreserve.
func (e *Emitter[T]) reserve() error {
	s := e.s
	s.mu.Lock()
	for {
		if s.state != open {
			s.mu.Unlock()
			return ErrCanceled
		}
		if err := context.Cause(s.ctx); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.demand-s.reserved > 0 {
			s.reserved++
			s.mu.Unlock()
			return nil
		}
		if err := s.waitLocked(); err != nil {
			return err
		}
	}
}

// emitReserved emits v with demand reserved earlier; it never waits.
func (e *Emitter[T]) emitReserved(v T) error {
	s := e.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved--
	if s.state != open {
		return ErrCanceled
	}
	return s.push(v)
}

// unreserve gives back a reservation that will not be used.
func (e *Emitter[T]) unreserve() {
	s := e.s
	s.mu.Lock()
	s.reserved--
	s.notify()
	s.mu.Unlock()
}

// queue is a FIFO that grows by doubling.
type queue[T any] struct {
	buf  []T
	head int
	n    int
}

func (q *queue[T]) push(v T) {
	if q.n == len(q.buf) {
		buf := make([]T, max(2*len(q.buf), 4))
		for i := range q.n {
			buf[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

func (q *queue[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return v
}

func (q *queue[T]) clear() {
	q.buf, q.head, q.n = nil, 0, 0
}
