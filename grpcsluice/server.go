package grpcsluice

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/admit"
)

// Trailer keys the interceptors read and write.
const (
	// PushbackTrailer is gRPC's retry pushback (gRFC A6): milliseconds to
	// wait before retrying; a negative value means do not retry.
	PushbackTrailer = "grpc-retry-pushback-ms"
	// NoRetryTrailer is the gRPC form of retry.NoRetryHeader: "overloaded,
	// do not retry". The server interceptor sets it on refusals a client
	// interceptor gave up on, so only one layer of a call chain retries.
	NoRetryTrailer = "sluice-no-retry"
	// ReasonTrailer and GateTrailer name the refusal's reason and gate.
	ReasonTrailer = "sluice-reason"
	GateTrailer   = "sluice-gate"
)

// Admitter puts one call through an admission point: it returns a done
// function to call exactly once when the call ends (with the handler's
// error, nil for success), or a refusal. A refusal should be (or wrap) an
// *admit.RejectedError so it is mapped to the right code; any other error
// is returned to the client as UNAVAILABLE. Implementations must be safe
// for concurrent use and must respect ctx, which carries the caller's
// deadline. GateAdmitter adapts an *admit.Gate; adaptive limits and
// quotas plug in by implementing this interface.
type Admitter interface {
	Admit(ctx context.Context, fullMethod string) (done func(err error), err error)
}

// AdmitterFunc adapts a function to Admitter.
type AdmitterFunc func(ctx context.Context, fullMethod string) (func(error), error)

// Admit calls f.
func (f AdmitterFunc) Admit(ctx context.Context, fullMethod string) (func(error), error) {
	return f(ctx, fullMethod)
}

// GateAdmitter admits calls through an admit.Gate. With Wait, a call may
// queue (Gate.Acquire) until the gate's MaxWait or the caller's deadline,
// whichever comes first; without it, a full gate refuses at once. Kind
// maps a method to the gate's kind; nil means the default kind. The zero
// GateAdmitter is not usable (it needs a Gate).
type GateAdmitter struct {
	Gate *admit.Gate
	Wait bool
	Kind func(fullMethod string) admit.Kind
}

// Admit implements Admitter.
func (g GateAdmitter) Admit(ctx context.Context, fullMethod string) (func(error), error) {
	var k admit.Kind
	if g.Kind != nil {
		k = g.Kind(fullMethod)
	}
	var (
		p   admit.Permit
		err error
	)
	if g.Wait {
		p, err = g.Gate.AcquireFor(ctx, admit.Request{Kind: k})
	} else {
		p, err = g.Gate.TryAcquireFor(admit.Request{Kind: k})
	}
	if err != nil {
		return nil, err
	}
	return func(err error) { p.Done(outcome(ctx, err)) }, nil
}

func outcome(ctx context.Context, err error) admit.Outcome {
	switch {
	case err == nil:
		return admit.OutcomeOK
	case ctx.Err() != nil:
		return admit.OutcomeCanceled
	}
	return admit.OutcomeError
}

// ServerConfig configures the server interceptors. The zero value admits
// everything except health checks through no admitter (a pass-through).
type ServerConfig struct {
	// Admitters are asked in order; a call runs only if every one admits
	// it, and the ones that did are released (in reverse) if a later one
	// refuses.
	Admitters []Admitter
	// MinDeadline refuses at once, with DEADLINE_EXCEEDED, a call whose
	// incoming deadline leaves less than this: it would time out before
	// the work could finish, so it should not take a slot. 0 or negative
	// means no minimum (a deadline that has already passed is still
	// refused).
	MinDeadline time.Duration
	// Bypass reports methods that skip admission. Nil means the gRPC health
	// service (grpc.health.v1.Health), which must answer under overload.
	Bypass func(fullMethod string) bool
	// Logger receives a Debug event per refusal. Nil is silent.
	Logger *slog.Logger
}

// Server holds the server interceptors built from a ServerConfig. Create
// it with NewServer; safe for concurrent use.
type Server struct {
	cfg ServerConfig
}

// NewServer returns the server interceptors for cfg.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Bypass == nil {
		cfg.Bypass = func(m string) bool { return strings.HasPrefix(m, "/grpc.health.v1.Health/") }
	}
	return &Server{cfg: cfg}
}

// admit runs the admitters; on refusal it returns the status error and the
// trailer to send.
func (s *Server) admit(ctx context.Context, method string) (func(error), metadata.MD, error) {
	if s.cfg.Bypass(method) {
		return func(error) {}, nil, nil
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left <= 0 || left < s.cfg.MinDeadline {
			re := admit.NewRejectedError("deadline", "", admit.ReasonDeadline, 0, 0, time.Second)
			return nil, nil, s.refuse(ctx, method, re)
		}
	}
	var dones []func(error)
	if len(s.cfg.Admitters) == 1 { // the common case, without a slice
		done, err := s.cfg.Admitters[0].Admit(ctx, method)
		if err != nil {
			return nil, trailerFor(err), s.refuse(ctx, method, err)
		}
		return done, nil, nil
	}
	for _, a := range s.cfg.Admitters {
		done, err := a.Admit(ctx, method)
		if err != nil {
			for i := len(dones) - 1; i >= 0; i-- {
				dones[i](err)
			}
			return nil, trailerFor(err), s.refuse(ctx, method, err)
		}
		dones = append(dones, done)
	}
	return func(err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i](err)
		}
	}, nil, nil
}

// Code maps a refusal to its gRPC code: RESOURCE_EXHAUSTED for a rate
// quota, DEADLINE_EXCEEDED when the caller's deadline left no time,
// CANCELLED when the caller went away, UNAVAILABLE for overload (full,
// queue full, wait timeout, shed, breaker open) and shutdown (closed), and
// for errors that are not admit refusals.
func Code(err error) codes.Code {
	var re *admit.RejectedError
	if !errors.As(err, &re) {
		return codes.Unavailable
	}
	switch re.Reason() {
	case admit.ReasonRate:
		return codes.ResourceExhausted
	case admit.ReasonDeadline:
		return codes.DeadlineExceeded
	case admit.ReasonCanceled:
		return codes.Canceled
	}
	return codes.Unavailable
}

// trailerFor returns the refusal's trailer: the pushback from RetryAfter
// (for codes a client may retry) plus reason and gate.
func trailerFor(err error) metadata.MD {
	var re *admit.RejectedError
	if !errors.As(err, &re) {
		return nil
	}
	md := metadata.MD{ReasonTrailer: {re.Reason().String()}, GateTrailer: {re.Gate()}}
	if c := Code(err); c == codes.Unavailable || c == codes.ResourceExhausted {
		ms := max(re.RetryAfter().Milliseconds(), 1)
		md[PushbackTrailer] = []string{strconv.FormatInt(ms, 10)}
	}
	return md
}

func (s *Server) refuse(ctx context.Context, method string, err error) error {
	if s.cfg.Logger != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "grpcsluice: refused", slog.String("method", method), slog.String("error", err.Error()))
	}
	return status.Error(Code(err), err.Error())
}

// noRetryTrailer is set on answers whose error is a client interceptor's
// give-up, so the caller above does not retry what this layer already did.
var noRetryTrailer = metadata.Pairs(NoRetryTrailer, "overloaded")

// UnaryServerInterceptor returns the unary server interceptor.
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		done, md, err := s.admit(ctx, info.FullMethod)
		if err != nil {
			if md != nil {
				grpc.SetTrailer(ctx, md)
			}
			return nil, err
		}
		resp, err := handler(ctx, req)
		done(err)
		if err != nil && IsGaveUp(err) {
			grpc.SetTrailer(ctx, noRetryTrailer)
		}
		return resp, err
	}
}

// StreamServerInterceptor returns the stream server interceptor: a stream
// is admitted once, when it opens, and holds its admission until the
// handler returns.
func (s *Server) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		done, md, err := s.admit(ss.Context(), info.FullMethod)
		if err != nil {
			if md != nil {
				ss.SetTrailer(md)
			}
			return err
		}
		err = handler(srv, ss)
		done(err)
		if err != nil && IsGaveUp(err) {
			ss.SetTrailer(noRetryTrailer)
		}
		return err
	}
}
