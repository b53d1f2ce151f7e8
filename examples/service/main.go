// Command service is the service of docs/library.md: a cache in front of
// a slow database where only the database call is gated (8 at once, 16
// more waiting at most 100 ms, the rest refused with 503 and Retry-After),
// with Prometheus metrics, a connection guard and a graceful shutdown.
//
//	go run ./examples/service -addr 127.0.0.1:8080 -admin 127.0.0.1:9090
//	curl -i 127.0.0.1:8080/item/hot        # from the cache, never gated
//	curl -i 127.0.0.1:8080/item/42         # from the "database", gated
//	curl -s 127.0.0.1:9090/metrics | grep sluice_admission
package main

import (
	"context"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/server"
)

// app is the service: its handler, and the gate and metrics it is built on.
type app struct {
	db      *admit.Gate
	metrics *promsluice.Metrics
	handler http.Handler
}

func newApp(cache map[string]string, query func(ctx context.Context, id string) (string, error)) (*app, error) {
	metrics := promsluice.NewMetrics()
	db, err := metrics.NewGate(admit.Config{Name: "db", Capacity: 8, MaxWaiters: 16, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	mw, err := httpgate.New(httpgate.Config{})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /item/{id}", mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := cache[r.PathValue("id")]; ok {
			io.WriteString(w, v) // a cache hit costs nothing: no slot
			return
		}
		if _, err := httpgate.Acquire(r.Context(), db); err != nil {
			httpgate.Refuse(w, r, err) // 503 {"error":"BUSY","gate":"db","reason":"queue_full"}, Retry-After
			return
		}
		v, err := query(r.Context(), r.PathValue("id")) // the slot is released when the handler returns
		if err != nil {
			http.Error(w, "query failed", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, v)
	})))
	return &app{db: db, metrics: metrics, handler: mux}, nil
}

// serve runs a on cfg's listeners, with /metrics, /healthz and /state on
// the admin one, until ctx ends; then it drains gracefully.
func serve(ctx context.Context, a *app, cfg server.Config) error {
	cfg.Handler, cfg.Gates, cfg.Metrics = a.handler, a.metrics.Gates(), a.metrics
	cfg.Conn = connlimit.Config{MaxConns: 1024} // file descriptors, not concurrency: keep it above the clients' pools
	srv, err := server.Listen(ctx, cfg)
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "main listener")
	admin := flag.String("admin", "127.0.0.1:9090", "admin listener: /metrics, /healthz, /state")
	latency := flag.Duration("query", 20*time.Millisecond, "time one database query takes")
	flag.Parse()
	query := func(ctx context.Context, id string) (string, error) { // stands in for a slow database
		select {
		case <-time.After(*latency):
			return "row " + id + "\n", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	a, err := newApp(map[string]string{"hot": "cached\n"}, query)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, a, server.Config{Addr: *addr, AdminAddr: *admin}); err != nil {
		log.Fatal(err)
	}
}
