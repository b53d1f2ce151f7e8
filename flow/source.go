package flow

import (
	"context"
	"io"
	"iter"
)

// FromSeq returns a stream of seq's values. seq is advanced only when
// there is demand, so a value nobody requested is never even computed;
// Cancel stops seq (its yield returns false), so deferred clean-up in seq
// runs. The stream completes when seq ends.
func FromSeq[T any](ctx context.Context, seq iter.Seq[T]) *Stream[T] {
	return New(ctx, func(ctx context.Context, e *Emitter[T]) error {
		next, stop := iter.Pull(seq)
		defer stop()
		for {
			if _, err := e.Wait(); err != nil {
				return err
			}
			v, ok := next()
			if !ok {
				return nil
			}
			if err := e.Emit(v); err != nil {
				return err
			}
		}
	})
}

// FromSlice returns a stream of the values in vs, in order.
func FromSlice[T any](ctx context.Context, vs []T) *Stream[T] {
	return New(ctx, func(ctx context.Context, e *Emitter[T]) error {
		for _, v := range vs {
			if err := e.Emit(v); err != nil {
				return err
			}
		}
		return nil
	})
}

// All returns an iterator over the stream's values that keeps window
// values requested ahead of the loop (at least 1): it requests window up
// front and one more for each value the loop takes. The stream's error,
// if it failed, is yielded last, with the zero value; completion ends the
// loop without one. Leaving the loop early cancels the stream. ctx bounds
// each wait for a value.
func (s *Stream[T]) All(ctx context.Context, window int64) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		defer s.Cancel() // stops the producer if the loop left early; a no-op on an ended stream
		if err := s.Request(max(window, 1)); err != nil {
			var zero T
			yield(zero, err)
			return
		}
		for {
			v, err := s.Recv(ctx)
			if err != nil {
				if err != io.EOF {
					var zero T
					yield(zero, err)
				}
				return
			}
			if !yield(v, nil) {
				return
			}
			_ = s.Request(1)
		}
	}
}
