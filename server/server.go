package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
)

// Defaults used for zero Config fields.
const (
	DefaultAddr            = "127.0.0.1:8080"
	DefaultAdminAddr       = "127.0.0.1:9090"
	DefaultShutdownTimeout = 10 * time.Second
	// adminShutdownTimeout bounds the admin listener's own drain; its
	// requests are cheap.
	adminShutdownTimeout = time.Second
	// adminHeaderTimeout protects the admin listener from slow clients.
	adminHeaderTimeout = 5 * time.Second
)

// ErrInvalidConfig is wrapped by every error Listen returns for a bad
// Config.
var ErrInvalidConfig = errors.New("server: invalid config")

// Config configures a Server. The zero Config is valid: a main listener
// on 127.0.0.1:8080 answering 404, an admin listener on 127.0.0.1:9090,
// connection limits derived by connlimit, a 10 s shutdown grace.
type Config struct {
	// Addr is the main listener's TCP address. Empty means DefaultAddr.
	// Ignored when Listener is set.
	Addr string

	// Listener, if not nil, is used instead of listening on Addr (tests,
	// socket activation). It is wrapped in a connlimit.Listener and
	// closed by the Server.
	Listener net.Listener

	// AdminAddr is the admin listener's TCP address. Empty means
	// DefaultAdminAddr. Ignored when AdminListener is set or NoAdmin.
	AdminAddr string

	// AdminListener, if not nil, is used instead of listening on
	// AdminAddr. It is closed by the Server.
	AdminListener net.Listener

	// NoAdmin turns the admin listener off (the lab serves its own
	// /state on the main listener).
	NoAdmin bool

	// Pprof mounts the Go runtime profiles (net/http/pprof) under
	// /debug/pprof/ on the admin listener, only when it listens on
	// loopback (or a Unix socket); elsewhere it is ignored with a warning.
	// False: no profiles.
	Pprof bool

	// Handler serves the main listener. Nil means http.NotFoundHandler.
	Handler http.Handler

	// Main, if not nil, serves the main listener instead of an
	// http.Server: a *grpc.Server, say. Handler, the TLS files, H2C and
	// MaxConcurrentStreams are then ignored, and connlimit bounds only
	// the connection count. On shutdown, after the drain delay, Main's
	// GracefulStop is called, and Stop if ShutdownTimeout passes first.
	Main MainServer

	// Ready, if not nil, is asked by /readyz on every probe: an error
	// makes it answer 503 with the error's text (a configuration that is
	// not loaded, say). Nil means ready unless draining.
	Ready func() error

	// Engine is the main listener's HTTP/1.1 front end: EngineNet (the
	// zero value) is net/http; EngineFast is sluice's own engine, which
	// serves the same Handler (through a net/http bridge) at a lower cost
	// per request, and answers what Fast can without building an
	// *http.Request. TLS and H2C need EngineNet: asking for EngineFast
	// with either is an ErrInvalidConfig.
	Engine Engine

	// Fast is the engine's fast path: the servers' shared core answering
	// the common requests (a cache hit, a refusal) directly. Ignored with
	// EngineNet; nil means every request goes through Handler.
	Fast engine.FastHandler

	// FastBodies makes the engine ask Fast also about requests with a
	// body, an Expect: 100-continue or an upgrade (engine.Config.FastBodies):
	// a proxy decides those too. Ignored with EngineNet.
	FastBodies bool

	// Gates are the handler's gates, reported by /state and /metrics and
	// closed on shutdown (Server.SetGates replaces them while serving).
	Gates []*admit.Gate

	// Limits are adaptive limits moving the gates' capacities, reported
	// by /state (Add them to Metrics too for /metrics).
	Limits []*limit.Adaptive

	// Metrics exports the gates, and whatever else was added to it (see
	// promsluice.Metrics.Add). Pass the one the gates were built with
	// (its NewGate, or it as their Observer) to get the wait and hold
	// histograms. Nil means a new one (the gates' counters only).
	Metrics *promsluice.Metrics

	// Collectors are registered on the admin /metrics beside the gate and
	// connection metrics (a cache's counters, for example).
	Collectors []prometheus.Collector

	// StateExtras are more sections of /state, by name ("quota.per-client"):
	// each function is called on every /state request and its result is
	// encoded as JSON under "extra". Nil means none.
	StateExtras map[string]func() any

	// Conn configures the main listener's connection limit and the
	// http.Server's ReadHeaderTimeout and IdleTimeout (see connlimit).
	// Conn.Logger defaults to Logger.
	Conn connlimit.Config

	// TLSCertFile and TLSKeyFile, both set, serve the main listener over
	// TLS (1.2 and up, Go's defaults) with ALPN h2 and http/1.1. The
	// files are read at Listen (a bad pair is an ErrInvalidConfig) and
	// again when they change, at most once a second on a handshake, so a
	// renewed certificate is served without a restart; a changed pair that
	// does not load keeps the previous one and is logged. Server.ReloadTLS
	// re-reads them at once (a SIGHUP). Over-limit TLS
	// connections are refused with a TLS alert (internal_error) unless
	// Conn.BusyReply says otherwise. Empty means clear text.
	TLSCertFile, TLSKeyFile string

	// H2C also accepts cleartext HTTP/2 with prior knowledge on the main
	// listener (sidecars, gRPC behind a TLS terminator), beside HTTP/1.1.
	// False means HTTP/1.1 only in clear text.
	H2C bool

	// MaxConcurrentStreams bounds the streams one HTTP/2 connection may
	// have open at once, so that one connection cannot take every slot
	// of a gate. Zero means net/http's default (at least 100); negative is
	// an error.
	MaxConcurrentStreams int

	// ShutdownTimeout bounds how long shutdown waits for admitted work.
	// Zero means DefaultShutdownTimeout; negative means no wait:
	// connections are closed at once.
	ShutdownTimeout time.Duration

	// DrainDelay is how long shutdown keeps serving normally after
	// /healthz starts answering 503 draining, before the main listener
	// closes: the time a load balancer or a Kubernetes readiness probe
	// needs to notice and stop sending new connections. During it
	// keep-alives are turned off, so clients move to fresh connections.
	// Zero or negative means none: the listener closes at once.
	DrainDelay time.Duration

	// OnShutdown functions are called, in order, when shutdown begins,
	// before the gates close (the lab ends its held work here).
	OnShutdown []func()

	// CloseHijacked, if set, closes the connections the handler took over
	// (Hijack: upgrade tunnels), which http.Server.Shutdown neither waits
	// for nor closes, and returns how many it closed. Shutdown calls it
	// once the requests have drained or been cut; a nonzero count means
	// the shutdown cut work, so it is not reported clean. Nil: none.
	CloseHijacked func() int

	// Logger receives start, shutdown and cut-short records. Nil means
	// silent.
	Logger *slog.Logger
}

// MainServer is a server of the main listener other than net/http's:
// *grpc.Server implements it. Serve must return once GracefulStop or Stop
// has been called; GracefulStop waits for calls in progress, Stop cuts
// them.
type MainServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// Engine names an HTTP/1.1 front end for the main listener.
type Engine uint8

const (
	// EngineNet serves the main listener with net/http (HTTP/1.1, and
	// HTTP/2 over TLS or h2c).
	EngineNet Engine = iota
	// EngineFast serves cleartext HTTP/1.1 with sluice's own engine.
	EngineFast
)

// String returns "net" or "fast".
func (e Engine) String() string {
	switch e {
	case EngineNet:
		return "net"
	case EngineFast:
		return "fast"
	}
	return fmt.Sprintf("engine(%d)", uint8(e))
}

// ParseEngine parses "net" or "fast".
func ParseEngine(s string) (Engine, error) {
	switch s {
	case "net":
		return EngineNet, nil
	case "fast":
		return EngineFast, nil
	}
	return 0, fmt.Errorf("%w: engine %q: want net or fast", ErrInvalidConfig, s)
}

// mainServer is what the frame needs of the main listener's server:
// *http.Server and *engine.Server both have it.
type mainServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
	SetKeepAlivesEnabled(bool)
}

// A Server is a main listener and an admin listener, bound by Listen and
// served by Serve.
type Server struct {
	main     *connlimit.Listener
	serveOn  net.Listener // main, or a TLS listener over it
	tls, h2c bool
	engine   Engine
	admin    net.Listener // nil with NoAdmin
	mainSrv  mainServer   // nil with Config.Main
	custom   MainServer
	ready    func() error
	adminSrv *http.Server
	registry *prometheus.Registry
	gm       *promsluice.Metrics
	certs    *certReloader // nil in clear text
	gatesMu  sync.Mutex    // serialises SetGates
	gates    atomic.Pointer[[]*admit.Gate]
	limits   []*limit.Adaptive
	extras   map[string]func() any
	timeout  time.Duration
	hooks    []func()
	hijacked func() int
	logger   *slog.Logger
	delay    time.Duration
	draining atomic.Bool
	served   atomic.Bool

	abortOnce sync.Once
	abort     chan struct{} // closed by Abort
}

// CutShortError is returned by Serve when the shutdown timeout passed
// with work still in progress.
type CutShortError struct {
	// Aborted is true when Abort ended the shutdown (a second signal),
	// false when the timeout passed.
	Aborted bool
	Timeout time.Duration
	// Inflight is the number of slots still held per gate name.
	Inflight map[string]int64
	// OpenConns is the number of main-listener connections still open.
	OpenConns int
}

func (e *CutShortError) Error() string {
	var parts []string
	for g, n := range e.Inflight {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", g, n))
		}
	}
	why := fmt.Sprintf("shutdown timeout %v passed", e.Timeout)
	if e.Aborted {
		why = "shutdown aborted"
	}
	return fmt.Sprintf("server: %s: %d connections cut, slots still held: [%s]",
		why, e.OpenConns, strings.Join(parts, " "))
}

// Listen validates cfg and binds both listeners; Serve starts serving.
// On error nothing stays bound.
func Listen(ctx context.Context, cfg Config) (s *Server, err error) {
	if cfg.Conn.Logger == nil {
		cfg.Conn.Logger = cfg.Logger
	}
	timeout := cfg.ShutdownTimeout
	if timeout == 0 {
		timeout = DefaultShutdownTimeout
	}
	for i, g := range cfg.Gates {
		if g == nil {
			return nil, fmt.Errorf("%w: Gates[%d] is nil", ErrInvalidConfig, i)
		}
	}
	var cleanup []func() error
	defer func() {
		if err != nil {
			for _, c := range cleanup {
				_ = c()
			}
		}
	}()

	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, fmt.Errorf("%w: TLS needs both a certificate file and a key file", ErrInvalidConfig)
	}
	switch {
	case cfg.Main != nil && cfg.TLSCertFile != "":
		return nil, fmt.Errorf("%w: TLS files are for the http.Server; a Main server brings its own credentials", ErrInvalidConfig)
	case cfg.Engine != EngineNet && cfg.Engine != EngineFast:
		return nil, fmt.Errorf("%w: unknown %v", ErrInvalidConfig, cfg.Engine)
	case cfg.Engine == EngineFast && cfg.TLSCertFile != "":
		return nil, fmt.Errorf("%w: TLS is served by net/http only (engine net)", ErrInvalidConfig)
	case cfg.Engine == EngineFast && cfg.H2C:
		return nil, fmt.Errorf("%w: h2c is served by net/http only (engine net)", ErrInvalidConfig)
	}
	if cfg.MaxConcurrentStreams < 0 {
		return nil, fmt.Errorf("%w: MaxConcurrentStreams %d is negative", ErrInvalidConfig, cfg.MaxConcurrentStreams)
	}
	var certs *certReloader
	if cfg.TLSCertFile != "" {
		if certs, err = newCertReloader(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Logger); err != nil {
			return nil, err
		}
		if cfg.Conn.BusyReply == nil {
			cfg.Conn.BusyReply = tlsAlertInternalError
		}
	}
	var lc net.ListenConfig
	inner := cfg.Listener
	if inner == nil {
		addr := cmp(cfg.Addr, DefaultAddr)
		if inner, err = lc.Listen(ctx, "tcp", addr); err != nil {
			return nil, fmt.Errorf("server: main listener: %w", err)
		}
	}
	cleanup = append(cleanup, inner.Close)
	main, err := connlimit.New(inner, cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("server: main listener: %w", err)
	}

	s = &Server{
		main:    main,
		custom:  cfg.Main,
		ready:   cfg.Ready,
		certs:   certs,
		limits:  cfg.Limits,
		extras:  cfg.StateExtras,
		timeout: timeout,
		delay:   max(cfg.DrainDelay, 0),
		hooks:   cfg.OnShutdown,
		logger:  cfg.Logger,
		abort:   make(chan struct{}),
	}
	s.hijacked = cfg.CloseHijacked
	handler := cfg.Handler
	if handler == nil {
		handler = http.NotFoundHandler()
	}
	s.serveOn, s.engine = main, cfg.Engine
	switch {
	case cfg.Main != nil:
	case cfg.Engine == EngineFast:
		t := main.Timeouts()
		s.mainSrv = engine.New(engine.Config{
			Handler:           handler,
			Fast:              cfg.Fast,
			FastBodies:        cfg.FastBodies,
			ReadHeaderTimeout: t.ReadHeader,
			IdleTimeout:       t.Idle,
			SendTimeout:       t.Send,
			BodyTimeout:       t.Body,
			ConnState:         main.ConnState,
			ErrorLog:          slogErrorLog(cfg.Logger),
		})
	default:
		hs := &http.Server{Handler: handler, ErrorLog: slogErrorLog(cfg.Logger)}
		main.ConfigureServer(hs)
		protocols := new(http.Protocols)
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(certs != nil)
		protocols.SetUnencryptedHTTP2(cfg.H2C)
		hs.Protocols = protocols
		hs.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: cfg.MaxConcurrentStreams}
		s.tls, s.h2c = certs != nil, cfg.H2C
		if certs != nil {
			hs.TLSConfig = certs.tlsConfig(true)
			s.serveOn = tls.NewListener(main, hs.TLSConfig)
		}
		s.mainSrv = hs
	}

	s.registry = prometheus.NewRegistry()
	gm := cfg.Metrics
	if gm == nil {
		gm = promsluice.NewMetrics()
	}
	s.gm = gm
	gates := append([]*admit.Gate(nil), cfg.Gates...)
	s.gates.Store(&gates)
	for _, g := range gates {
		if err := gm.Add(g); err != nil {
			return nil, fmt.Errorf("%w: Gates: %v", ErrInvalidConfig, err)
		}
	}
	if err := s.registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	extra := append([]prometheus.Collector{collectors.NewGoCollector(), gm, promsluice.NewConnMetrics(main), timeoutMetrics(main)}, cfg.Collectors...)
	for _, c := range extra {
		if err := s.registry.Register(c); err != nil {
			return nil, fmt.Errorf("server: metrics: %w", err)
		}
	}

	if !cfg.NoAdmin {
		admin := cfg.AdminListener
		if admin == nil {
			addr := cmp(cfg.AdminAddr, DefaultAdminAddr)
			if admin, err = lc.Listen(ctx, "tcp", addr); err != nil {
				return nil, fmt.Errorf("server: admin listener: %w", err)
			}
		}
		cleanup = append(cleanup, admin.Close)
		s.admin = admin
		s.adminSrv = &http.Server{
			Handler:           s.withPprof(s.adminHandler(), cfg.Pprof, admin.Addr()),
			ReadHeaderTimeout: adminHeaderTimeout,
			IdleTimeout:       time.Minute,
			ErrorLog:          slogErrorLog(cfg.Logger),
		}
	}
	return s, nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Addr returns the main listener's address.
func (s *Server) Addr() net.Addr { return s.main.Addr() }

// AdminAddr returns the admin listener's address, or nil with NoAdmin.
func (s *Server) AdminAddr() net.Addr {
	if s.admin == nil {
		return nil
	}
	return s.admin.Addr()
}

// Registry returns the admin listener's Prometheus registry, for callers
// that export more.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Gates returns the gates /state and /metrics report and shutdown closes:
// Config.Gates, or the last SetGates.
func (s *Server) Gates() []*admit.Gate { return *s.gates.Load() }

// SetGates replaces the gates the server reports and closes on shutdown,
// for a handler whose gates change while it serves (a proxy's routes after
// a reload): gates no longer listed leave /state and /metrics (they are
// not closed: work they admitted finishes, and a handler that still holds
// one may still use it), new ones join them. Safe for concurrent use. A
// gate added after shutdown has begun is not closed by it.
func (s *Server) SetGates(gates []*admit.Gate) error {
	for i, g := range gates {
		if g == nil {
			return fmt.Errorf("%w: gates[%d] is nil", ErrInvalidConfig, i)
		}
	}
	s.gatesMu.Lock()
	defer s.gatesMu.Unlock()
	old := s.Gates()
	for _, g := range old {
		if !slices.Contains(gates, g) {
			if err := s.gm.Remove(g); err != nil {
				return err
			}
		}
	}
	// After the removals, so that a gate that takes a retired one's name
	// does not clash with it.
	for _, g := range gates {
		if !slices.Contains(old, g) {
			if err := s.gm.Add(g); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
			}
		}
	}
	gates = append([]*admit.Gate(nil), gates...)
	s.gates.Store(&gates)
	return nil
}

// ReloadTLS re-reads the TLS certificate and key files at once, rather
// than at the next handshake at least a second after they changed: a
// SIGHUP after a rotation. A pair that does not load leaves the previous
// one in service and is returned as the error. In clear text it does
// nothing and returns nil.
func (s *Server) ReloadTLS() error {
	if s.certs == nil {
		return nil
	}
	return s.certs.reloadNow()
}

// TLS reports whether the main listener serves TLS.
func (s *Server) TLS() bool { return s.tls }

// Draining reports whether shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

// Serve serves both listeners until ctx ends, then shuts down as the
// package documentation describes. It returns nil after a clean
// shutdown, a *CutShortError when the shutdown timeout cut work short, or
// the error that stopped a listener. Serve may be called once.
func (s *Server) Serve(ctx context.Context) error {
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("server: Serve called twice")
	}
	errc := make(chan error, 2)
	go func() {
		if s.custom != nil {
			errc <- s.custom.Serve(s.serveOn)
			return
		}
		errc <- s.mainSrv.Serve(s.serveOn)
	}()
	running := 1
	if s.adminSrv != nil {
		running++
		go func() { errc <- s.adminSrv.Serve(s.admin) }()
	}
	adminAddr := "off"
	if a := s.AdminAddr(); a != nil {
		adminAddr = a.String()
	}
	s.log(slog.LevelInfo, "serving", slog.String("addr", s.Addr().String()), slog.String("admin_addr", adminAddr),
		slog.Int("max_conns", s.main.MaxConns()), slog.Int("gates", len(s.Gates())), slog.Bool("tls", s.tls), slog.Bool("h2c", s.h2c), slog.String("engine", s.engine.String()))

	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		running--
		if err == nil {
			err = errors.New("main server stopped")
		}
		serveErr = fmt.Errorf("server: %w", err)
		s.log(slog.LevelError, "listener failed; shutting down", slog.Any("err", err))
	}
	err := s.shutdown()
	for range running {
		<-errc // http.ErrServerClosed from each, after Shutdown or Close
	}
	return errors.Join(serveErr, err)
}

// Abort ends a shutdown in progress at once: the drain delay and the
// wait for admitted work are cut short, every connection is closed, and
// Serve returns a *CutShortError with Aborted set, after logging what was
// cut. Called before shutdown begins, it makes the shutdown skip both
// waits. It does not itself start a shutdown (end Serve's context for
// that). Safe to call more than once and from any goroutine.
func (s *Server) Abort() {
	s.abortOnce.Do(func() { close(s.abort) })
}

func (s *Server) aborted() bool {
	select {
	case <-s.abort:
		return true
	default:
		return false
	}
}

func (s *Server) shutdown() error {
	if s.delay > 0 && s.mainSrv != nil {
		// Before the probes say draining, so that a client that saw
		// them and sends again is told to reconnect.
		s.mainSrv.SetKeepAlivesEnabled(false)
	}
	s.draining.Store(true)
	s.log(slog.LevelInfo, "shutting down", slog.Duration("drain_delay", s.delay), slog.Duration("timeout", s.timeout))
	if s.delay > 0 {
		// Lame duck: /healthz says draining, the listener still accepts,
		// responses ask clients to reconnect.
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-s.abort:
		}
		t.Stop()
	}
	for _, f := range s.hooks {
		f()
	}
	var cut error
	if s.timeout < 0 || s.aborted() {
		cut = s.cutShort()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		done := make(chan error, 1)
		go func() { done <- s.shutdownMain(ctx) }()
		// Refuse queued work now rather than let it wait out the drain.
		for _, g := range s.Gates() {
			g.Close()
		}
		var err error
		select {
		case err = <-done:
		case <-s.abort:
			cancel()
			err = <-done
		}
		if err != nil {
			cut = s.cutShort()
		}
		cancel()
	}
	for _, g := range s.Gates() {
		g.Close() // also when the wait was skipped
	}
	cutHijacked := 0
	if s.hijacked != nil {
		cutHijacked = s.hijacked()
	}
	if s.adminSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
		if s.aborted() {
			cancel()
		}
		if err := s.adminSrv.Shutdown(ctx); err != nil {
			_ = s.adminSrv.Close()
		}
		cancel()
	}
	switch {
	case cut == nil && cutHijacked == 0:
		s.log(slog.LevelInfo, "shut down cleanly")
	case cut == nil:
		s.log(slog.LevelWarn, "shut down; cut connections the handler had taken over", slog.Int("hijacked", cutHijacked))
	}
	return cut
}

// cutShort records what is still running, then closes every connection.
// It returns nil if nothing was.
func (s *Server) cutShort() error {
	e := &CutShortError{Aborted: s.aborted(), Timeout: max(s.timeout, 0), Inflight: map[string]int64{}, OpenConns: s.main.Stats().Open}
	args := []any{slog.Duration("timeout", e.Timeout), slog.Int("open_conns", e.OpenConns)}
	busy := e.OpenConns > 0
	for _, g := range s.Gates() {
		st := g.Stats()
		e.Inflight[st.Gate] = st.Inflight
		busy = busy || st.Inflight > 0
		args = append(args, slog.Group("gate_"+st.Gate, slog.Int64("inflight", st.Inflight), slog.Int64("waiting", st.Waiting)))
	}
	s.closeMain()
	if !busy {
		return nil
	}
	msg := "shutdown timeout passed; cut work short"
	if e.Aborted {
		msg = "shutdown aborted; cut work short"
	}
	s.log(slog.LevelWarn, msg, args...)
	return e
}

// shutdownMain stops the main server gracefully, or returns ctx's error
// when ctx ends first.
func (s *Server) shutdownMain(ctx context.Context) error {
	if s.custom == nil {
		return s.mainSrv.Shutdown(ctx)
	}
	done := make(chan struct{})
	go func() {
		s.custom.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeMain closes the main server's connections at once.
func (s *Server) closeMain() {
	if s.custom != nil {
		s.custom.Stop()
		return
	}
	_ = s.mainSrv.Close()
}

// Close closes both listeners of a Server that was never served. After
// Serve it does nothing.
func (s *Server) Close() error {
	if !s.served.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	errs = append(errs, s.main.Close())
	if s.admin != nil {
		errs = append(errs, s.admin.Close())
	}
	return errors.Join(errs...)
}

func (s *Server) log(level slog.Level, msg string, args ...any) {
	if s.logger != nil {
		s.logger.Log(context.Background(), level, msg, args...)
	}
}

// adminHandler serves /livez, /readyz, /healthz, /metrics and /state.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	probe := func(w http.ResponseWriter, code int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body + "\n"))
	}
	// Liveness: the process serves its admin listener. Draining is not a
	// reason to restart it.
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		probe(w, http.StatusOK, `{"status":"ok"}`)
	})
	// Readiness: send work here. False from the start of a drain, so
	// endpoints drop the pod before its listener closes.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			probe(w, http.StatusServiceUnavailable, `{"status":"draining"}`)
			return
		}
		if s.ready != nil {
			if err := s.ready(); err != nil {
				b, _ := json.Marshal(map[string]string{"status": "not_ready", "reason": err.Error()})
				probe(w, http.StatusServiceUnavailable, string(b))
				return
			}
		}
		probe(w, http.StatusOK, `{"status":"ok"}`)
	})
	// The older combined probe, kept: ready or draining.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			probe(w, http.StatusServiceUnavailable, `{"status":"draining"}`)
			return
		}
		probe(w, http.StatusOK, `{"status":"ok"}`)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.State())
	})
	return mux
}

// slogErrorLog routes net/http's own error log (panics in handlers, TLS
// handshake errors) to the logger, or discards it when the logger is nil.
func slogErrorLog(l *slog.Logger) *log.Logger {
	if l == nil {
		return log.New(io.Discard, "", 0)
	}
	return slog.NewLogLogger(l.Handler(), slog.LevelError)
}

// timeoutMetrics exports the connections closed by the send and body
// timeouts, beside promsluice's connection metrics.
func timeoutMetrics(l *connlimit.Listener) prometheus.Collector {
	return &timeoutCollector{
		l:    l,
		send: prometheus.NewDesc(metricname.ConnectionsClosedSendTimeout, "Connections closed because the client took no bytes of a response for the send timeout.", nil, nil),
		body: prometheus.NewDesc(metricname.ConnectionsClosedBodyTimeout, "Connections closed because a declared request body did not progress for the body timeout.", nil, nil),
	}
}

type timeoutCollector struct {
	l          *connlimit.Listener
	send, body *prometheus.Desc
}

func (c *timeoutCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.send; ch <- c.body }

func (c *timeoutCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.l.Stats()
	ch <- prometheus.MustNewConstMetric(c.send, prometheus.CounterValue, float64(st.ClosedSendTimeout))
	ch <- prometheus.MustNewConstMetric(c.body, prometheus.CounterValue, float64(st.ClosedBodyTimeout))
}
