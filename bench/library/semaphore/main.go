// Command semaphore is the service of docs/library.md written without
// sluice: golang.org/x/sync/semaphore for the 8 slots, a hand-written
// bounded queue, 503s, reasons, Retry-After and Prometheus metrics,
// x/net/netutil for the connection guard, and net/http's Shutdown. It
// exists to be compared, line for line, with examples/service.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"
)

const (
	capacity   = 8
	maxWaiters = 16
	maxWait    = 100 * time.Millisecond
)

// app is the service: its handler, its registry, and the state the test
// looks at.
type app struct {
	sem      *semaphore.Weighted
	waiting  atomic.Int64
	draining atomic.Bool
	registry *prometheus.Registry
	handler  http.Handler
}

func newApp(cache map[string]string, query func(ctx context.Context, id string) (string, error)) *app {
	a := &app{sem: semaphore.NewWeighted(capacity), registry: prometheus.NewRegistry()}
	admitted := prometheus.NewCounter(prometheus.CounterOpts{Name: "db_admitted_total", Help: "Queries that got a slot."})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "db_rejected_total", Help: "Queries refused, by reason."}, []string{"reason"})
	completed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "db_completed_total", Help: "Queries that ended, by outcome."}, []string{"outcome"})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "db_wait_seconds", Help: "Time queued for a slot.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)})
	hold := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "db_hold_seconds", Help: "Time a slot was held.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17)})
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "db_waiting", Help: "Queries queued."}, func() float64 { return float64(a.waiting.Load()) })
	a.registry.MustRegister(admitted, rejected, completed, wait, hold, queued, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	refuse := func(w http.ResponseWriter, reason string) {
		rejected.WithLabelValues(reason).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":"BUSY","gate":"db","reason":%q}`+"\n", reason)
	}
	// acquire takes a slot: at once if one is free, else in a queue of at
	// most maxWaiters for at most maxWait. It returns the refusal reason.
	acquire := func(ctx context.Context) string {
		if a.sem.TryAcquire(1) {
			return ""
		}
		if a.waiting.Add(1) > maxWaiters {
			a.waiting.Add(-1)
			return "queue_full"
		}
		defer a.waiting.Add(-1)
		start := time.Now()
		waitCtx, cancel := context.WithTimeout(ctx, maxWait)
		defer cancel()
		err := a.sem.Acquire(waitCtx, 1)
		wait.Observe(time.Since(start).Seconds())
		switch {
		case err == nil:
			return ""
		case ctx.Err() != nil:
			return "canceled"
		}
		return "wait_timeout"
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /item/{id}", func(w http.ResponseWriter, r *http.Request) {
		if v, ok := cache[r.PathValue("id")]; ok {
			io.WriteString(w, v) // a cache hit costs nothing: no slot
			return
		}
		if reason := acquire(r.Context()); reason != "" {
			refuse(w, reason)
			return
		}
		admitted.Inc()
		start := time.Now()
		defer func() { hold.Observe(time.Since(start).Seconds()); a.sem.Release(1) }()
		v, err := query(r.Context(), r.PathValue("id"))
		if err != nil {
			completed.WithLabelValues("error").Inc()
			http.Error(w, "query failed", http.StatusInternalServerError)
			return
		}
		completed.WithLabelValues("ok").Inc()
		io.WriteString(w, v)
	})
	a.handler = mux
	return a
}

// serve runs a on l (at most 1024 connections) and /metrics and /healthz
// on admin until ctx ends; then it drains gracefully.
func serve(ctx context.Context, a *app, l, admin net.Listener) error {
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	adminMux := http.NewServeMux()
	adminMux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if a.draining.Load() {
			http.Error(w, `{"status":"draining"}`, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"status":"ok"}`)
	})
	adminSrv := &http.Server{Handler: adminMux, ReadHeaderTimeout: 5 * time.Second}
	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(netutil.LimitListener(l, 1024)) }()
	go func() { errs <- adminSrv.Serve(admin) }()
	select {
	case err := <-errs:
		srv.Close()
		adminSrv.Close()
		return err
	case <-ctx.Done():
	}
	a.draining.Store(true)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	adminSrv.Close()
	return err
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "main listener")
	adminAddr := flag.String("admin", "127.0.0.1:9090", "admin listener: /metrics, /healthz")
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
	a := newApp(map[string]string{"hot": "cached\n"}, query)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	admin, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		log.Fatal(err)
	}
	if err := serve(ctx, a, l, admin); err != nil {
		log.Fatal(err)
	}
}
