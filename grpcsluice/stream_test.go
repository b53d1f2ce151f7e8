package grpcsluice

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
)

// TestStreamRetriedBeforeCommit: a server-streaming call refused twice
// with a pushback (the server sent nothing: no headers) is opened again
// after the pushback and the caller's first Recv gets the first message;
// a plain UNAVAILABLE on a method not marked idempotent is not retried;
// an open breaker refuses at the first Recv without sending anything.
func TestStreamRetriedBeforeCommit(t *testing.T) {
	a := &scripted{refuse: func(n int64) error {
		if n <= 2 {
			return admit.NewRejectedError("g", "", admit.ReasonFull, 0, 0, 50*time.Millisecond)
		}
		return nil
	}}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{MaxAttempts: 3, NoThrottle: true}, &waits)
	c := dial(t, addr, grpc.WithStreamInterceptor(mustClient(t, ClientConfig{Policy: p}).StreamClientInterceptor()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := w.Recv()
	if err != nil || msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Recv: %v %v, want SERVING after two refused attempts", msg, err)
	}
	if a.calls.Load() != 3 || len(waits) != 2 || waits[0] < 50*time.Millisecond || waits[1] < 50*time.Millisecond {
		t.Fatalf("%d attempts, waits %v: want 3 attempts and two waits ≥ the 50ms pushback", a.calls.Load(), waits)
	}
	if st := p.Stats(); st[retry.EventAttempt] != 3 || st[retry.EventRetry] != 2 {
		t.Fatalf("attempts %d retries %d, want 3 and 2", st[retry.EventAttempt], st[retry.EventRetry])
	}
	cancel()
	for {
		if _, err := w.Recv(); err != nil {
			break
		}
	}

	// A plain failure without pushback, method not idempotent: one attempt.
	plain := &scripted{refuse: func(int64) error { return errors.New("plain failure") }}
	addr = startServer(t, NewServer(ServerConfig{Admitters: []Admitter{plain}, Bypass: noBypass}))
	b, _ := breaker.New(breaker.Config{Name: "watch", MinCalls: 2, OpenFor: time.Minute})
	p2 := clientPolicy(t, retry.Config{MaxAttempts: 3, NoThrottle: true, Breaker: b}, &waits)
	c2 := dial(t, addr, grpc.WithStreamInterceptor(mustClient(t, ClientConfig{Policy: p2}).StreamClientInterceptor()))
	for range 2 {
		w, err := c2.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("Recv: %v, want UNAVAILABLE", err)
		}
	}
	if plain.calls.Load() != 2 {
		t.Fatalf("%d attempts for 2 streams of a method not marked idempotent", plain.calls.Load())
	}
	// Two failures opened the breaker: the next stream is refused locally.
	w2, err := c2.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Recv(); status.Code(err) != codes.Unavailable || !IsGaveUp(err) || plain.calls.Load() != 2 {
		t.Fatalf("Recv with the breaker open: %v after %d server calls, want a local refusal", err, plain.calls.Load())
	}
}

// TestStreamNotRetriedAfterCommit: once the server has sent its first
// message the stream is committed: when the server then goes away, the
// caller gets the error and no new attempt is made.
func TestStreamNotRetriedAfterCommit(t *testing.T) {
	a := &scripted{refuse: func(int64) error { return nil }}
	s := NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.StreamInterceptor(s.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{MaxAttempts: 4, NoThrottle: true}, &waits)
	c := dial(t, lis.Addr().String(), grpc.WithStreamInterceptor(mustClient(t, ClientConfig{Policy: p,
		Idempotent: func(string) bool { return true }}).StreamClientInterceptor()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after the server stopped: %v, want UNAVAILABLE", err)
	}
	if st := p.Stats(); st[retry.EventAttempt] != 1 || st[retry.EventRetry] != 0 || a.calls.Load() != 1 {
		t.Fatalf("attempts %d retries %d server calls %d: a committed stream was retried", st[retry.EventAttempt], st[retry.EventRetry], a.calls.Load())
	}
}

// TestClientStreamsNotRetried: a client-streaming (here bidirectional)
// call refused with a pushback is not retried, even for a method marked
// idempotent: its messages are not buffered for a replay.
func TestClientStreamsNotRetried(t *testing.T) {
	a := &scripted{refuse: func(int64) error {
		return admit.NewRejectedError("g", "", admit.ReasonFull, 0, 0, time.Millisecond)
	}}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{MaxAttempts: 4, NoThrottle: true}, &waits)
	cl := mustClient(t, ClientConfig{Policy: p, Idempotent: func(string) bool { return true }})
	opts := []grpc.DialOption{grpc.WithStreamInterceptor(cl.StreamClientInterceptor())}
	cc, err := grpc.NewClient("passthrough:///"+addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	desc := &grpc.StreamDesc{StreamName: "Watch", ClientStreams: true, ServerStreams: true}
	cs, err := cc.NewStream(context.Background(), desc, "/grpc.health.v1.Health/Watch")
	if err != nil {
		t.Fatal(err)
	}
	// The server refuses as the stream opens, so its status may arrive
	// before the message goes out: gRPC then fails SendMsg with io.EOF
	// and leaves the status for RecvMsg. Either order is correct.
	if err := cs.SendMsg(&healthpb.HealthCheckRequest{}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("SendMsg: %v, want nil or io.EOF", err)
	}
	cs.CloseSend()
	if err := cs.RecvMsg(new(healthpb.HealthCheckResponse)); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsg: %v, want UNAVAILABLE", err)
	}
	if a.calls.Load() != 1 || p.Stats()[retry.EventRetry] != 0 {
		t.Fatalf("%d server calls, %d retries: a client stream was retried", a.calls.Load(), p.Stats()[retry.EventRetry])
	}
}

// TestClientPerTargetBreakers: one client Policy with a breaker per
// target calls two real servers; the failing one's breaker opens and
// refuses locally, the healthy one's calls all pass.
func TestClientPerTargetBreakers(t *testing.T) {
	failing := &scripted{refuse: func(int64) error { return errors.New("down") }}
	healthy := &scripted{refuse: func(int64) error { return nil }}
	fa := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{failing}, Bypass: noBypass}))
	ha := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{healthy}, Bypass: noBypass}))
	g, err := breaker.NewGroup(breaker.GroupConfig{Breaker: breaker.Config{Name: "grpc", MinCalls: 3, OpenFor: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{Breakers: g, NoThrottle: true}, &waits)
	cl := mustClient(t, ClientConfig{Policy: p})
	fc := dial(t, fa, grpc.WithUnaryInterceptor(cl.UnaryClientInterceptor()))
	hc := dial(t, ha, grpc.WithUnaryInterceptor(cl.UnaryClientInterceptor()))
	local := 0
	for range 10 {
		_, err := fc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if g := (*GaveUpError)(nil); errors.As(err, &g) && g.Stop == retry.StopBreaker {
			local++
		}
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("healthy target refused: %v", err)
		}
	}
	if failing.calls.Load() != 3 || local != 7 || healthy.calls.Load() != 10 {
		t.Fatalf("failing target saw %d (refused locally %d), healthy %d: want 3, 7, 10", failing.calls.Load(), local, healthy.calls.Load())
	}
	if b, ok := g.Lookup("passthrough:///" + ha); !ok || b.State() != breaker.Closed || g.Len() != 2 {
		t.Fatalf("healthy target's breaker %v (found %v), %d breakers", b, ok, g.Len())
	}
}

// TestStreamOpenConcurrent: Header, Context, Trailer and Recv called at
// once on a fresh server stream open it exactly once (under -race: no
// data race on the lazily opened stream) and agree on it.
func TestStreamOpenConcurrent(t *testing.T) {
	a := &scripted{refuse: func(n int64) error {
		if n == 1 {
			return admit.NewRejectedError("g", "", admit.ReasonFull, 0, 0, time.Millisecond)
		}
		return nil
	}}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	var waits []time.Duration
	budget, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 1}) // one retry per call, every call
	p := clientPolicy(t, retry.Config{MaxAttempts: 3, NoThrottle: true, Budget: budget}, &waits)
	c := dial(t, addr, grpc.WithStreamInterceptor(mustClient(t, ClientConfig{Policy: p}).StreamClientInterceptor()))
	for range 20 {
		a.calls.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var headerErr error
		wg.Go(func() { _, headerErr = w.Header() })
		wg.Go(func() { _ = w.Context(); _ = w.Trailer() })
		msg, err := w.Recv()
		wg.Wait()
		if err != nil || headerErr != nil || msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Recv %v %v, Header %v", msg, err, headerErr)
		}
		if a.calls.Load() != 2 {
			t.Fatalf("%d server calls, want 2 (one refused, one committed): the stream was opened more than once", a.calls.Load())
		}
		cancel()
		for {
			if _, err := w.Recv(); err != nil {
				break
			}
		}
	}
}
