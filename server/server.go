package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/connlimit"
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

	// Gates are the handler's gates, reported by /state and /metrics and
	// closed on shutdown.
	Gates []*admit.Gate

	// Limits are adaptive limits moving the gates' capacities, reported
	// by /state (register promsluice.NewLimitMetrics in Collectors for
	// /metrics).
	Limits []*limit.Adaptive

	// GateMetrics exports the gates. Pass the one whose Observer the
	// gates were created with to get the wait and hold histograms. Nil
	// means a new one (counters only).
	GateMetrics *promsluice.GateMetrics

	// Collectors are registered on the admin /metrics beside the gate and
	// connection metrics (a cache's counters, for example).
	Collectors []prometheus.Collector

	// Conn configures the main listener's connection limit and the
	// http.Server's ReadHeaderTimeout and IdleTimeout (see connlimit).
	// Conn.Logger defaults to Logger.
	Conn connlimit.Config

	// ShutdownTimeout bounds how long shutdown waits for admitted work.
	// Zero means DefaultShutdownTimeout; negative means no wait:
	// connections are closed at once.
	ShutdownTimeout time.Duration

	// OnShutdown functions are called, in order, when shutdown begins,
	// before the gates close (the lab ends its held work here).
	OnShutdown []func()

	// Logger receives start, shutdown and cut-short records. Nil means
	// silent.
	Logger *slog.Logger
}

// A Server is a main listener and an admin listener, bound by Listen and
// served by Serve.
type Server struct {
	main     *connlimit.Listener
	admin    net.Listener // nil with NoAdmin
	mainSrv  *http.Server
	adminSrv *http.Server
	registry *prometheus.Registry
	gates    []*admit.Gate
	limits   []*limit.Adaptive
	timeout  time.Duration
	hooks    []func()
	logger   *slog.Logger
	draining atomic.Bool
	served   atomic.Bool
}

// CutShortError is returned by Serve when the shutdown timeout passed
// with work still in progress.
type CutShortError struct {
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
	return fmt.Sprintf("server: shutdown timeout %v passed: %d connections cut, slots still held: [%s]",
		e.Timeout, e.OpenConns, strings.Join(parts, " "))
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
		gates:   cfg.Gates,
		limits:  cfg.Limits,
		timeout: timeout,
		hooks:   cfg.OnShutdown,
		logger:  cfg.Logger,
	}
	handler := cfg.Handler
	if handler == nil {
		handler = http.NotFoundHandler()
	}
	s.mainSrv = &http.Server{Handler: handler, ErrorLog: slogErrorLog(cfg.Logger)}
	main.ConfigureServer(s.mainSrv)

	s.registry = prometheus.NewRegistry()
	gm := cfg.GateMetrics
	if gm == nil {
		gm = promsluice.NewGateMetrics()
	}
	for _, g := range cfg.Gates {
		gm.Add(g)
	}
	if err := s.registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	extra := append([]prometheus.Collector{collectors.NewGoCollector(), gm, promsluice.NewConnMetrics(main)}, cfg.Collectors...)
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
	go func() { errc <- s.mainSrv.Serve(s.main) }()
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
		slog.Int("max_conns", s.main.MaxConns()), slog.Int("gates", len(s.gates)))

	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		running--
		serveErr = fmt.Errorf("server: %w", err)
		s.log(slog.LevelError, "listener failed; shutting down", slog.Any("err", err))
	}
	err := s.shutdown()
	for range running {
		<-errc // http.ErrServerClosed from each, after Shutdown or Close
	}
	return errors.Join(serveErr, err)
}

func (s *Server) shutdown() error {
	s.draining.Store(true)
	s.log(slog.LevelInfo, "shutting down", slog.Duration("timeout", s.timeout))
	for _, f := range s.hooks {
		f()
	}
	var cut error
	if s.timeout < 0 {
		cut = s.cutShort()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		done := make(chan error, 1)
		go func() { done <- s.mainSrv.Shutdown(ctx) }()
		// Refuse queued work now rather than let it wait out the drain.
		for _, g := range s.gates {
			g.Close()
		}
		if err := <-done; err != nil {
			cut = s.cutShort()
		}
		cancel()
	}
	for _, g := range s.gates {
		g.Close() // also when the wait was skipped
	}
	if s.adminSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
		if err := s.adminSrv.Shutdown(ctx); err != nil {
			_ = s.adminSrv.Close()
		}
		cancel()
	}
	if cut == nil {
		s.log(slog.LevelInfo, "shut down cleanly")
	}
	return cut
}

// cutShort records what is still running, then closes every connection.
// It returns nil if nothing was.
func (s *Server) cutShort() error {
	e := &CutShortError{Timeout: max(s.timeout, 0), Inflight: map[string]int64{}, OpenConns: s.main.Stats().Open}
	args := []any{slog.Duration("timeout", e.Timeout), slog.Int("open_conns", e.OpenConns)}
	busy := e.OpenConns > 0
	for _, g := range s.gates {
		st := g.Stats()
		e.Inflight[st.Gate] = st.Inflight
		busy = busy || st.Inflight > 0
		args = append(args, slog.Group("gate_"+st.Gate, slog.Int64("inflight", st.Inflight), slog.Int64("waiting", st.Waiting)))
	}
	_ = s.mainSrv.Close()
	if !busy {
		return nil
	}
	s.log(slog.LevelWarn, "shutdown timeout passed; cut work short", args...)
	return e
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

// adminHandler serves /healthz, /metrics and /state.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if s.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"draining"}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
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
