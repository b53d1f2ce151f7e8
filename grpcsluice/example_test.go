package grpcsluice_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/retry"
)

// A gRPC server whose calls go through a gate, with the health service
// wired beside it (it bypasses the gate so probes answer under overload),
// and a client whose calls go through a retry policy.
func Example() {
	work, _ := admit.New(admit.Config{Name: "work", Capacity: 1})
	held, _ := work.TryAcquire() // the server is busy: its only slot is taken
	defer held.Done(admit.OutcomeOK)

	s := grpcsluice.NewServer(grpcsluice.ServerConfig{
		Admitters: []grpcsluice.Admitter{grpcsluice.GateAdmitter{Gate: work}},
	})
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(s.UnaryServerInterceptor()),
		grpc.StreamInterceptor(s.StreamServerInterceptor()))
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()

	p, _ := retry.New(retry.Config{Name: "example"})
	c, _ := grpcsluice.NewClient(grpcsluice.ClientConfig{Policy: p})
	cc, _ := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()))
	defer cc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err)
	// Output: SERVING <nil>
}
