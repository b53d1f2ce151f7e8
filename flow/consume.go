package flow

import (
	"context"
	"errors"
	"io"
	"sync"
)

// ConsumeConfig configures Consume. The zero value acknowledges one value
// at a time.
type ConsumeConfig struct {
	// MaxUnacked is the most values delivered and not yet acknowledged,
	// the consumer's prefetch. 0 or negative means 1.
	MaxUnacked int
	// Workers is how many values are worked on at once. 0, negative or
	// more than MaxUnacked means MaxUnacked. With fewer workers than
	// MaxUnacked, the rest wait, already delivered, in the stream.
	Workers int
}

// Consume works through s the way a consumer of a broker (a queue with
// acknowledgements and a prefetch limit) should: it requests MaxUnacked
// values, runs work on each, and calls ack with work's result only after
// work returned (ack with a nil error is an ACK, with an error a NACK),
// then requests one more value. So at most MaxUnacked values are ever
// delivered and not acknowledged, the broker sees exactly the work that is
// not finished, and there is no local queue behind an early ACK that a
// crash would lose.
//
// Consume returns nil when s completes, s's error when it fails, and
// ctx's error (after canceling s) when ctx ends first; work's errors go to
// ack, not to the caller. Every value delivered gets exactly one ack call:
// one delivered after ctx ended is not worked on and is acked with ctx's
// error. Consume returns after every work and ack call has returned.
func Consume[T any](ctx context.Context, s *Stream[T], cfg ConsumeConfig, work func(context.Context, T) error, ack func(v T, err error)) error {
	limit := max(cfg.MaxUnacked, 1)
	workers := cfg.Workers
	if workers <= 0 || workers > limit {
		workers = limit
	}
	stop := context.AfterFunc(ctx, s.Cancel)
	defer stop()
	_ = s.Request(int64(limit))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for {
				v, err := s.Recv(context.Background()) // s ends when ctx does
				if err != nil {
					if err != io.EOF {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
					return
				}
				if err := ctx.Err(); err != nil {
					ack(v, err) // delivered but not worked on: a NACK, never an ACK
					continue
				}
				ack(v, work(ctx, v))
				_ = s.Request(1)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil && errors.Is(firstErr, ErrCanceled) {
		return ctx.Err()
	}
	return firstErr
}
