package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/server"
)

// logOptions are the logging flags every server subcommand shares.
type logOptions struct {
	level, format string
}

func (o *logOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.format, "log-format", "text", "log format: text or json")
}

// logger builds the slog.Logger the flags ask for, writing to w.
func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", o.format)
}

// checkAddr validates a host:port listen address.
func checkAddr(flagName, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--%s %q: want host:port, e.g. 127.0.0.1:8080 (%v)", flagName, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--%s %q: port %q is not a number from 0 to 65535", flagName, addr, port)
	}
	if host != "" && net.ParseIP(host) == nil && strings.ContainsAny(host, " /") {
		return fmt.Errorf("--%s %q: bad host %q", flagName, addr, host)
	}
	return nil
}

func checkPositive(flagName string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--%s %v: must be greater than zero", flagName, d)
	}
	return nil
}

// serveOptions are the frame's flags; the static handler brings its own.
type serveOptions struct {
	addr, adminAddr   string
	maxConns          int
	idleTimeout       time.Duration
	readHeaderTimeout time.Duration
	shutdownTimeout   time.Duration
	log               logOptions
	pprof             bool
}

func (o *serveOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", server.DefaultAddr, "main listener `host:port`")
	fs.StringVar(&o.adminAddr, "admin-addr", server.DefaultAdminAddr, "admin listener `host:port` for /healthz, /metrics and /state; keep it private")
	fs.IntVar(&o.maxConns, "max-conns", 0, "most open connections on the main listener; beyond it a new connection gets a 503 and is closed (0: the file-descriptor limit minus a reserve)")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", connlimit.DefaultIdleTimeout, "close keep-alive connections idle this long")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", connlimit.DefaultReadHeaderTimeout, "close connections that take longer than this to send request headers (slowloris)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "on SIGINT/SIGTERM, wait this long for admitted work before cutting it (0: do not wait)")
	o.log.register(fs)
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go runtime profiles at /debug/pprof/ on the admin listener (loopback only)")
}

func (o *serveOptions) validate() error {
	if err := checkAddr("addr", o.addr); err != nil {
		return err
	}
	if err := checkAddr("admin-addr", o.adminAddr); err != nil {
		return err
	}
	if o.addr == o.adminAddr && !strings.HasSuffix(o.addr, ":0") {
		return fmt.Errorf("--addr and --admin-addr are both %q; the admin listener needs its own port", o.addr)
	}
	if o.maxConns < 0 {
		return fmt.Errorf("--max-conns %d: must be 0 (derived) or more", o.maxConns)
	}
	if err := checkPositive("idle-timeout", o.idleTimeout); err != nil {
		return err
	}
	if err := checkPositive("read-header-timeout", o.readHeaderTimeout); err != nil {
		return err
	}
	if o.shutdownTimeout < 0 {
		return fmt.Errorf("--shutdown-timeout %v: must be 0 or more", o.shutdownTimeout)
	}
	return nil
}

// shutdownTimeout maps the flag (0 = do not wait) to server.Config's
// convention (negative = do not wait).
func (o *serveOptions) serverShutdownTimeout() time.Duration {
	if o.shutdownTimeout == 0 {
		return -1
	}
	return o.shutdownTimeout
}

func usageFor(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, synopsis)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Every flag --some-flag can also be set by the environment variable SLUICE_SOME_FLAG;")
		fmt.Fprintln(w, "the command line wins over the environment.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "flags:")
		fs.PrintDefaults()
	}
}

// runServe runs `sluice serve`: the static-file handler on the server
// frame until SIGINT/SIGTERM, then a graceful shutdown.
func runServe(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice serve [flags]\n\n"+
		"Serve static files. Only the expensive work (a disk read) takes a slot of an admission gate;\n"+
		"when the gate is full the answer is 503 with Retry-After. Health, metrics and state are on\n"+
		"the admin listener.")
	var o serveOptions
	o.register(fs)
	static := addStaticFlags(fs)
	quotas := addQuotaFlags(fs)
	adm := addAdmissionFlags(fs) // --limit, --queue-discipline, --priority-header, --class-share
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "sluice serve: unexpected argument %q (see --help)\n", fs.Arg(0))
		return exitUsage
	}
	if err := errors.Join(o.validate(), adm.validate(static.queue)); err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitUsage
	}
	logger, err := o.log.logger(e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitUsage
	}

	// One GateMetrics is both the disk gate's Observer (wait and hold
	// histograms) and its exporter on /metrics.
	gm := promsluice.NewGateMetrics()
	obs, err := adm.observer(gm, logger)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitUsage
	}
	h, gates, collectors, cleanup, err := static.build(logger, obs)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitUsage
	}
	defer cleanup()
	if h, collectors, err = adm.wire(logger, gates[0], h, collectors); err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitUsage
	}
	// The static handler takes and releases its disk slot itself, right
	// around the read, so it needs no per-request holder: Deadline only
	// turns a Request-Timeout header into the request's deadline (so a
	// queued disk read gives up in time) and costs nothing without one.
	mw, err := httpgate.New(httpgate.Config{Logger: logger})
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitFail
	}
	handler, collectors, err := quotas.wrap(logger, mw.Deadline(h), collectors) // --quota: 429 before any work
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitUsage
	}
	defer quotas.close()

	srv, err := server.Listen(ctx, server.Config{
		Addr:        o.addr,
		AdminAddr:   o.adminAddr,
		Handler:     handler,
		Gates:       gates,
		Limits:      adm.limits(),
		GateMetrics: gm,
		Collectors:  collectors,
		Conn: connlimit.Config{
			MaxConns:          o.maxConns,
			IdleTimeout:       o.idleTimeout,
			ReadHeaderTimeout: o.readHeaderTimeout,
		},
		ShutdownTimeout: o.serverShutdownTimeout(),
		Logger:          logger,
		Pprof:           o.pprof,
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		if errors.Is(err, connlimit.ErrInvalidConfig) || errors.Is(err, server.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFail
	}
	return serveUntilDone(ctx, e, "serve", srv)
}

// serveUntilDone serves srv until ctx ends and maps the result to an
// exit code: a clean shutdown is success, work cut short is a failure.
func serveUntilDone(ctx context.Context, e env, name string, srv *server.Server) int {
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(e.stderr, "sluice %s: %v\n", name, err)
		return exitFail
	}
	return exitOK
}
