package grpcsluice

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests gate the gRPC health service itself (Bypass off), so they
// need no generated code: Check is the unary call, Watch the stream.
func noBypass(string) bool { return false }

// startServer serves health on 127.0.0.1:0 behind s and returns its address.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(s.UnaryServerInterceptor()), grpc.StreamInterceptor(s.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// scripted refuses the n-th call with refuse(n) (nil admits) and counts
// calls and admitted work still running.
type scripted struct {
	calls, running atomic.Int64
	refuse         func(n int64) error
	deadlines      chan time.Duration
}

func (s *scripted) Admit(ctx context.Context, method string) (func(error), error) {
	n := s.calls.Add(1)
	if s.deadlines != nil {
		if dl, ok := ctx.Deadline(); ok {
			s.deadlines <- time.Until(dl)
		} else {
			s.deadlines <- -1
		}
	}
	if err := s.refuse(n); err != nil {
		return nil, err
	}
	s.running.Add(1)
	return func(error) { s.running.Add(-1) }, nil
}

// TestServerRefusalMapping: each refusal reason becomes the documented
// code, with the pushback trailer from RetryAfter where a retry may help.
func TestServerRefusalMapping(t *testing.T) {
	for _, tc := range []struct {
		reason   admit.Reason
		code     codes.Code
		pushback string
	}{
		{admit.ReasonFull, codes.Unavailable, "1500"},
		{admit.ReasonQueueFull, codes.Unavailable, "1500"},
		{admit.ReasonClosed, codes.Unavailable, "1500"},
		{admit.ReasonShed, codes.Unavailable, "1500"},
		{admit.ReasonBreakerOpen, codes.Unavailable, "1500"},
		{admit.ReasonRate, codes.ResourceExhausted, "1500"},
		{admit.ReasonDeadline, codes.DeadlineExceeded, ""},
	} {
		t.Run(tc.reason.String(), func(t *testing.T) {
			a := &scripted{refuse: func(int64) error {
				return admit.NewRejectedError("db", "", tc.reason, 0, 0, 1500*time.Millisecond)
			}}
			c := dial(t, startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass})))
			var tr metadata.MD
			_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code = %v, want %v (err %v)", got, tc.code, err)
			}
			if got := first(tr, PushbackTrailer); got != tc.pushback {
				t.Fatalf("pushback = %q, want %q", got, tc.pushback)
			}
			if first(tr, ReasonTrailer) != tc.reason.String() || first(tr, GateTrailer) != "db" {
				t.Fatalf("trailer %v lacks reason/gate", tr)
			}
		})
	}
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// TestServerGateAndStream: a real gate of one slot, held by an open Watch
// stream, refuses a Check with UNAVAILABLE; after the stream ends the
// Check passes. Health checks bypass the gate by default.
func TestServerGateAndStream(t *testing.T) {
	g, err := admit.New(admit.Config{Name: "work", Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{GateAdmitter{Gate: g}}, Bypass: noBypass}))
	c := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the stream is admitted and running
		t.Fatal(err)
	}
	_, err = c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Check while the slot is held: %v, want UNAVAILABLE", err)
	}
	// A second stream is refused too.
	w2, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w2.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("second Watch: %v, want UNAVAILABLE", err)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for g.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check after the stream ended: %v", err)
	}

	// Default config: health is never gated.
	addr = startServer(t, NewServer(ServerConfig{Admitters: []Admitter{&scripted{refuse: func(int64) error { return errors.New("no") }}}}))
	if _, err := dial(t, addr).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health gated by default: %v", err)
	}
}

// TestServerDeadlineAware: a call whose deadline leaves less than
// MinDeadline is refused before admission; a queued call whose deadline
// passes leaves the gate's queue.
func TestServerDeadlineAware(t *testing.T) {
	a := &scripted{refuse: func(int64) error { return nil }}
	c := dial(t, startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, MinDeadline: 200 * time.Millisecond, Bypass: noBypass})))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.DeadlineExceeded || a.calls.Load() != 0 {
		t.Fatalf("short deadline: %v after %d admissions, want DEADLINE_EXCEEDED before admission", err, a.calls.Load())
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	g, _ := admit.New(admit.Config{Name: "q", Capacity: 1, MaxWaiters: 4})
	held, _ := g.TryAcquire()
	defer held.Done(admit.OutcomeOK)
	c = dial(t, startServer(t, NewServer(ServerConfig{Admitters: []Admitter{GateAdmitter{Gate: g, Wait: true}}, Bypass: noBypass})))
	ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 5*time.Second {
		t.Fatalf("queued past its deadline: %v after %v", err, time.Since(start))
	}
}

// clientPolicy returns a policy that does not really sleep and records
// its waits.
func clientPolicy(t *testing.T, cfg retry.Config, waits *[]time.Duration) *retry.Policy {
	t.Helper()
	var mu sync.Mutex
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	p, err := retry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClientHonorsPushback: refusals with a pushback are retried after at
// least the pushback (even for a method not marked idempotent: the
// handler never ran), and failed at once when the deadline cannot cover it.
func TestClientHonorsPushback(t *testing.T) {
	a := &scripted{refuse: func(n int64) error {
		if n <= 2 {
			return admit.NewRejectedError("g", "", admit.ReasonFull, 0, 0, 300*time.Millisecond)
		}
		return nil
	}}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{MaxAttempts: 3}, &waits)
	cl := mustClient(t, ClientConfig{Policy: p})
	c := dial(t, addr, grpc.WithUnaryInterceptor(cl.UnaryClientInterceptor()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if a.calls.Load() != 3 || len(waits) != 2 || waits[0] < 300*time.Millisecond || waits[1] < 300*time.Millisecond {
		t.Fatalf("%d attempts, waits %v: want 3 attempts and two waits ≥ 300ms", a.calls.Load(), waits)
	}
	if p.Stats()[retry.EventRetryAfterHonored] != 2 {
		t.Fatal("pushback not counted as honored")
	}

	// Pushback beyond the deadline: one attempt, then the refusal at once.
	a.calls.Store(0)
	waits = nil
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || !IsGaveUp(err) || a.calls.Load() != 1 || len(waits) != 0 {
		t.Fatalf("err %v after %d attempts, waits %v: want UNAVAILABLE (gave up) after 1", err, a.calls.Load(), waits)
	}
}

// TestClientDeadlinePropagated: the server sees the caller's deadline less
// the margin; an expired budget sends nothing.
func TestClientDeadlinePropagated(t *testing.T) {
	a := &scripted{refuse: func(int64) error { return nil }, deadlines: make(chan time.Duration, 4)}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{DeadlineMargin: 300 * time.Millisecond}, &waits)
	c := dial(t, addr, grpc.WithUnaryInterceptor(mustClient(t, ClientConfig{Policy: p}).UnaryClientInterceptor()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if d := <-a.deadlines; d > 1700*time.Millisecond || d < time.Second {
		t.Fatalf("server saw %v left, want ≤ 1.7s (2s − 300ms margin)", d)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.DeadlineExceeded || a.calls.Load() != 1 {
		t.Fatalf("err %v, %d server calls: an attempt started without time left", err, a.calls.Load())
	}
}

// TestClientBreakerAndNoRetry: UNAVAILABLE without pushback on a method
// not marked idempotent is not retried; failures open the breaker, which
// then refuses locally; a no-retry trailer stops retries of an idempotent
// method.
func TestClientBreakerAndNoRetry(t *testing.T) {
	a := &scripted{refuse: func(int64) error { return errors.New("plain failure") }}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	b, _ := breaker.New(breaker.Config{Name: "health", MinCalls: 3, OpenFor: time.Minute})
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{Breaker: b, NoThrottle: true}, &waits)
	c := dial(t, addr, grpc.WithUnaryInterceptor(mustClient(t, ClientConfig{Policy: p}).UnaryClientInterceptor()))
	for range 3 {
		if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("err %v, want UNAVAILABLE", err)
		}
	}
	if a.calls.Load() != 3 {
		t.Fatalf("%d attempts for 3 calls of a non-idempotent method", a.calls.Load())
	}
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || !IsGaveUp(err) || a.calls.Load() != 3 {
		t.Fatalf("err %v after %d server calls: want a local breaker refusal", err, a.calls.Load())
	}

	// Idempotent method, upstream says do not retry: one attempt.
	nr := &scripted{refuse: func(int64) error { return errors.New("x") }}
	inner := NewServer(ServerConfig{Admitters: []Admitter{nr}, Bypass: noBypass})
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		grpc.SetTrailer(ctx, metadata.Pairs(NoRetryTrailer, "overloaded"))
		return inner.UnaryServerInterceptor()(ctx, req, info, h)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	p2 := clientPolicy(t, retry.Config{MaxAttempts: 4, NoThrottle: true}, &waits)
	c2 := dial(t, lis.Addr().String(), grpc.WithUnaryInterceptor(mustClient(t, ClientConfig{Policy: p2, Idempotent: func(string) bool { return true }}).UnaryClientInterceptor()))
	if _, err := c2.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable || nr.calls.Load() != 1 {
		t.Fatalf("err %v after %d attempts: want 1 attempt under the no-retry trailer", err, nr.calls.Load())
	}
}

// TestGaveUpMarksRelay: a middle server whose handler returns a client
// interceptor's give-up answers with the no-retry trailer, so its caller
// does not retry: only one layer retries.
func TestGaveUpMarksRelay(t *testing.T) {
	bottom := &scripted{refuse: func(int64) error {
		return admit.NewRejectedError("g", "", admit.ReasonFull, 0, 0, time.Millisecond)
	}}
	bottomAddr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{bottom}, Bypass: noBypass}))
	var waits []time.Duration
	mk := func() *Client {
		return mustClient(t, ClientConfig{Policy: clientPolicy(t, retry.Config{MaxAttempts: 4, NoThrottle: true}, &waits),
			Idempotent: func(string) bool { return true }})
	}
	down := dial(t, bottomAddr, grpc.WithUnaryInterceptor(mk().UnaryClientInterceptor()))

	mid := NewServer(ServerConfig{Bypass: noBypass})
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer(grpc.UnaryInterceptor(mid.UnaryServerInterceptor()))
	healthpb.RegisterHealthServer(srv, relayHealth{down: down})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	top := dial(t, lis.Addr().String(), grpc.WithUnaryInterceptor(mk().UnaryClientInterceptor()))
	var tr metadata.MD
	_, err := top.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v", err)
	}
	if got := bottom.calls.Load(); got != 4 {
		t.Fatalf("bottom saw %d attempts, want 4 (only the layer above it retries; 16 if both did)", got)
	}
}

type relayHealth struct {
	healthpb.UnimplementedHealthServer
	down healthpb.HealthClient
}

func (r relayHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return r.down.Check(ctx, req)
}

// TestStreamClient: opening a stream through the client interceptor
// checks the breaker and passes the shortened deadline.
func TestStreamClient(t *testing.T) {
	a := &scripted{refuse: func(int64) error { return nil }, deadlines: make(chan time.Duration, 4)}
	addr := startServer(t, NewServer(ServerConfig{Admitters: []Admitter{a}, Bypass: noBypass}))
	var waits []time.Duration
	p := clientPolicy(t, retry.Config{DeadlineMargin: 500 * time.Millisecond}, &waits)
	c := dial(t, addr, grpc.WithStreamInterceptor(mustClient(t, ClientConfig{Policy: p}).StreamClientInterceptor()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	if d := <-a.deadlines; d > 2500*time.Millisecond {
		t.Fatalf("stream deadline %v, want ≤ 2.5s", d)
	}
	cancel()
	for {
		if _, err := w.Recv(); err != nil {
			break
		}
	}
	if p.Stats()[retry.EventAttempt] != 1 {
		t.Fatal("stream open not counted as an attempt")
	}
}

func mustClient(t *testing.T, cfg ClientConfig) *Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewClientNeedsPolicy(t *testing.T) {
	if _, err := NewClient(ClientConfig{}); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("err = %v, want ErrNoPolicy", err)
	}
}

// TestAdmittersReleasedOnLaterRefusal: with several admitters, a refusal by
// a later one releases the slots the earlier ones gave; an admitted call
// releases all of them when it ends.
func TestAdmittersReleasedOnLaterRefusal(t *testing.T) {
	g, _ := admit.New(admit.Config{Name: "first", Capacity: 4})
	refuse := atomic.Bool{}
	second := &scripted{refuse: func(int64) error {
		if refuse.Load() {
			return admit.NewRejectedError("quota", "", admit.ReasonRate, 0, 0, 2*time.Second)
		}
		return nil
	}}
	c := dial(t, startServer(t, NewServer(ServerConfig{Admitters: []Admitter{GateAdmitter{Gate: g}, second}, Bypass: noBypass})))
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	for range 10 {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("err %v, want RESOURCE_EXHAUSTED from the second admitter", err)
		}
	}
	if g.InUse() != 0 || second.running.Load() != 0 {
		t.Fatalf("slots left held: gate %d, second %d", g.InUse(), second.running.Load())
	}
	if st := g.Stats(); st.Admitted != 11 {
		t.Fatalf("gate admitted %d, want 11 (each refused call took and gave back a slot)", st.Admitted)
	}
}
