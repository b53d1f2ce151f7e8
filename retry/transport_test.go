package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/httpgate"
)

// TestRetriesUntilSuccess: a GET that meets two 503s is retried and
// succeeds on the third attempt; the caller never sees the 503s.
func TestRetriesUntilSuccess(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			busy(w)
			return
		}
		io.WriteString(w, "ok")
	}}
	s := serve(t, up)
	c, p := client(t, Config{})
	resp, err := get(t, c, context.Background(), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
	}
	if n := up.n.Load(); n != 3 {
		t.Fatalf("upstream saw %d attempts, want 3", n)
	}
	st := p.Stats()
	if st[EventAttempt] != 3 || st[EventRetry] != 2 {
		t.Fatalf("events attempt=%d retry=%d, want 3 and 2", st[EventAttempt], st[EventRetry])
	}
}

// TestGivesUpWithNoRetrySignal: after MaxAttempts the last 503 is passed
// up with the no-retry signal, and its body is intact.
func TestGivesUpWithNoRetrySignal(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { busy(w) }}
	s := serve(t, up)
	c, _ := client(t, Config{MaxAttempts: 2})
	resp, err := get(t, c, context.Background(), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get(NoRetryHeader) == "" || !strings.Contains(string(body), "BUSY") {
		t.Fatalf("got %d %v %q, want the 503 with %s", resp.StatusCode, resp.Header, body, NoRetryHeader)
	}
	if n := up.n.Load(); n != 2 {
		t.Fatalf("upstream saw %d attempts, want 2", n)
	}
}

// TestNoRetrySignalStopsRetries: an upstream that says "do not retry" is
// not retried even for a GET with attempts left.
func TestNoRetrySignalStopsRetries(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set(NoRetryHeader, "overloaded")
		busy(w)
	}}
	s := serve(t, up)
	c, p := client(t, Config{MaxAttempts: 4})
	resp, err := get(t, c, context.Background(), s.URL)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("got %v %v", resp, err)
	}
	if n := up.n.Load(); n != 1 {
		t.Fatalf("upstream saw %d attempts, want 1 (no-retry signal)", n)
	}
	if p.Stats()[EventNoRetrySignal] != 1 {
		t.Fatal("no_retry_signal event not counted")
	}
}

// TestNonIdempotentNotRetried: a POST is sent once; a POST with an
// Idempotency-Key is retried with the same key and the same body.
func TestNonIdempotentNotRetried(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != "order-42" {
			http.Error(w, "body lost on replay: "+string(b), 400)
			return
		}
		if n%3 != 0 {
			busy(w)
			return
		}
		io.WriteString(w, "done")
	}}
	s := serve(t, up)
	c, _ := client(t, Config{MaxAttempts: 3})

	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("order-42"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || up.n.Load() != 1 {
		t.Fatalf("POST without key: status %d after %d attempts, want 503 after 1", resp.StatusCode, up.n.Load())
	}

	up.n.Store(0)
	req, _ = http.NewRequest(http.MethodPost, s.URL, strings.NewReader("order-42"))
	req.Header.Set("Idempotency-Key", "k-7f3a")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || up.n.Load() != 3 {
		t.Fatalf("POST with key: status %d after %d attempts, want 200 after 3", resp.StatusCode, up.n.Load())
	}
	hs := up.headers()
	for _, h := range hs[len(hs)-3:] {
		if h.Get("Idempotency-Key") != "k-7f3a" {
			t.Fatalf("attempt carried key %q, want k-7f3a on every attempt", h.Get("Idempotency-Key"))
		}
	}

	// The key header's name is matched canonically.
	c2, _ := client(t, Config{MaxAttempts: 3, IdempotencyKeyHeader: "x-request-id"})
	up.n.Store(0)
	req, _ = http.NewRequest(http.MethodPost, s.URL, strings.NewReader("order-42"))
	req.Header.Set("X-Request-Id", "r-1")
	resp, err = c2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if up.n.Load() != 3 {
		t.Fatalf("POST with a custom key header: %d attempts, want 3", up.n.Load())
	}

	// A body that cannot be replayed is not retried either.
	up.n.Store(0)
	req, _ = http.NewRequest(http.MethodPut, s.URL, io.NopCloser(strings.NewReader("order-42")))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if up.n.Load() != 1 {
		t.Fatalf("PUT with a one-shot body sent %d times, want 1", up.n.Load())
	}
}

// TestRetryAfter: a 503 with Retry-After is retried after that wait when
// the deadline covers it, and failed at once otherwise.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		value    func() string
		deadline time.Duration
		honored  bool
	}{
		{"seconds covered", func() string { return "2" }, 10 * time.Second, true},
		{"seconds past deadline", func() string { return "2" }, time.Second, false},
		{"date covered", func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) }, 10 * time.Second, true},
		{"date past deadline", func() string { return time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat) }, 2 * time.Second, false},
		{"covered but no room for service time", func() string { return "1" }, 1020 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					w.Header().Set("Retry-After", tc.value())
					busy(w)
					return
				}
				io.WriteString(w, "ok")
			}}
			s := serve(t, up)
			var waited time.Duration
			c, p := client(t, Config{Sleep: func(ctx context.Context, d time.Duration) error { waited += d; return nil }})
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			start := time.Now()
			resp, err := get(t, c, ctx, s.URL)
			if err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			if tc.honored {
				if resp.StatusCode != 200 || up.n.Load() != 2 || waited < time.Second || st[EventRetryAfterHonored] != 1 {
					t.Fatalf("status %d after %d attempts, waited %v, honored=%d: want 200 after 2, a wait of Retry-After",
						resp.StatusCode, up.n.Load(), waited, st[EventRetryAfterHonored])
				}
				return
			}
			if resp.StatusCode != 503 || up.n.Load() != 1 || waited != 0 || st[EventRetryAfterRefused] != 1 {
				t.Fatalf("status %d after %d attempts, waited %v, refused=%d: want the 503 at once",
					resp.StatusCode, up.n.Load(), waited, st[EventRetryAfterRefused])
			}
			if resp.Header.Get(NoRetryHeader) == "" {
				t.Fatal("refusal passed up without the no-retry signal")
			}
			if time.Since(start) > 500*time.Millisecond {
				t.Fatalf("failing at once took %v", time.Since(start))
			}
		})
	}
}

// TestDeadlinePropagated: every attempt carries the remaining deadline
// less the margin in Request-Timeout, in the form httpgate parses; an
// expired budget never reaches the upstream.
func TestDeadlinePropagated(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			busy(w)
			return
		}
		io.WriteString(w, "ok")
	}}
	s := serve(t, up)
	c, p := client(t, Config{DeadlineMargin: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := get(t, c, ctx, s.URL); err != nil {
		t.Fatal(err)
	}
	hs := up.headers()
	if len(hs) != 2 {
		t.Fatalf("%d attempts, want 2", len(hs))
	}
	var prev time.Duration = 1 << 62
	for i, h := range hs {
		d, err := httpgate.ParseDeadline(h.Get("Request-Timeout"))
		if err != nil {
			t.Fatalf("attempt %d: Request-Timeout %q: %v", i+1, h.Get("Request-Timeout"), err)
		}
		if d > 1950*time.Millisecond || d < time.Second || d > prev {
			t.Fatalf("attempt %d: Request-Timeout %v, want ≤ 1.95s (2s − margin), shrinking", i+1, d)
		}
		prev = d
	}

	// No deadline: no header.
	up.n.Store(2)
	if _, err := get(t, c, context.Background(), s.URL); err != nil {
		t.Fatal(err)
	}
	if hs := up.headers(); hs[len(hs)-1].Get("Request-Timeout") != "" {
		t.Fatal("Request-Timeout sent without a deadline")
	}

	// Less than the margin left: no attempt at all.
	before := up.n.Load()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := get(t, c, ctx, s.URL)
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if up.n.Load() != before || p.Stats()[EventDeadlineExpired] != 1 {
		t.Fatal("an attempt started with an expired budget")
	}
}

// TestBreakerInTransport: failures open the breaker; then the transport
// refuses without sending, with the breaker's admit refusal.
func TestBreakerInTransport(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }}
	s := serve(t, up)
	b, _ := breaker.New(breaker.Config{Name: "up", MinCalls: 5, OpenFor: time.Minute})
	c, p := client(t, Config{Breaker: b})
	for range 5 {
		resp, err := get(t, c, context.Background(), s.URL)
		if err != nil || resp.StatusCode != 500 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	_, err := get(t, c, context.Background(), s.URL)
	var re *admit.RejectedError
	if !errors.As(err, &re) || re.Reason() != admit.ReasonBreakerOpen || re.RetryAfter() <= 50*time.Second {
		t.Fatalf("err = %v, want breaker_open refusal with ~1m RetryAfter", err)
	}
	if up.n.Load() != 5 || p.Stats()[EventBreakerOpen] != 1 {
		t.Fatalf("upstream saw %d, want 5", up.n.Load())
	}
}

// TestTransportErrorRetried: a connection refused is retried (GET) and
// reported as the last error once attempts run out.
func TestTransportErrorRetried(t *testing.T) {
	s := serve(t, http.NotFoundHandler())
	url := s.URL
	s.Close()
	c, p := client(t, Config{MaxAttempts: 3, NoThrottle: true})
	_, err := get(t, c, context.Background(), url)
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	if st := p.Stats(); st[EventAttempt] != 3 {
		t.Fatalf("attempts = %d, want 3", st[EventAttempt])
	}
}

// TestCanceledDuringWait: a caller that goes away during a backoff wait
// gets its context's error at once.
func TestCanceledDuringWait(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { busy(w) }}
	s := serve(t, up)
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := client(t, Config{Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return sleepCtx(ctx, time.Hour) }})
	_, err := get(t, c, ctx, s.URL)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

// TestBodyClosedWithoutAttempt: a request refused before any attempt still
// has its body closed, as the RoundTripper contract requires.
func TestBodyClosedWithoutAttempt(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {}}
	s := serve(t, up)
	c, _ := client(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	body := &trackedBody{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, s.URL, body)
	if _, err := c.Transport.RoundTrip(req); !errors.Is(err, ErrDeadline) { // not via http.Client, which closes bodies itself
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if !body.closed || up.n.Load() != 0 {
		t.Fatalf("body closed %v, upstream saw %d", body.closed, up.n.Load())
	}
}

// stubRT answers 200 without the network and keeps the last request.
type stubRT struct{ last *http.Request }

func (s *stubRT) RoundTrip(r *http.Request) (*http.Response, error) {
	s.last = r
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// TestAttemptTimeoutValuesOwn: the Request-Timeout value an attempt
// carries shares memory with nothing else: concurrent requests with
// different deadlines each keep their own value after RoundTrip returns
// (resp.Request points at the attempt), and the caller's request is never
// changed.
func TestAttemptTimeoutValuesOwn(t *testing.T) {
	p, err := New(Config{Name: "up", DeadlineMargin: -1, NoThrottle: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Transport{Policy: p, Next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})}
	const workers, per = 8, 200
	type sent struct {
		resp   *http.Response
		caller *http.Request
		secs   int
	}
	results := make(chan sent, workers*per)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				secs := 1 + (w*per+i)%997 // distinct values, far from any rounding edge
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+500*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://up/", nil)
				resp, err := tr.RoundTrip(req)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				results <- sent{resp, req, secs}
			}
		})
	}
	wg.Wait()
	close(results)
	n := 0
	for s := range results {
		n++
		v := s.resp.Request.Header.Get("Request-Timeout")
		d, err := httpgate.ParseDeadline(v)
		// Sent at secs+0.5 s minus the time the call took: between secs
		// and secs+0.5 s unless the machine stalled for half a second.
		if err != nil || d < time.Duration(s.secs)*time.Second || d > time.Duration(s.secs)*time.Second+500*time.Millisecond {
			t.Fatalf("attempt for a %ds+0.5s deadline carries %q (%v, %v) after the others ran", s.secs, v, d, err)
		}
		if s.caller.Header.Get("Request-Timeout") != "" || s.resp.Request == s.caller {
			t.Fatal("the caller's request was changed or sent itself")
		}
	}
	if n != workers*per {
		t.Fatalf("%d results, want %d", n, workers*per)
	}
}

// TestPerUpstreamBreakers: one Transport calls two real servers, one
// failing, one healthy, with a breaker per host. The failing host's
// breaker opens and refuses locally; the healthy host's calls are never
// refused and its breaker stays closed.
func TestPerUpstreamBreakers(t *testing.T) {
	failing := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }}
	healthy := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }}
	fs, hs := serve(t, failing), serve(t, healthy)
	var created []string
	g, err := breaker.NewGroup(breaker.GroupConfig{Breaker: breaker.Config{Name: "up", MinCalls: 5, OpenFor: time.Minute},
		OnNew: func(k string, b *breaker.Breaker) { created = append(created, b.Name()) }})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client(t, Config{Breakers: g, NoThrottle: true})
	refused := 0
	for range 20 {
		if _, err := get(t, c, context.Background(), fs.URL); breaker.IsOpen(err) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
		resp, err := get(t, c, context.Background(), hs.URL)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthy host: %v %v (its calls must not be refused)", resp, err)
		}
	}
	if failing.n.Load() != 5 || refused != 15 || healthy.n.Load() != 20 {
		t.Fatalf("failing host saw %d (refused locally %d), healthy saw %d: want 5, 15, 20", failing.n.Load(), refused, healthy.n.Load())
	}
	fb, _ := g.Lookup(strings.TrimPrefix(fs.URL, "http://"))
	hb, _ := g.Lookup(strings.TrimPrefix(hs.URL, "http://"))
	if fb == nil || hb == nil || fb.State() != breaker.Open || hb.State() != breaker.Closed || hb.Stats().Rejected != 0 {
		t.Fatalf("per-host breakers %v %v: want the failing one open, the healthy one closed with no refusals", fb, hb)
	}
	if len(created) != 2 || created[0] != "up/"+strings.TrimPrefix(fs.URL, "http://") {
		t.Fatalf("breakers created: %v", created)
	}
	if _, err := New(Config{Breaker: fb, Breakers: g}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Breaker and Breakers both set: %v, want ErrInvalidConfig", err)
	}
}

// TestRoundTripWith: a caller that sends each attempt itself gets what
// Transport gives (the same attempts, retries, give-up signal and
// events), each attempt's number in order and its Timeout, and the
// request it passed, never a copy.
func TestRoundTripWith(t *testing.T) {
	scripts := map[string]struct {
		method string
		script func(n int64, w http.ResponseWriter, r *http.Request)
	}{
		"two 503s then ok": {"GET", func(n int64, w http.ResponseWriter, r *http.Request) {
			if n <= 2 {
				busy(w)
				return
			}
			io.WriteString(w, "ok")
		}},
		"always 503":          {"GET", func(n int64, w http.ResponseWriter, r *http.Request) { busy(w) }},
		"POST is not retried": {"POST", func(n int64, w http.ResponseWriter, r *http.Request) { busy(w) }},
	}
	for name, sc := range scripts {
		t.Run(name, func(t *testing.T) {
			type result struct {
				status    int
				noRetry   string
				attempts  int64
				retries   uint64
				timeouts  []string
				attemptNs []int
			}
			run := func(with bool) result {
				up := &counter{script: sc.script}
				s := serve(t, up)
				c, p := client(t, Config{MaxAttempts: 3, DeadlineHeader: "Request-Timeout"})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, sc.method, s.URL, nil)
				var res result
				var resp *http.Response
				var err error
				if with {
					tr := c.Transport.(*Transport).Next
					resp, err = p.RoundTripWith(req, func(n int, to Timeout) (*http.Response, error) {
						res.attemptNs = append(res.attemptNs, n)
						if !to.Set || to.Left <= 29*time.Second || to.Left > 30*time.Second {
							t.Errorf("attempt %d: Timeout %+v, want Set with about 30 s left", n, to)
						}
						areq := req.Clone(req.Context())
						areq.Header.Set("Request-Timeout", FormatTimeout(to.Left))
						return tr.RoundTrip(areq)
					})
				} else {
					resp, err = c.Transport.RoundTrip(req)
				}
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				res.status, res.noRetry, res.attempts = resp.StatusCode, resp.Header.Get(NoRetryHeader), up.n.Load()
				res.retries = p.Stats()[EventRetry]
				for _, h := range up.headers() {
					res.timeouts = append(res.timeouts, strings.Split(h.Get("Request-Timeout"), ".")[0])
				}
				return res
			}
			a, b := run(false), run(true)
			if want := int(b.attempts); len(b.attemptNs) != want || (want > 0 && b.attemptNs[want-1] != want) {
				t.Errorf("attempt numbers %v for %d attempts", b.attemptNs, want)
			}
			b.attemptNs = nil
			if !reflect.DeepEqual(a, b) {
				t.Errorf("Transport gave %+v, RoundTripWith %+v", a, b)
			}
		})
	}
}
