package grpcsluice

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
)

// ClientConfig configures the client interceptors. Policy is required.
type ClientConfig struct {
	// Policy supplies attempts, backoff, budget, throttle, breaker and the
	// deadline margin; share it with an HTTP retry.Transport to the same
	// upstream if there is one.
	Policy *retry.Policy
	// Idempotent reports methods safe to run twice. Those are retried on
	// any UNAVAILABLE; other methods only on a refusal that carries a
	// pushback trailer (an admission refusal: the handler never ran). Nil
	// means no method is idempotent.
	Idempotent func(fullMethod string) bool
}

// Client holds the client interceptors built from a ClientConfig. Create
// it with NewClient; safe for concurrent use.
type Client struct {
	cfg ClientConfig
}

// ErrNoPolicy is returned by NewClient when ClientConfig.Policy is nil.
var ErrNoPolicy = errors.New("grpcsluice: ClientConfig.Policy is nil")

// NewClient returns the client interceptors for cfg, or ErrNoPolicy.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Policy == nil {
		return nil, ErrNoPolicy
	}
	return &Client{cfg: cfg}, nil
}

// GaveUpError is what a client interceptor returns when it stopped
// retrying an overload refusal (attempts, budget, pushback beyond the
// deadline, throttled, breaker open). It carries the gRPC status to
// return (status.FromError and status.Code see it), and a server
// interceptor that returns it marks its answer with NoRetryTrailer so the
// caller above does not retry it again.
type GaveUpError struct {
	Stop retry.Stop
	Err  error // the last attempt's status error or the local refusal
	st   *status.Status
}

func (e *GaveUpError) Error() string {
	return "grpcsluice: gave up (" + e.Stop.String() + "): " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *GaveUpError) Unwrap() error { return e.Err }

// GRPCStatus makes status.FromError and status.Code see the status.
func (e *GaveUpError) GRPCStatus() *status.Status { return e.st }

// IsGaveUp reports whether err is (or wraps) a *GaveUpError.
func IsGaveUp(err error) bool {
	var g *GaveUpError
	return errors.As(err, &g)
}

func gaveUp(stop retry.Stop, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(codes.Unavailable, err.Error())
	}
	return &GaveUpError{Stop: stop, Err: err, st: st}
}

// localError turns Do's refusal before any attempt into a status error.
func localError(err error) error {
	switch {
	case errors.Is(err, retry.ErrDeadline):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, retry.ErrThrottled):
		return gaveUp(retry.StopThrottled, status.Error(codes.Unavailable, err.Error()))
	case breaker.IsOpen(err):
		return gaveUp(retry.StopBreaker, status.Error(codes.Unavailable, err.Error()))
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.FromContextError(err).Err()
}

// classify turns one attempt's answer into a retry.Outcome.
func classify(ctx context.Context, err error, trailer metadata.MD) retry.Outcome {
	if err == nil {
		return retry.Outcome{Accepted: true, Breaker: breaker.Success}
	}
	if ctx.Err() != nil {
		return retry.Outcome{Done: true}
	}
	switch code := status.Code(err); code {
	case codes.Unavailable, codes.ResourceExhausted:
		o := retry.Outcome{Retryable: true, Breaker: breaker.Failure}
		if code == codes.ResourceExhausted {
			o.Breaker = breaker.Ignored // a quota on this caller, not a sick upstream
		}
		if len(trailer.Get(NoRetryTrailer)) > 0 {
			o.NoRetry = true
		}
		if v := trailer.Get(PushbackTrailer); len(v) > 0 {
			ms, perr := strconv.ParseInt(v[0], 10, 64)
			if perr != nil || ms < 0 {
				o.NoRetry = true // gRFC A6: a negative or bad pushback means do not retry
			} else {
				o.RetryAfter, o.HasRetryAfter = time.Duration(min(ms, 86_400_000))*time.Millisecond, true
				o.NotProcessed = true
			}
		}
		return o
	case codes.Internal, codes.Unknown, codes.DataLoss, codes.DeadlineExceeded:
		return retry.Outcome{Accepted: true, Breaker: breaker.Failure}
	}
	return retry.Outcome{Accepted: true, Breaker: breaker.Success}
}

// UnaryClientInterceptor returns the unary client interceptor: every
// attempt checks the deadline (and sends the remaining deadline less the
// margin as grpc-timeout), the throttle and the breaker; UNAVAILABLE and
// RESOURCE_EXHAUSTED are retried as the Policy allows, waiting at least
// the server's pushback, or failed at once when the deadline cannot cover
// it. When it gives up on such a refusal it returns a *GaveUpError.
func (c *Client) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	p := c.cfg.Policy
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		safe := c.cfg.Idempotent != nil && c.cfg.Idempotent(method)
		var lastErr error
		var trailer metadata.MD
		callOpts := append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))
		stop, err := p.DoUpstream(ctx, cc.Target(), safe, func(n int, to retry.Timeout) retry.Outcome {
			actx, cancel := ctx, context.CancelFunc(nil)
			if to.Set {
				actx, cancel = context.WithTimeout(ctx, to.Left)
			}
			trailer = nil
			lastErr = invoker(actx, method, req, reply, cc, callOpts...)
			if cancel != nil {
				cancel()
			}
			return classify(ctx, lastErr, trailer)
		})
		if err != nil {
			return localError(err)
		}
		if lastErr != nil && stop.GaveUp() {
			if c := status.Code(lastErr); c == codes.Unavailable || c == codes.ResourceExhausted {
				return gaveUp(stop, lastErr)
			}
		}
		return lastErr
	}
}

// StreamClientInterceptor returns the stream client interceptor. Streams
// are not retried (messages may already have been consumed); opening one
// checks the deadline (and shortens it by the margin), the throttle and
// the breaker, whose call is ended when the stream opens or fails to.
func (c *Client) StreamClientInterceptor() grpc.StreamClientInterceptor {
	p := c.cfg.Policy
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		var (
			cs      grpc.ClientStream
			lastErr error
			cancel  context.CancelFunc
		)
		_, err := p.DoUpstream(ctx, cc.Target(), false, func(n int, to retry.Timeout) retry.Outcome {
			sctx := ctx
			if to.Set {
				sctx, cancel = context.WithTimeout(ctx, to.Left)
			}
			cs, lastErr = streamer(sctx, desc, cc, method, opts...)
			if lastErr != nil && cancel != nil {
				cancel()
				cancel = nil
			}
			return classify(ctx, lastErr, nil)
		})
		if err != nil {
			return nil, localError(err)
		}
		if lastErr != nil {
			return nil, lastErr
		}
		if cancel != nil {
			return &cancelStream{ClientStream: cs, cancel: cancel}, nil
		}
		return cs, nil
	}
}

// cancelStream releases the shortened deadline's timer once the stream
// ends.
type cancelStream struct {
	grpc.ClientStream
	cancel context.CancelFunc
}

func (s *cancelStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.cancel()
	}
	return err
}
