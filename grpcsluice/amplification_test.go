package grpcsluice

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/retry"
)

// failingHealth answers every Check with UNAVAILABLE and counts them.
type failingHealth struct {
	healthpb.UnimplementedHealthServer
	n atomic.Int64
}

func (f *failingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	f.n.Add(1)
	return nil, status.Error(codes.Unavailable, "bottom down")
}

// naiveRetry retries UNAVAILABLE up to attempts times at once: what a
// caller without budgets or signals does.
func naiveRetry(attempts int) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for i := 1; ; i++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if status.Code(err) != codes.Unavailable || i == attempts {
				return err
			}
		}
	}
}

// grpcServe serves h on 127.0.0.1:0 with the given server options and
// returns its address.
func grpcServe(t *testing.T, h healthpb.HealthServer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, h)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// grpcChain builds client → A → B → bottom over real gRPC servers on
// loopback. Each of client, A and B calls down through the interceptor
// mk(layer) returns; A and B are relays whose servers use serverOpts. It
// returns the top client and the bottom.
func grpcChain(t *testing.T, mk func(layer string) grpc.UnaryClientInterceptor, serverOpts ...grpc.ServerOption) (healthpb.HealthClient, *failingHealth) {
	bottom := &failingHealth{}
	addr := grpcServe(t, bottom)
	for _, layer := range []string{"B", "A"} {
		down := dial(t, addr, grpc.WithUnaryInterceptor(mk(layer)))
		addr = grpcServe(t, relayHealth{down: down}, serverOpts...)
	}
	return dial(t, addr, grpc.WithUnaryInterceptor(mk("client"))), bottom
}

// TestAmplificationGRPC is the three-layer retry storm over gRPC. Naive
// interceptors that each try 4 times send 4×4×4 = 64 attempts to a
// failing bottom per original call. With grpcsluice's client interceptor
// at every layer (and its server interceptor on the relays, which marks a
// give-up with the no-retry trailer), only the layer above the bottom
// retries, within its budget: the bottom sees at most 1.1× the original
// calls plus the budget floor. About 2 s under -race: 600 calls cross a
// chain of real gRPC servers, enough that the budget's ratio, not its
// floor, bounds what reaches the bottom.
func TestAmplificationGRPC(t *testing.T) {
	const naiveCalls = 5
	c, bottom := grpcChain(t, func(string) grpc.UnaryClientInterceptor { return naiveRetry(4) })
	for range naiveCalls {
		if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("naive chain: %v, want UNAVAILABLE", err)
		}
	}
	if got := bottom.n.Load(); got != 64*naiveCalls {
		t.Fatalf("naive: bottom saw %d attempts for %d calls, want exactly %d (64 each)", got, naiveCalls, 64*naiveCalls)
	}
	t.Logf("naive: %d calls -> %d attempts on the bottom (%.0fx)", naiveCalls, bottom.n.Load(), float64(bottom.n.Load())/naiveCalls)

	for _, throttle := range []bool{false, true} {
		name := "budget+signal"
		if throttle {
			name = "budget+signal+throttle"
		}
		t.Run(name, func(t *testing.T) {
			const calls = 300
			const floorPerSecond, window = 1.0, 10 * time.Second
			floor := floorPerSecond * window.Seconds()
			var mu sync.Mutex
			policies := map[string]*retry.Policy{}
			relay := NewServer(ServerConfig{Bypass: noBypass})
			c, bottom := grpcChain(t, func(layer string) grpc.UnaryClientInterceptor {
				r := rand.New(rand.NewPCG(7, uint64(len(layer))))
				var rmu sync.Mutex
				budget, _ := retry.NewBudget(retry.BudgetConfig{MinPerSecond: floorPerSecond, Window: window})
				p, err := retry.New(retry.Config{Name: layer, MaxAttempts: 4, BaseDelay: 100 * time.Microsecond, MaxDelay: time.Millisecond,
					Budget: budget, NoThrottle: !throttle,
					Rand: func() float64 { rmu.Lock(); defer rmu.Unlock(); return r.Float64() }})
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				policies[layer] = p
				mu.Unlock()
				return mustClient(t, ClientConfig{Policy: p, Idempotent: func(string) bool { return true }}).UnaryClientInterceptor()
			}, grpc.UnaryInterceptor(relay.UnaryServerInterceptor()))
			start := time.Now()
			for range calls {
				var tr metadata.MD
				_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
				if status.Code(err) != codes.Unavailable || !IsGaveUp(err) {
					t.Fatalf("top got %v, want UNAVAILABLE given up", err)
				}
			}
			got := bottom.n.Load()
			limit := 1.1*calls + floor
			t.Logf("grpcsluice (%s): %d calls -> %d attempts on the bottom (%.3fx; limit 1.1x + floor %.0f = %.0f) in %v",
				name, calls, got, float64(got)/calls, floor, limit, time.Since(start))
			if float64(got) > limit {
				t.Fatalf("bottom saw %d attempts for %d calls, want ≤ %.0f (1.1x + floor)", got, calls, limit)
			}
			if throttle {
				return
			}
			if got < calls {
				t.Fatalf("bottom saw %d < %d calls", got, calls)
			}
			for _, layer := range []string{"client", "A"} {
				if r := policies[layer].Stats()[retry.EventRetry]; r != 0 {
					t.Fatalf("layer %s retried %d times; only the layer above the failure may retry", layer, r)
				}
			}
			if st := policies["B"].Stats(); st[retry.EventRetry] == 0 || st[retry.EventBudgetExhausted] == 0 {
				t.Fatalf("layer B retried %d times, budget exhausted %d: the budget was never tested", st[retry.EventRetry], st[retry.EventBudgetExhausted])
			}
		})
	}
}
