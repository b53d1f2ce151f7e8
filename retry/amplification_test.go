package retry

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// naiveTransport retries every 503 up to attempts times at once: what a
// caller without budgets or signals does.
type naiveTransport struct {
	attempts int
	next     http.RoundTripper
}

func (n naiveTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 1; ; i++ {
		resp, err := n.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || i == n.attempts {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// relay is a middle layer: it calls down with its client and answers with
// the status it got, relaying the no-retry signal and Retry-After as a
// sluice server must. A local refusal (throttled, no time) becomes a 503
// that says do not retry.
func relay(c *http.Client, down string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, down, nil)
		resp, err := c.Do(req)
		if err != nil {
			w.Header().Set(NoRetryHeader, "overloaded")
			busy(w)
			return
		}
		defer resp.Body.Close()
		for _, h := range []string{NoRetryHeader, "Retry-After"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
}

// chain builds client → A → B → bottom, where the client, A and B each
// call down with the transport mk returns, and returns the client and the
// bottom's counter. The bottom always refuses with 503.
func chain(t *testing.T, mk func(layer string) http.RoundTripper) (*http.Client, *counter) {
	bottom := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { busy(w) }}
	down := serve(t, bottom).URL
	for _, layer := range []string{"B", "A"} {
		down = serve(t, relay(&http.Client{Transport: mk(layer)}, down)).URL
	}
	top := &http.Client{Transport: mk("client")}
	tc := &topClient{top, down}
	return tc.client(), bottom
}

type topClient struct {
	c   *http.Client
	url string
}

func (tc *topClient) client() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, tc.url, nil)
		return tc.c.Do(req)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func newHTTPTransport(t *testing.T) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// TestAmplification is the three-layer retry storm. Naive callers that
// each try 4 times send 4×4×4 = 64 attempts to a failing bottom per
// original request. With sluice's transport at every layer, only the layer
// above the bottom retries (the others see the no-retry signal), and only
// within its budget: the bottom sees at most 1.1× the original requests
// plus the budget floor. About 1.5 s under -race: 600 requests cross a
// chain of real HTTP servers, enough that the budget's ratio, not its
// floor, bounds what reaches the bottom.
func TestAmplification(t *testing.T) {
	const naiveRequests = 5
	c, bottom := chain(t, func(string) http.RoundTripper {
		return naiveTransport{attempts: 4, next: newHTTPTransport(t)}
	})
	for range naiveRequests {
		resp, err := c.Get("http://ignored/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := bottom.n.Load(); got != 64*naiveRequests {
		t.Fatalf("naive: bottom saw %d attempts for %d requests, want exactly %d (64 each)", got, naiveRequests, 64*naiveRequests)
	}
	t.Logf("naive: %d requests -> %d attempts on the bottom (%.0fx)", naiveRequests, bottom.n.Load(), float64(bottom.n.Load())/naiveRequests)

	for _, throttle := range []bool{true, false} {
		name := "budget+signal+throttle"
		if !throttle {
			name = "budget+signal"
		}
		t.Run(name, func(t *testing.T) {
			const requests = 300
			const floorPerSecond, window = 1.0, 10 * time.Second
			floor := floorPerSecond * window.Seconds()
			policies := map[string]*Policy{}
			var mu sync.Mutex
			c, bottom := chain(t, func(layer string) http.RoundTripper {
				r := rand.New(rand.NewPCG(7, uint64(len(layer))))
				var rmu sync.Mutex
				budget, _ := NewBudget(BudgetConfig{MinPerSecond: floorPerSecond, Window: window})
				p, err := New(Config{Name: layer, MaxAttempts: 4, BaseDelay: 100 * time.Microsecond, MaxDelay: time.Millisecond,
					Budget: budget, NoThrottle: !throttle,
					Rand: func() float64 { rmu.Lock(); defer rmu.Unlock(); return r.Float64() }})
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				policies[layer] = p
				mu.Unlock()
				return &Transport{Policy: p, Next: newHTTPTransport(t)}
			})
			start := time.Now()
			for range requests {
				resp, err := c.Get("http://ignored/")
				if err != nil {
					if err.Error() == "" {
						t.Fatal(err)
					}
					continue // throttled locally at the top: nothing sent
				}
				if resp.StatusCode != 503 || resp.Header.Get(NoRetryHeader) == "" {
					t.Fatalf("top got %d without the no-retry signal", resp.StatusCode)
				}
				resp.Body.Close()
			}
			got := bottom.n.Load()
			limit := 1.1*requests + floor
			t.Logf("sluice (%s): %d requests -> %d attempts on the bottom (%.3fx; limit 1.1x + floor %.0f = %.0f) in %v",
				name, requests, got, float64(got)/requests, floor, limit, time.Since(start))
			if float64(got) > limit {
				t.Fatalf("bottom saw %d attempts for %d requests, want ≤ %.0f (1.1x + floor)", got, requests, limit)
			}
			if throttle {
				return
			}
			// Without throttling every request reaches the bottom once,
			// and the retries are those of B alone, within its budget.
			if got < requests {
				t.Fatalf("bottom saw %d < %d requests", got, requests)
			}
			for _, layer := range []string{"client", "A"} {
				if r := policies[layer].Stats()[EventRetry]; r != 0 {
					t.Fatalf("layer %s retried %d times; only the layer above the failure may retry", layer, r)
				}
			}
			if r := policies["B"].Stats()[EventRetry]; r == 0 || policies["B"].Stats()[EventBudgetExhausted] == 0 {
				t.Fatalf("layer B retried %d times, budget exhausted %d: the budget was never tested", r, policies["B"].Stats()[EventBudgetExhausted])
			}
		})
	}
}

// TestBudgetCapsRetries: against an upstream that always refuses, a
// client with attempts to spare sends at most ratio × requests + floor
// retries.
func TestBudgetCapsRetries(t *testing.T) {
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) { busy(w) }}
	s := serve(t, up)
	budget, _ := NewBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 0.5, Window: 10 * time.Second})
	c, p := client(t, Config{MaxAttempts: 5, Budget: budget, NoThrottle: true})
	const requests = 100
	for range requests {
		if _, err := get(t, c, context.Background(), s.URL); err != nil {
			t.Fatal(err)
		}
	}
	got := up.n.Load()
	if limit := int64(requests + 0.2*requests + 5); got > limit || got < requests+5 {
		t.Fatalf("upstream saw %d attempts for %d requests, want between %d and %d", got, requests, requests+5, limit)
	}
	if p.Stats()[EventBudgetExhausted] == 0 {
		t.Fatal("budget never reported exhausted")
	}
}

// TestThrottling: a backend that can take a tenth of the offered load
// (one request per 10 ms of a fake clock, the client offering one per
// millisecond) sees about K = 2 times what it accepts, not the whole load.
func TestThrottling(t *testing.T) {
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var lastAccept atomic.Int64
	lastAccept.Store(-1 << 60)
	var accepted atomic.Int64
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
		if c := clock.Load(); c-lastAccept.Load() >= int64(10*time.Millisecond) {
			lastAccept.Store(c)
			accepted.Add(1)
			io.WriteString(w, "ok")
			return
		}
		busy(w)
	}}
	s := serve(t, up)
	throttle, _ := NewThrottle(ThrottleConfig{Now: now, Rand: rand.New(rand.NewPCG(3, 4)).Float64, Window: 10 * time.Second})
	c, p := client(t, Config{MaxAttempts: 1, Throttle: throttle, Now: now})
	const offered = 3000
	local := 0
	for range offered {
		clock.Add(int64(time.Millisecond))
		if _, err := get(t, c, context.Background(), s.URL); err != nil {
			local++
		}
	}
	sent, acc := up.n.Load(), accepted.Load()
	t.Logf("offered %d, refused locally %d, backend saw %d, accepted %d (%.2fx accepted)", offered, local, sent, acc, float64(sent)/float64(acc))
	if float64(sent) > 2.3*float64(acc)+25 {
		t.Fatalf("backend saw %d for %d accepted: more than about K=2 times", sent, acc)
	}
	// The backend takes one request 10 ms after the last one it took, so
	// with about one send in eight milliseconds it accepts one per ~18 ms:
	// the throttle must not starve it below that.
	if acc < offered/25 {
		t.Fatalf("backend accepted only %d (capacity %d): the throttle starved it", acc, offered/10)
	}
	if p.Stats()[EventThrottled] != uint64(local) || local == 0 {
		t.Fatalf("throttled events %d, local refusals %d", p.Stats()[EventThrottled], local)
	}
}
