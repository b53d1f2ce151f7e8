// Command upstream is the second service of docs/library.md: it answers
// GET /users/{id} by calling an upstream service, "users-api". A
// per-client rate quota comes first (2 requests a second, bursts of 10;
// beyond that 429 with Retry-After), then a circuit breaker around the
// call (once half of at least 5 calls failed, 503 breaker_open for 5 s
// without calling), and one call to Metrics.Add exports both, beside the
// server's own metrics.
//
//	go run ./examples/upstream -addr 127.0.0.1:8081 -admin 127.0.0.1:9091 -users http://127.0.0.1:8082
//	curl -i 127.0.0.1:8081/users/42
//	curl -s 127.0.0.1:9091/metrics | grep -E 'sluice_(quota|breaker|admission_rejected)'
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

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/server"
)

// app is the service: its handler, and the quota, breaker and metrics it
// is built on.
type app struct {
	perClient *quota.Quota
	users     *breaker.Breaker
	metrics   *promsluice.Metrics
	handler   http.Handler
}

func newApp(usersURL string, client *http.Client) (*app, error) {
	perClient, err := quota.New(quota.Config{Name: "per-client", Rate: 2, Burst: 10})
	if err != nil {
		return nil, err
	}
	users, err := breaker.New(breaker.Config{Name: "users-api", MinCalls: 5, FailureRatio: 0.5, OpenFor: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	metrics := promsluice.NewMetrics()
	if err := metrics.Add(perClient, users); err != nil { // gates, limits, retry policies and pools too
		return nil, err
	}
	call := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := users.Allow()
		if err != nil {
			httpgate.Refuse(w, r, err) // 503 {"error":"BUSY","gate":"users-api","reason":"breaker_open"}, Retry-After
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, usersURL+"/users/"+r.PathValue("id"), nil)
		resp, err := client.Do(req)
		switch {
		case err != nil && r.Context().Err() != nil:
			c.Done(breaker.Ignored) // our client left: it says nothing about users-api
			return
		case err != nil || resp.StatusCode >= 500:
			c.Done(breaker.Failure)
			if err == nil {
				resp.Body.Close()
			}
			http.Error(w, "users-api failed", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		c.Done(breaker.Success)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
	// The quota first: a client over its rate gets 429 and costs users-api nothing.
	h, err := httpgate.Quota(httpgate.QuotaConfig{Limiter: perClient}, call)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /users/{id}", h)
	return &app{perClient: perClient, users: users, metrics: metrics, handler: mux}, nil
}

// serve runs a on cfg's listeners, with /metrics, /healthz and /state on
// the admin one, until ctx ends; then it drains gracefully.
func serve(ctx context.Context, a *app, cfg server.Config) error {
	cfg.Handler, cfg.Metrics = a.handler, a.metrics
	srv, err := server.Listen(ctx, cfg)
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "main listener")
	admin := flag.String("admin", "127.0.0.1:9091", "admin listener: /metrics, /healthz, /state")
	users := flag.String("users", "http://127.0.0.1:8082", "base URL of users-api")
	flag.Parse()
	a, err := newApp(*users, &http.Client{Timeout: 2 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, a, server.Config{Addr: *addr, AdminAddr: *admin}); err != nil {
		log.Fatal(err)
	}
}
