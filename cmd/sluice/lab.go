package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/internal/lab"
	"github.com/sluicehq/sluice/server"
)

// DefaultLabAddr is where `sluice lab` listens: loopback, because
// /release is an unauthenticated control.
const defaultLabAddr = "127.0.0.1:18440"

// runLab runs `sluice lab`, the backpressure lab: GET /work,
// POST /release and GET /state on one listener.
func runLab(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice lab [flags]\n\n"+
		"Run the backpressure lab: GET /work holds one of --max-inflight business slots until POST /release\n"+
		"or --hold-limit (then 504); while every slot is held, GET /work gets 503, Retry-After: 1 and\n"+
		"{\"error\":\"BUSY\"}. GET /state shows active, admitted, rejected and completed.\n"+
		"/release is unauthenticated: keep --addr on loopback. SIGHUP is logged and changes nothing\n"+
		"(the lab has no configuration to re-read); SIGINT or SIGTERM stop it.\n\n"+serverExitStatus)
	addr := fs.String("addr", defaultLabAddr, "listen `host:port` for /work, /release and /state")
	slots := fs.Int("max-inflight", lab.DefaultSlots, "business slots: /work requests that may hold a slot at once")
	hold := fs.Duration("hold-limit", lab.DefaultHoldLimit, "longest a /work holds its slot waiting for /release")
	shutdown := fs.Duration("shutdown-timeout", 5*time.Second, "on SIGINT/SIGTERM, wait this long for responses in progress")
	var lo logOptions
	lo.register(fs)
	deprecate(fs, "slots", "max-inflight")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	hup, stopHangups := hangups() // from here on a SIGHUP is logged, it no longer kills
	defer stopHangups()
	if fs.NArg() > 0 {
		return usageError(e, "lab", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	fail := func(err error) int {
		return usageError(e, "lab", err)
	}
	if err := checkAddr("addr", *addr); err != nil {
		return fail(err)
	}
	if *slots < 1 || *slots > admit.MaxCapacity {
		return fail(fmt.Errorf("--max-inflight %d: want 1 to %d", *slots, admit.MaxCapacity))
	}
	if err := checkDuration("hold-limit", *hold, time.Millisecond, maxTimeout); err != nil {
		return fail(err)
	}
	if err := checkDuration("shutdown-timeout", *shutdown, 0, maxShutdownTimeout); err != nil {
		return fail(err)
	}
	logger, err := lo.logger(e.stderr)
	if err != nil {
		return fail(err)
	}
	l, err := lab.New(lab.Config{Slots: *slots, HoldLimit: *hold, Logger: logger})
	if err != nil {
		return fail(err)
	}
	st := *shutdown
	if st == 0 {
		st = -1
	}
	srv, err := server.Listen(ctx, server.Config{
		Addr:    *addr,
		NoAdmin: true,
		Handler: l.Handler(),
		Gates:   []*admit.Gate{l.Gate()},
		// The lab's own limits are the slots; keep the connection limit
		// out of the way of a curl walkthrough but bounded.
		Conn:            labConnConfig(),
		ShutdownTimeout: st,
		// Held /work requests would otherwise wait out the hold limit.
		OnShutdown: []func(){l.Close},
		Logger:     logger,
	})
	if err != nil {
		return listenFailed(e, "lab", err, addrFlag{"addr", *addr})
	}
	warnLabAddr(logger, *addr)
	logger.Info("lab listening", "addr", srv.Addr().String(), "business_slots", *slots, "hold_limit", *hold)
	return serveUntilDone(ctx, e, "lab", srv, logger, hup, func() {
		logger.Info("SIGHUP: the lab has no configuration to re-read; it goes on as it is")
	})
}

// warnLabAddr warns when the lab listens beyond loopback: /release is an
// unauthenticated control.
func warnLabAddr(logger *slog.Logger, addr string) {
	if !isLoopback(addr) {
		logger.Warn("lab is not on loopback: its /release is unauthenticated, so anyone who can reach this address can release held work",
			"addr", addr)
	}
}

// labConnConfig bounds the lab's connections at 1024, or at what the
// descriptor limit allows when that is less.
func labConnConfig() connlimit.Config {
	cfg := connlimit.Config{MaxConns: 1024}
	if errors.Is(cfg.Validate(), connlimit.ErrNoHeadroom) {
		cfg.MaxConns = 0 // derived from the limit
	}
	return cfg
}
