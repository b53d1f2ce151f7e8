package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/staticfast"
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

// checkDuration refuses a duration outside [lo, hi], naming the flag and
// the accepted range: 1ns timeouts and thousand-hour drains are typos.
func checkDuration(flagName string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return fmt.Errorf("--%s %v: want %v to %v", flagName, d, lo, hi)
	}
	return nil
}

// isLoopback reports whether a listen address binds loopback only. An
// empty host (all interfaces) and names other than localhost are not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Accepted ranges of the frame's flags.
const (
	minTimeout         = 100 * time.Millisecond
	maxTimeout         = 24 * time.Hour
	maxShutdownTimeout = time.Hour
	maxDrainDelay      = 10 * time.Minute
	maxMaxConns        = 1 << 20
	maxMaxStreams      = 1 << 16
	defaultDrainDelay  = 5 * time.Second
)

// serveOptions are the frame's flags; the static handler and the addons
// bring their own.
type serveOptions struct {
	addr, adminAddr   string
	maxConns          int
	idleTimeout       time.Duration
	readHeaderTimeout time.Duration
	sendTimeout       time.Duration
	bodyTimeout       time.Duration
	shutdownTimeout   time.Duration
	drainDelay        time.Duration
	tlsCert, tlsKey   string
	h2c               bool
	maxStreams        int
	log               logOptions
	pprof             bool
	engine            string
	engineSet         bool // --engine (or its twin) was given
}

func (o *serveOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", server.DefaultAddr, "main listener `host:port`")
	fs.StringVar(&o.adminAddr, "admin-addr", server.DefaultAdminAddr, "admin listener `host:port` for /healthz, /metrics and /state; keep it private")
	fs.IntVar(&o.maxConns, "max-conns", 0, "most open connections on the main listener; beyond it a new connection gets a 503 and is closed.\n"+
		"It protects file descriptors, not concurrency (--max-inflight bounds the work): set it well above your\n"+
		"clients' connection pools. 0: the file-descriptor limit minus a reserve; a value that does not fit\n"+
		"the limit is refused, naming the largest that does")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", connlimit.DefaultIdleTimeout, "close keep-alive connections idle this long")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", connlimit.DefaultReadHeaderTimeout, "close connections that take longer than this to send request headers (slowloris)")
	fs.DurationVar(&o.sendTimeout, "send-timeout", connlimit.DefaultSendTimeout, "close a connection whose client takes no bytes of a response for this long (renewed on every write)")
	fs.DurationVar(&o.bodyTimeout, "body-timeout", connlimit.DefaultBodyTimeout, "close a connection whose declared request body does not progress for this long")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "on SIGINT/SIGTERM, wait this long for admitted work before cutting it (0: do not wait);\na second signal cuts it at once")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve the main listener over TLS (1.2+, ALPN h2 and http/1.1) with this PEM certificate `file`;\nre-read when it changes, and at once on SIGHUP (needs --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key `file` for --tls-cert; re-read when it changes")
	fs.BoolVar(&o.h2c, "h2c", false, "also accept cleartext HTTP/2 with prior knowledge on the main listener (sidecars, gRPC behind a TLS terminator)")
	fs.IntVar(&o.maxStreams, "max-concurrent-streams", 0, "most streams one HTTP/2 connection may have open at once, so one connection cannot take every slot\n(0: net/http's default, 100 or more)")
	fs.DurationVar(&o.drainDelay, "drain-delay", defaultDrainDelay, "on SIGINT/SIGTERM, answer /healthz with 503 draining this long before the listener closes,\nso load balancers and readiness probes stop sending (0: close at once)")
	fs.StringVar(&o.engine, "engine", "fast", "HTTP/1.1 front end of the main listener: fast (sluice's own engine: the same answers at a lower\n"+
		"cost per request) or net (net/http); TLS and --h2c are always served by net/http")
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
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	switch o.engine {
	case "fast":
		if o.engineSet && (o.tlsCert != "" || o.h2c) {
			return errors.New("--engine fast serves cleartext HTTP/1.1 only: TLS and --h2c are served by net/http (use --engine net, or leave --engine out)")
		}
	case "net":
	default:
		return fmt.Errorf("--engine %q: want fast or net", o.engine)
	}
	if o.maxStreams < 0 || o.maxStreams > maxMaxStreams {
		return fmt.Errorf("--max-concurrent-streams %d: want 0 (net/http's default) to %d", o.maxStreams, maxMaxStreams)
	}
	if o.maxConns < 0 || o.maxConns > maxMaxConns {
		return fmt.Errorf("--max-conns %d: want 0 (derived from the file-descriptor limit) to %d", o.maxConns, maxMaxConns)
	}
	for _, d := range []struct {
		name   string
		v      time.Duration
		lo, hi time.Duration
	}{
		{"idle-timeout", o.idleTimeout, minTimeout, maxTimeout},
		{"read-header-timeout", o.readHeaderTimeout, minTimeout, maxTimeout},
		{"send-timeout", o.sendTimeout, minTimeout, maxTimeout},
		{"body-timeout", o.bodyTimeout, minTimeout, maxTimeout},
		{"shutdown-timeout", o.shutdownTimeout, 0, maxShutdownTimeout},
		{"drain-delay", o.drainDelay, 0, maxDrainDelay},
	} {
		if err := checkDuration(d.name, d.v, d.lo, d.hi); err != nil {
			return err
		}
	}
	return nil
}

// listenAddrs are the listen addresses and their flags.
func (o *serveOptions) listenAddrs() []addrFlag {
	return []addrFlag{{"addr", o.addr}, {"admin-addr", o.adminAddr}}
}

// serverEngine is the main listener's engine: fast unless asked for net,
// or TLS or h2c need net/http.
func (o *serveOptions) serverEngine() server.Engine {
	if o.engine == "net" || o.tlsCert != "" || o.h2c {
		return server.EngineNet
	}
	return server.EngineFast
}

// markSet records which of the options were given (after parseFlags).
func (o *serveOptions) markSet(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "engine" {
			o.engineSet = true
		}
	})
}

// connConfig is the main listener's connlimit.Config.
func (o *serveOptions) connConfig() connlimit.Config {
	return connlimit.Config{
		MaxConns:          o.maxConns,
		IdleTimeout:       o.idleTimeout,
		ReadHeaderTimeout: o.readHeaderTimeout,
		SendTimeout:       o.sendTimeout,
		BodyTimeout:       o.bodyTimeout,
	}
}

// shutdownTimeout maps the flag (0 = do not wait) to server.Config's
// convention (negative = do not wait).
func (o *serveOptions) serverShutdownTimeout() time.Duration {
	if o.shutdownTimeout == 0 {
		return -1
	}
	return o.shutdownTimeout
}

// minPlausiblePool is the smallest connection pool serve assumes a client
// population keeps open: load tools and proxies commonly hold dozens of
// keep-alive connections each.
const minPlausiblePool = 64

// plausiblePool is the number of connections below which --max-conns
// starts refusing clients the gate would have served: four connections
// per slot or queue place of the gate (cache hits, HEAD and 304 need a
// connection but no slot, and keep-alive pools hold idle connections),
// and at least minPlausiblePool. workers < 0 means no gate.
func plausiblePool(workers int64) int64 {
	if workers < 0 {
		return minPlausiblePool
	}
	return max(minPlausiblePool, 4*workers)
}

// warn logs the configurations that work but are likely mistakes.
func (o *serveOptions) warn(logger *slog.Logger, gateWork int64) {
	if !isLoopback(o.adminAddr) {
		logger.Warn("admin listener is not on loopback: /metrics and /state (internals) are reachable by anyone who can reach this address",
			"admin_addr", o.adminAddr)
	}
	if o.maxConns > 0 {
		if pool := plausiblePool(gateWork); int64(o.maxConns) < pool {
			logger.Warn("--max-conns is below a plausible client pool: connections beyond it are refused before the gate sees them, "+
				"cutting throughput below the gate's capacity; it protects file descriptors, not concurrency",
				"max_conns", o.maxConns, "plausible_pool", pool)
		}
	}
}

// serverExitStatus is the exit status paragraph of the commands that
// serve (serve, proxy, lab, ratelimit).
const serverExitStatus = "Exit status: 0 a clean shutdown; 1 work cut short at shutdown, or a failure while serving;\n" +
	"2 bad flags or configuration; 5 a listen address that cannot be bound (in use, not permitted,\n" +
	"not this host's)."

func usageFor(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, synopsis)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Every flag --some-flag can also be set by the environment variable SLUICE_SOME_FLAG;")
		fmt.Fprintln(w, "the command line wins over the environment.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "flags:")
		printFlags(fs)
	}
}

// serveMain runs `sluice serve`: the static-file handler on the server
// frame until SIGINT/SIGTERM, then a graceful shutdown.
func serveMain(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice serve [flags]\n\n"+
		"Serve static files. Only the expensive work (a disk read) takes a slot of an admission gate;\n"+
		"when the gate is full the answer is 503 with Retry-After. Health, metrics and state are on\n"+
		"the admin listener. SIGHUP re-reads the TLS certificate and key.\n\n"+serverExitStatus)
	var o serveOptions
	o.register(fs)
	static := addStaticFlags(fs)
	quotas := addQuotaFlags(fs, "comma-separated `CIDRs` of proxies whose X-Forwarded-For is believed by quotas keyed on ip")
	adm := addAdmissionFlags(fs) // --limit, --queue-discipline, --priority-header, --class-share
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	hup, stopHangups := hangups() // from here on a SIGHUP re-reads the TLS files, it no longer kills
	defer stopHangups()
	if fs.NArg() > 0 {
		return usageError(e, "serve", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	o.markSet(fs)
	if err := errors.Join(o.validate(), adm.validate(static.queue), quotas.checkCompanions(fs, false)); err != nil {
		return usageError(e, "serve", err)
	}
	logger, err := o.log.logger(e.stderr)
	if err != nil {
		return usageError(e, "serve", err)
	}
	// Refuse a --max-conns that does not fit the descriptor limit before
	// anything is built or bound.
	if err := o.connConfig().Validate(); err != nil {
		return usageError(e, "serve", fmt.Errorf("--max-conns %d: %v", o.maxConns, err))
	}

	// One Metrics is the disk gate's Observer (wait and hold histograms)
	// and the exporter of everything serve builds on /metrics.
	gm := promsluice.NewMetrics()
	lim, err := adm.limitConfig(logger)
	if err != nil {
		return usageError(e, "serve", err)
	}
	disk, gates, collectors, cleanup, err := static.build(logger, gm, lim)
	if err != nil {
		return usageError(e, "serve", err)
	}
	defer cleanup()
	sh := disk // the engine's fast path asks its core directly
	h, err := adm.wire(logger, gm, disk, disk)
	if err != nil {
		return usageError(e, "serve", err)
	}
	o.warn(logger, static.gateWork())
	// The static handler takes and releases its disk slot itself, right
	// around the read, so it needs no per-request holder: Deadline only
	// turns a Request-Timeout header into the request's deadline (so a
	// queued disk read gives up in time) and costs nothing without one.
	mw, err := httpgate.New(httpgate.Config{Logger: logger})
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitFail
	}
	handler, err := quotas.wrap(logger, mw.Deadline(h)) // --quota: 429 before any work
	if err != nil {
		return usageError(e, "serve", err)
	}
	defer quotas.close()
	// The quotas' counters, and their refusals in
	// sluice_admission_rejected_total so that `sluice load --metrics`
	// attributes them like the gate's.
	if err := gm.Add(quotas.metered...); err != nil {
		fmt.Fprintf(e.stderr, "sluice serve: %v\n", err)
		return exitFail
	}

	// On the engine, static's core answers what it can (cache hits, plain
	// cold reads and their refusals) without an *http.Request. With
	// quotas every request goes through the handler chain, so that none
	// passes a quota unspent.
	var fast engine.FastHandler
	if eng := o.serverEngine(); eng == server.EngineFast && len(quotas.quotas) == 0 && sh != nil {
		fast = staticfast.New(sh, staticfast.Config{DeadlineHeader: httpgate.DefaultDeadlineHeader})
	}
	srv, err := server.Listen(ctx, server.Config{
		Engine:               o.serverEngine(),
		Fast:                 fast,
		Addr:                 o.addr,
		AdminAddr:            o.adminAddr,
		Handler:              handler,
		Gates:                gates,
		Limits:               adm.limits(),
		Metrics:              gm,
		Collectors:           collectors,
		StateExtras:          quotas.states,
		Conn:                 o.connConfig(),
		ShutdownTimeout:      o.serverShutdownTimeout(),
		DrainDelay:           o.drainDelay,
		TLSCertFile:          o.tlsCert,
		TLSKeyFile:           o.tlsKey,
		H2C:                  o.h2c,
		MaxConcurrentStreams: o.maxStreams,
		Logger:               logger,
		Pprof:                o.pprof,
	})
	if err != nil {
		return listenFailed(e, "serve", err, o.listenAddrs()...)
	}
	return serveUntilDone(ctx, e, "serve", srv, logger, hup, func() { reloadTLS(srv, logger, "serve") })
}

// hangups subscribes to SIGHUP for the rest of a server command's life,
// from before it binds, so that a SIGHUP during start-up is answered once
// the server runs instead of killing it (the default for SIGHUP). Call
// the returned stop when the command returns.
func hangups() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}

// reloadTLS re-reads the TLS certificate and key on SIGHUP: a pair that
// does not load is logged and the one in service stays.
func reloadTLS(srv *server.Server, logger *slog.Logger, name string) {
	if !srv.TLS() {
		logger.Info("SIGHUP: TLS is off, no certificate to re-read", "command", name)
		return
	}
	if err := srv.ReloadTLS(); err != nil {
		logger.Error("SIGHUP: TLS certificate refused; the one in service stays", "err", err)
		return
	}
	logger.Info("SIGHUP: TLS certificate reloaded")
}

// serveUntilDone serves srv until ctx ends and maps the result to an
// exit code: a clean shutdown is success, work cut short (by the
// shutdown timeout or a second SIGINT/SIGTERM) is a failure.
//
// The first signal ends ctx (see main); from then on a second one aborts
// the drain at once. Its watcher subscribes only after ctx has ended, so
// the first signal is not counted twice.
//
// Each SIGHUP on hup (nil: none) runs onHangup while the server serves,
// one at a time; once the drain has begun it is logged and ignored.
func serveUntilDone(ctx context.Context, e env, name string, srv *server.Server, logger *slog.Logger, hup <-chan os.Signal, onHangup func()) int {
	stop := make(chan struct{})
	watched := make(chan struct{})
	reloads := make(chan struct{})
	go func() {
		defer close(reloads)
		for {
			select {
			case <-hup:
				if ctx.Err() != nil {
					logger.Info("SIGHUP while draining: ignored")
					continue
				}
				onHangup()
			case <-stop:
				return
			}
		}
	}()
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
		case <-stop:
			return
		}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		logger.Info("draining; send SIGINT or SIGTERM again to stop at once")
		select {
		case sig := <-sigs:
			logger.Warn("second signal: stopping at once", "signal", sig.String())
			srv.Abort()
		case <-stop:
		}
	}()
	err := srv.Serve(ctx)
	close(stop)
	<-watched
	<-reloads // a reload under way finishes before what it uses is closed
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice %s: %v\n", name, err)
		return exitFail
	}
	return exitOK
}
