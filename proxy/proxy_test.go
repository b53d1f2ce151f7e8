package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/breaker"
)

func TestPassesRequestsThrough(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s xff=%s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Forwarded-For"))
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}})
	base, c := front(t, p)
	code, _, _, body := get(t, c, base+"/a/b?q=1")
	if code != 200 || body != "GET /a/b?q=1 xff=127.0.0.1" {
		t.Fatalf("got %d %q", code, body)
	}
	waitIdle(t, p, time.Second)
}

// block is an upstream handler that holds every request until release is
// closed, a token on pass lets it (one request a token) or the request's
// context ends, and tells entered when it starts.
type block struct {
	entered  chan string
	release  chan struct{}
	pass     chan struct{}
	canceled atomic.Int64
	opened   sync.Once
}

// open closes release, once: a test registers it as a cleanup after its
// front end, so that when it fails with calls still held they end at
// once instead of when the proxy's call timeout runs out.
func (b *block) open() { b.opened.Do(func() { close(b.release) }) }

func newBlock() *block {
	return &block{entered: make(chan string, 64), release: make(chan struct{}), pass: make(chan struct{}, 64)}
}

// next returns the path of the next request the upstream receives, or
// fails the test when none arrives in time.
func (b *block) next(t *testing.T) string {
	t.Helper()
	select {
	case p := <-b.entered:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the upstream")
		return ""
	}
}

func (b *block) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.entered <- r.URL.Path
	select {
	case <-b.release:
		fmt.Fprint(w, "done")
	case <-b.pass:
		fmt.Fprint(w, "done")
	case <-r.Context().Done():
		b.canceled.Add(1)
	}
}

func TestRouteRules(t *testing.T) {
	b := newBlock()
	up := backend(t, b.ServeHTTP)
	p := mustNew(t, Config{
		Upstreams:   []*url.URL{up},
		MaxInflight: 4,
		Routes: []Route{
			{Name: "api-host", Host: "api.example", PathPrefix: "/", MaxInflight: 1},
			{Name: "writes", Methods: []string{"POST"}, MaxInflight: 1},
			{Name: "search", PathPrefix: "/search", Quota: &RouteQuota{Rate: 0.001, Burst: 1, Key: "header:X-Key"}},
			{Name: "heavy", PathPrefix: "/heavy", Cost: 3},
		},
	})
	base, c := front(t, p)
	var waits []func()
	defer func() {
		close(b.release)
		for _, w := range waits {
			w()
		}
	}()

	// host: one slot for api.example; a second request there is refused
	// by the route's gate, the same path on another host is not.
	waits = append(waits, background(c, "GET", base+"/x", "Host", "api.example:80"))
	b.next(t)
	code, rb, hdr, _ := get(t, c, base+"/x", "Host", "API.example")
	if code != 503 || rb.Gate != "api-host" || rb.Reason != "full" || hdr.Get("Retry-After") == "" {
		t.Fatalf("second request on api.example: %d %+v Retry-After=%q; want 503 from gate api-host, full", code, rb, hdr.Get("Retry-After"))
	}

	// method: POSTs have their own gate of one; GETs do not pass it.
	waits = append(waits, background(c, "POST", base+"/w"))
	b.next(t)
	req, _ := http.NewRequest(http.MethodPost, base+"/w", strings.NewReader("x"))
	if code, rb, _, _ := do(t, c, req); code != 503 || rb.Gate != "writes" {
		t.Fatalf("second POST: %d %+v; want 503 from gate writes", code, rb)
	}

	// upstream gate: 2 of 4 slots held; a cost-3 request does not fit.
	if code, rb, _, _ := get(t, c, base+"/heavy"); code != 503 || rb.Gate != GateUpstream {
		t.Fatalf("heavy request with 2 of 4 slots held: %d %+v; want 503 from gate upstream", code, rb)
	}

	// quota keyed on a header: one token per key.
	waits = append(waits, background(c, "GET", base+"/search", "X-Key", "alice"))
	b.next(t)
	code, rb, hdr, _ = get(t, c, base+"/search", "X-Key", "alice")
	if code != 429 || rb.Gate != "search-quota" || rb.Reason != "rate" || hdr.Get("Retry-After") == "" {
		t.Fatalf("alice's second search: %d %+v; want 429 from search, rate", code, rb)
	}
	// bob has his own bucket, but only one slot is left upstream: the
	// quota passes and the upstream gate holds (3 held + 1).
	waits = append(waits, background(c, "GET", base+"/search", "X-Key", "bob"))
	if path := b.next(t); path != "/search" {
		t.Fatalf("bob's search reached the upstream as %q", path)
	}
	st := p.State()
	if st.Upstream.Inflight != 4 {
		t.Fatalf("upstream gate inflight %d, want 4", st.Upstream.Inflight)
	}
	if len(st.Routes) != 4 || st.Routes[0].Gate == nil || st.Routes[0].Gate.Inflight != 1 || st.Routes[2].Quota == nil ||
		st.Routes[2].Quota.Limited != 1 || st.Routes[2].QuotaScope != ScopeLocal {
		t.Fatalf("state routes: %+v", st.Routes)
	}
	if len(st.Refusals) != 0 {
		t.Fatalf("refusals outside gates and quotas %+v: want none (the quota counts its own)", st.Refusals)
	}
}

func TestClientLeavingCancelsUpstreamAndReleasesSlot(t *testing.T) {
	b := newBlock()
	up := backend(t, b.ServeHTTP)
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 1})
	base, c := front(t, p)
	t.Cleanup(b.open)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/slow", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	b.next(t)
	if got := gateByName(p, GateUpstream).InUse(); got != 1 {
		t.Fatalf("in use while the call is in flight: %d", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	// The client is gone at once and the slot follows within
	// milliseconds; 2 s is ample on a loaded machine and keeps a slot that
	// is never released from costing more.
	waitIdle(t, p, 2*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for b.canceled.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream call was not canceled when the client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The freed slot admits the next request.
	wait := background(c, "GET", base+"/next")
	path := b.next(t)
	b.open()
	wait()
	if path != "/next" {
		t.Fatalf("next request reached upstream as %q", path)
	}
}

func TestDeadlinePropagated(t *testing.T) {
	var seen atomic.Value
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Request-Timeout"))
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}})
	base, c := front(t, p)
	if code, _, _, _ := get(t, c, base+"/", "Request-Timeout", "2"); code != 200 {
		t.Fatalf("status %d", code)
	}
	v, _ := seen.Load().(string)
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs <= 0 || secs >= 2 {
		t.Fatalf("upstream saw Request-Timeout %q; want the remaining budget, above 0 and below the client's 2 s", v)
	}
	// Without a budget of the client's, the upstream is sent what is
	// left of the proxy's own total deadline.
	if code, _, _, _ := get(t, c, base+"/"); code != 200 {
		t.Fatalf("status %d", code)
	}
	v, _ = seen.Load().(string)
	if secs, err := strconv.ParseFloat(v, 64); err != nil || secs <= 25 || secs >= DefaultCallTimeout.Seconds() {
		t.Fatalf("no client budget: upstream saw Request-Timeout %q; want what is left of the proxy's %v", v, DefaultCallTimeout)
	}
	// With no deadline at all the header is not invented.
	p = mustNew(t, Config{Upstreams: []*url.URL{up}, CallTimeout: -1})
	base, c = front(t, p)
	if code, _, _, _ := get(t, c, base+"/"); code != 200 || seen.Load().(string) != "" {
		t.Fatalf("no deadline: upstream saw Request-Timeout %q", seen.Load())
	}
}

func TestNonIdempotentRequestNotRetried(t *testing.T) {
	var attempts sync.Map
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, _ := attempts.LoadOrStore(r.Method, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if string(body) != "payload" {
			t.Errorf("%s attempt body %q", r.Method, body)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, NoBreaker: true})
	base, c := front(t, p)
	count := func(m string) int64 {
		n, ok := attempts.Load(m)
		if !ok {
			return 0
		}
		return n.(*atomic.Int64).Load()
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/order", strings.NewReader("payload"))
	req.Header.Set("Content-Type", "text/plain")
	if code, _, _, _ := do(t, c, req); code != 503 {
		t.Fatalf("POST: %d", code)
	}
	if got := count(http.MethodPost); got != 1 {
		t.Fatalf("POST without Idempotency-Key sent %d times; want 1", got)
	}
	// An idempotent request with a small body is retried, body and all.
	req, _ = http.NewRequest(http.MethodPut, base+"/order", strings.NewReader("payload"))
	if code, _, _, _ := do(t, c, req); code != 503 {
		t.Fatalf("PUT: %d", code)
	}
	if got := count(http.MethodPut); got < 2 {
		t.Fatalf("PUT sent %d times; want retries", got)
	}
	waitIdle(t, p, time.Second)
}

func TestStaleIfError(t *testing.T) {
	var fail atomic.Int32 // 0 ok, 1 answer 503, 2 answer 500
	var version atomic.Int32
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		switch fail.Load() {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "max-age=1")
		fmt.Fprintf(w, "v%d", version.Add(1))
	})
	now := time.Now()
	var clock atomic.Int64
	p := mustNew(t, Config{
		Upstreams: []*url.URL{up}, StaleIfError: time.Minute, MaxAttempts: 1,
		Breaker: breaker.Config{MinCalls: 2, FailureRatio: 0.5, OpenFor: time.Hour},
		Now:     func() time.Time { return now.Add(time.Duration(clock.Load())) },
	})
	base, c := front(t, p)
	if code, _, hdr, body := get(t, c, base+"/page"); code != 200 || body != "v1" || hdr.Get(StaleHeader) != "" {
		t.Fatalf("fresh: %d %q stale=%q", code, body, hdr.Get(StaleHeader))
	}
	fail.Store(1)
	code, _, hdr, body := get(t, c, base+"/page")
	if code != 200 || body != "v1" || hdr.Get(StaleHeader) != "upstream_503" {
		t.Fatalf("upstream 503: got %d %q %s=%q; want the stale v1, marked", code, body, StaleHeader, hdr.Get(StaleHeader))
	}
	// Another page has no copy: the upstream's answer goes through.
	if code, _, hdr, _ := get(t, c, base+"/other"); code != 503 || hdr.Get(StaleHeader) != "" {
		t.Fatalf("no copy: %d stale=%q", code, hdr.Get(StaleHeader))
	}
	// 5xx failures open the breaker; while it is open the copy is served
	// without asking the upstream.
	fail.Store(2)
	for range 3 {
		get(t, c, base+"/x")
	}
	if st := p.Breaker().State(); st != breaker.Open {
		t.Fatalf("breaker %v, want open", st)
	}
	code, _, hdr, body = get(t, c, base+"/page")
	if code != 200 || body != "v1" || hdr.Get(StaleHeader) != "breaker_open" {
		t.Fatalf("breaker open: %d %q %s=%q", code, body, StaleHeader, hdr.Get(StaleHeader))
	}
	if code, rb, _, _ := get(t, c, base+"/other"); code != 503 || rb.Gate != GateBreaker || rb.Reason != "breaker_open" {
		t.Fatalf("breaker open, no copy: %d %+v", code, rb)
	}
	// Past its age the copy is not served.
	clock.Store(int64(2 * time.Minute))
	if code, _, hdr, _ := get(t, c, base+"/page"); code != 503 || hdr.Get(StaleHeader) != "" {
		t.Fatalf("expired copy: %d stale=%q", code, hdr.Get(StaleHeader))
	}
	// POSTs are never answered from the store.
	req, _ := http.NewRequest(http.MethodPost, base+"/page", nil)
	if code, _, hdr, _ := do(t, c, req); hdr.Get(StaleHeader) != "" {
		t.Fatalf("POST answered stale: %d", code)
	}
	waitIdle(t, p, time.Second)
}

func TestStaleNotStoredWhenForbidden(t *testing.T) {
	var fail atomic.Bool
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		switch r.URL.Path {
		case "/private":
			w.Header().Set("Cache-Control", "private")
		case "/cookie":
			w.Header().Set("Set-Cookie", "a=b")
		}
		fmt.Fprint(w, "secret")
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, StaleIfError: time.Minute, MaxAttempts: 1, NoBreaker: true})
	base, c := front(t, p)
	for _, path := range []string{"/private", "/cookie", "/auth"} {
		get(t, c, base+path, "Authorization", map[bool]string{true: "Bearer x"}[path == "/auth"])
	}
	fail.Store(true)
	for _, path := range []string{"/private", "/cookie", "/auth"} {
		if code, _, hdr, _ := get(t, c, base+path); code != 502 || hdr.Get(StaleHeader) != "" {
			t.Fatalf("%s served from the store: %d", path, code)
		}
	}
}

func TestPassiveHealthEjectsDeadInstance(t *testing.T) {
	var hits atomic.Int64
	live := backend(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	// Nobody listens at the dead one's address: connections are refused.
	deadSrv := &url.URL{Scheme: "http", Host: mustListenClosed(t)}
	p := mustNew(t, Config{Upstreams: []*url.URL{deadSrv, live}, EjectAfter: 1, EjectFor: time.Hour, NoBreaker: true})
	base, c := front(t, p)
	for i := range 6 {
		if code, _, _, _ := get(t, c, base+"/"); code != 200 {
			t.Fatalf("request %d: %d (a GET to a dead instance is retried on the next)", i, code)
		}
	}
	ups := p.State().Upstreams
	if ups[0].Healthy || ups[0].Ejected != 1 || !ups[1].Healthy {
		t.Fatalf("upstreams %+v: want the dead one ejected once, the live one healthy", ups)
	}
	if ups[0].Sent != 1 {
		t.Fatalf("dead instance got %d attempts; want 1 (ejected after it)", ups[0].Sent)
	}
	if hits.Load() != 6 {
		t.Fatalf("live instance served %d", hits.Load())
	}
}
