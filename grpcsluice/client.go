package grpcsluice

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
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

// StreamClientInterceptor returns the stream client interceptor.
//
// A server-streaming call (one request message, a stream of answers) is
// retried like a unary call, but only before it is committed: until the
// server has sent response headers, which it does before its first
// message, nothing has been received, so nothing can be lost or repeated
// by opening the stream again and resending the request. This is the rule
// of gRPC's own retry design (gRFC A6). The stream is opened when the
// caller first calls RecvMsg (or Header): the request arrives through
// SendMsg after the interceptor returns, and the first attempt must pass
// the deadline, throttle and breaker checks like any other. So local
// refusals (throttled, breaker open, no time left) and refusals the
// Policy gave up on come from the first Recv, where a server-streaming
// caller already expects the server's errors; the breaker is told the
// outcome when the stream commits or fails.
//
// Client-streaming and bidirectional streams are not retried: their
// messages are sent while the caller may already be receiving, so a retry
// would have to buffer and replay every sent message without knowing
// which the server had acted on. Opening one checks the deadline (and
// shortens it by the margin), the throttle and the breaker once.
func (c *Client) StreamClientInterceptor() grpc.StreamClientInterceptor {
	p := c.cfg.Policy
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if !desc.ClientStreams && desc.ServerStreams {
			return &retryStream{c: c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}, nil
		}
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

// retryStream is a server-streaming call that is opened, and retried
// until it commits, on the first RecvMsg or Header. SendMsg and CloseSend
// before that are recorded and replayed on every attempt; the generated
// code of a server-streaming method makes exactly those two calls before
// it returns the stream.
type retryStream struct {
	c        *Client
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	// Written by the caller's SendMsg and CloseSend before the stream is
	// opened, read while it is opened.
	req       any
	hasReq    bool
	closeSend bool

	once   sync.Once
	opened atomic.Bool       // set after once ran open: the fields below are fixed
	cs     grpc.ClientStream // the committed attempt; nil if none
	err    error             // why no attempt committed
	first  error             // the committed attempt's first RecvMsg error, kept for the caller (io.EOF: no messages)
	cancel context.CancelFunc
}

func (s *retryStream) SendMsg(m any) error {
	if s.hasReq {
		return status.Error(codes.Internal, "grpcsluice: a server-streaming call sends one message")
	}
	s.req, s.hasReq = m, true
	return nil
}

func (s *retryStream) CloseSend() error {
	s.closeSend = true
	return nil
}

// open runs the Policy over attempts: each opens the stream, sends the
// request and waits for the response headers. Headers commit the stream
// (the server accepted it; nothing was received yet); a stream that ends
// without them failed before sending anything and is classified and
// retried like a unary call.
func (s *retryStream) open(m any) {
	p := s.c.cfg.Policy
	safe := s.c.cfg.Idempotent != nil && s.c.cfg.Idempotent(s.method)
	var lastErr error
	stop, err := p.DoUpstream(s.ctx, s.cc.Target(), safe, func(n int, to retry.Timeout) retry.Outcome {
		// The attempt's own context ends a failed attempt's stream; a
		// committed one's ends with the stream (RecvMsg's error).
		var (
			actx   context.Context
			cancel context.CancelFunc
		)
		if to.Set {
			actx, cancel = context.WithTimeout(s.ctx, to.Left)
		} else {
			actx, cancel = context.WithCancel(s.ctx)
		}
		cs, err := s.streamer(actx, s.desc, s.cc, s.method, s.opts...)
		if err == nil && s.hasReq {
			err = cs.SendMsg(s.req)
		}
		if err == nil && s.closeSend {
			err = cs.CloseSend()
		}
		var trailer metadata.MD
		if err == nil {
			var md metadata.MD
			if md, err = cs.Header(); md != nil && err == nil {
				s.cs, s.cancel, lastErr = cs, cancel, nil
				return retry.Outcome{Accepted: true, Breaker: breaker.Success}
			}
			// No headers: the stream ended before the server sent
			// anything; RecvMsg returns how it ended without decoding.
			if err == nil {
				if err = cs.RecvMsg(m); err == io.EOF {
					// Ended with OK and no message: a committed, empty stream.
					s.cs, s.cancel, s.first, lastErr = cs, cancel, io.EOF, nil
					return retry.Outcome{Accepted: true, Breaker: breaker.Success}
				}
			}
			trailer = cs.Trailer()
		}
		cancel()
		lastErr = err
		return classify(s.ctx, err, trailer)
	})
	switch {
	case err != nil:
		s.err = localError(err)
	case lastErr != nil && stop.GaveUp():
		if code := status.Code(lastErr); code == codes.Unavailable || code == codes.ResourceExhausted {
			s.err = gaveUp(stop, lastErr)
		} else {
			s.err = lastErr
		}
	case lastErr != nil:
		s.err = lastErr
	}
}

func (s *retryStream) RecvMsg(m any) error {
	s.start(m)
	if s.cs == nil {
		return s.err
	}
	if s.first != nil {
		err := s.first
		s.cancel()
		return err
	}
	err := s.cs.RecvMsg(m)
	if err != nil {
		s.cancel()
	}
	return err
}

func (s *retryStream) Header() (metadata.MD, error) {
	s.start(nil)
	if s.cs == nil {
		return nil, s.err
	}
	return s.cs.Header()
}

func (s *retryStream) start(m any) {
	s.once.Do(func() {
		s.open(m)
		s.opened.Store(true)
	})
}

func (s *retryStream) Trailer() metadata.MD {
	if !s.opened.Load() || s.cs == nil {
		return nil
	}
	return s.cs.Trailer()
}

func (s *retryStream) Context() context.Context {
	if !s.opened.Load() || s.cs == nil {
		return s.ctx
	}
	return s.cs.Context()
}
