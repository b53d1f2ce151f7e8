package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults for zero Config fields.
const (
	DefaultInterval = 5 * time.Second
	DefaultTimeout  = 5 * time.Second
)

// ErrInvalidConfig is wrapped by Run's errors for a bad Config.
var ErrInvalidConfig = errors.New("doctor: invalid config")

// ErrUnreachable is wrapped by Run's errors when an endpoint could not be
// read (connection refused, a timeout, an HTTP error status).
var ErrUnreachable = errors.New("doctor: server unreachable")

// Config says what to diagnose. The zero value is not usable: Admin is
// required.
type Config struct {
	// Admin is the base URL of the server's admin listener, e.g.
	// http://127.0.0.1:9090 (a bare host:port means http://host:port).
	Admin string
	// Interval is the time between the two readings. Zero means
	// DefaultInterval; negative is invalid.
	Interval time.Duration
	// Timeout bounds each HTTP request. Zero means DefaultTimeout;
	// negative is invalid.
	Timeout time.Duration
	// NoState skips /state (a service instrumented with promsluice but
	// without sluice's server has none).
	NoState bool
	// Pprof reads /debug/pprof/goroutine?debug=2 after the second reading
	// and says where goroutines wait (the server needs its pprof option).
	Pprof bool
	// Client is the HTTP client. Nil means a new client with Timeout.
	Client *http.Client
	// Logger receives a record per reading. Nil means silent.
	Logger *slog.Logger
}

// Run reads the server twice, Interval apart, and diagnoses what changed.
// It returns early with ctx's error if ctx ends.
func Run(ctx context.Context, cfg Config) (*Diagnosis, error) {
	base, err := adminBase(cfg.Admin)
	if err != nil {
		return nil, err
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: interval %v and timeout %v must not be negative", ErrInvalidConfig, cfg.Interval, cfg.Timeout)
	}
	interval := cfg.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: timeout}
	}
	r := reader{base: base, client: client, state: !cfg.NoState, logger: cfg.Logger}
	before, err := r.read(ctx)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(interval)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	case <-t.C:
	}
	after, err := r.read(ctx)
	if err != nil {
		return nil, err
	}
	var gs *GoroutineSummary
	if cfg.Pprof {
		body, err := r.get(ctx, "/debug/pprof/goroutine?debug=2")
		if err != nil {
			return nil, fmt.Errorf("%w (is the server running with pprof on, e.g. `sluice serve --pprof`?)", err)
		}
		defer body.Close()
		if gs, err = ParseGoroutines(body); err != nil {
			return nil, err
		}
	}
	return Diagnose(before, after, gs), nil
}

// adminBase normalises the admin address into a base URL.
func adminBase(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: the admin address is required", ErrInvalidConfig)
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: admin address %q: want http://host:port", ErrInvalidConfig, s)
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

type reader struct {
	base   string
	client *http.Client
	state  bool
	logger *slog.Logger
}

func (r reader) get(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%w: GET %s: HTTP %d", ErrUnreachable, r.base+path, resp.StatusCode)
	}
	return resp.Body, nil
}

// read takes one reading: /metrics, then /state.
func (r reader) read(ctx context.Context) (*Reading, error) {
	body, err := r.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	at := time.Now()
	rd, err := ParseMetrics(body, at)
	body.Close()
	if err != nil {
		return nil, err
	}
	if r.state {
		body, err := r.get(ctx, "/state")
		if err != nil {
			return nil, fmt.Errorf("%w (for a service without /state, use --no-state)", err)
		}
		rd.State, err = ParseState(body)
		body.Close()
		if err != nil {
			return nil, err
		}
	}
	if r.logger != nil {
		r.logger.LogAttrs(ctx, slog.LevelDebug, "reading", slog.String("admin", r.base), slog.Int("gates", len(rd.Gates)))
	}
	return rd, nil
}
