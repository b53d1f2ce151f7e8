// Command server is the benchmark server for bench/scripts/refusal-cost.sh:
// one sluice server frame (connlimit listener, admin /metrics) with three
// routes, so a refusal and the cheapest 200 are measured on the same
// server in the same run.
//
//	/ok      the cheapest 200: a two-byte body, no middleware
//	/gated   a 200 through httpgate.Guard on a gate with room
//	/refuse  httpgate.Guard on a full gate: 503 + Retry-After + JSON
//	/canned  the same 503 bytes written by httpgate.WriteRefusal, no gate
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18451", "main listener")
	adminAddr := flag.String("admin-addr", "127.0.0.1:18452", "admin listener (/metrics)")
	flag.Parse()
	if err := run(*addr, *adminAddr); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run(addr, adminAddr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gm := promsluice.NewMetrics()
	roomy, err := admit.New(admit.Config{Name: "roomy", Capacity: admit.MaxCapacity, Observer: gm})
	if err != nil {
		return err
	}
	full, err := admit.New(admit.Config{Name: "full", Capacity: 1, Observer: gm})
	if err != nil {
		return err
	}
	held, err := full.TryAcquire() // the gate stays full for the whole run
	if err != nil {
		return err
	}
	defer held.Done(admit.OutcomeOK)
	mw, err := httpgate.New(httpgate.Config{})
	if err != nil {
		return err
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain"}
		_, _ = w.Write([]byte("ok"))
	})
	mux := http.NewServeMux()
	mux.Handle("GET /ok", ok)
	mux.Handle("GET /gated", mw.Guard(roomy, ok))
	mux.Handle("GET /refuse", mw.Guard(full, ok))
	// The refusal's bytes without the gate or the middleware: what the
	// answer itself costs, to tell it from what deciding costs.
	canned := admit.NewRejectedError("full", "default", admit.ReasonFull, 0, 0, 0)
	mux.HandleFunc("GET /canned", func(w http.ResponseWriter, r *http.Request) { httpgate.WriteRefusal(w, r, canned) })
	srv, err := server.Listen(ctx, server.Config{
		Addr: addr, AdminAddr: adminAddr, Handler: mux,
		Gates: []*admit.Gate{roomy, full}, Metrics: gm,
		Conn:   connlimit.Config{MaxConns: 4096},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}
