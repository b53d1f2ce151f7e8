package server_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/server"
)

// TestKubernetesProbes: /livez stays 200 through a drain (a draining pod
// must not be restarted), /readyz follows Config.Ready and turns 503 as
// soon as the drain begins, and /healthz keeps its old meaning.
func TestKubernetesProbes(t *testing.T) {
	var notReady atomic.Bool
	notReady.Store(true)
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) {
		c.DrainDelay = 2 * time.Second
		c.Ready = func() error {
			if notReady.Load() {
				return errors.New("configuration not loaded")
			}
			return nil
		}
	})
	if r := f.mustGet(t, f.admin+"/readyz"); r.status != 503 || !strings.Contains(r.body, "configuration not loaded") {
		t.Errorf("/readyz before ready: %+v", r)
	}
	notReady.Store(false)
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		if r := f.mustGet(t, f.admin+p); r.status != 200 || r.body != `{"status":"ok"}`+"\n" {
			t.Errorf("%s: %+v", p, r)
		}
	}
	f.cancel()
	eventually(t, "/readyz to say draining", func() bool {
		r, err := f.get(t, f.admin+"/readyz")
		return err == nil && r.status == 503 && strings.Contains(r.body, "draining")
	})
	if r := f.mustGet(t, f.admin+"/healthz"); r.status != 503 {
		t.Errorf("/healthz while draining: %+v", r)
	}
	if r := f.mustGet(t, f.admin+"/livez"); r.status != 200 {
		t.Errorf("/livez while draining: %+v, want 200", r)
	}
	f.srv.Abort()
}

// slowDesc is a one-method gRPC service whose calls wait for release.
func slowDesc(entered, release chan struct{}) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "test.Slow",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Wait", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			entered <- struct{}{}
			<-release
			return new(emptypb.Empty), nil
		}}},
	}
}

// TestMainServerServesGRPC: a *grpc.Server on the main listener answers,
// and shutdown lets a call in progress finish.
func TestMainServerServesGRPC(t *testing.T) {
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	entered, release := make(chan struct{}, 1), make(chan struct{})
	g.RegisterService(slowDesc(entered, release), nil)
	srv, err := server.Listen(context.Background(), server.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Main: g})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	cc, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health over the main listener: %v %v", resp, err)
	}
	inflight := make(chan error, 1)
	go func() {
		inflight <- cc.Invoke(context.Background(), "/test.Slow/Wait", new(emptypb.Empty), new(emptypb.Empty))
	}()
	<-entered
	cancel() // shutdown begins with a call in progress
	eventually(t, "the drain to begin", srv.Draining)
	// GracefulStop (or, mutated, Stop) follows the drain's start at once;
	// give it a moment to act on the call before the call ends.
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-inflight; err != nil {
		t.Errorf("a call in progress when shutdown began failed: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want a clean shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := server.Listen(context.Background(), server.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Main: g,
		TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}); !errors.Is(err, server.ErrInvalidConfig) {
		t.Errorf("Main with TLS files: %v", err)
	}
}
