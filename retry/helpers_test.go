package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter is an http.Handler that answers with script(n) for its n-th
// request (1-based) and remembers the headers it saw.
type counter struct {
	n      atomic.Int64
	mu     sync.Mutex
	seen   []http.Header
	script func(n int64, w http.ResponseWriter, r *http.Request)
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.n.Add(1)
	c.mu.Lock()
	c.seen = append(c.seen, r.Header.Clone())
	c.mu.Unlock()
	c.script(n, w, r)
}

func (c *counter) headers() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]http.Header(nil), c.seen...)
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h) // 127.0.0.1:0
	t.Cleanup(s.Close)
	return s
}

func busy(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"error":"BUSY"}`))
}

// client returns an http.Client whose Transport runs cfg; it closes its
// idle connections at cleanup so goleak sees no stray goroutines.
func client(t *testing.T, cfg Config) (*http.Client, *Policy) {
	t.Helper()
	if cfg.Rand == nil {
		r := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		cfg.Rand = func() float64 { mu.Lock(); defer mu.Unlock(); return r.Float64() }
	}
	if cfg.Sleep == nil {
		cfg.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() } // no real waiting
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: &Transport{Policy: p, Next: tr}}, p
}

func get(t *testing.T, c *http.Client, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}
