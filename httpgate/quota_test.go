package httpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/quota"
)

func newQuota(t *testing.T, cfg quota.Config) *quota.Quota {
	t.Helper()
	q, err := quota.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func quotaHandler(t *testing.T, cfg httpgate.QuotaConfig) http.Handler {
	t.Helper()
	h, err := httpgate.Quota(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestQuota429OverRealHTTP(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			q := newQuota(t, quota.Config{Name: "api", Rate: 1, Burst: 2})
			ts := serve(t, proto, quotaHandler(t, httpgate.QuotaConfig{Limiter: q, Key: httpgate.KeyHeader("X-Api-Key")}))
			ctx := context.Background()
			resp, body, err := get(t, ctx, ts, "/", "X-Api-Key", "alice")
			if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("first request: %v %v %q", err, resp, body)
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != `"api";q=2;w=2` {
				t.Fatalf("RateLimit-Policy %q", got)
			}
			if got := resp.Header.Get("RateLimit"); got != `"api";r=1;t=1` {
				t.Fatalf("RateLimit %q", got)
			}
			_, _, _ = get(t, ctx, ts, "/", "X-Api-Key", "alice")
			resp, body, err = get(t, ctx, ts, "/", "X-Api-Key", "alice")
			if err != nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("third request: %v %v", err, resp)
			}
			var got map[string]string
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			want := map[string]string{"error": "RATE_LIMITED", "gate": "api", "reason": "rate"}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("body %q: want %v", body, want)
				}
			}
			if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", resp.Header)
			}
			if rl := resp.Header.Get("RateLimit"); rl != `"api";r=0;t=1` {
				t.Fatalf("RateLimit on refusal %q", rl)
			}
			// Another key has its own bucket.
			if resp, _, _ := get(t, ctx, ts, "/", "X-Api-Key", "bob"); resp.StatusCode != 200 {
				t.Fatalf("bob: %d", resp.StatusCode)
			}
		})
	}
}

func TestQuotaRetryAfterRoundsUp(t *testing.T) {
	q := newQuota(t, quota.Config{Name: "slow", Rate: 0.4, Burst: 1}) // 2.5 s per token
	h := quotaHandler(t, httpgate.QuotaConfig{Limiter: q})
	for i, want := range []int{200, 429} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != want {
			t.Fatalf("request %d: %d, want %d", i, rec.Code, want)
		}
		if want == 429 && strings.HasSuffix(rec.Body.String(), "ok") {
			t.Fatalf("a refused request reached the handler: body %q", rec.Body.String())
		}
		if want == 429 && rec.Header().Get("Retry-After") != "3" {
			t.Fatalf("Retry-After %q, want 3 (2.5 s rounded up)", rec.Header().Get("Retry-After"))
		}
	}
}

func TestQuotasStack(t *testing.T) {
	perKey := newQuota(t, quota.Config{Name: "per-key", Rate: 100, Burst: 20})
	global := newQuota(t, quota.Config{Name: "global", Rate: 1000, Burst: 1000})
	inner := quotaHandler(t, httpgate.QuotaConfig{Limiter: perKey})
	h, err := httpgate.Quota(httpgate.QuotaConfig{Limiter: global, Key: func(*http.Request) string { return "all" }}, inner)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	pol := rec.Header().Values("RateLimit-Policy")
	if len(pol) != 2 || pol[0] != `"global";q=1000;w=1` || pol[1] != `"per-key";q=100;w=1` {
		t.Fatalf("RateLimit-Policy lines %q", pol)
	}
	if rl := rec.Header().Values("RateLimit"); len(rl) != 2 || !strings.HasPrefix(rl[1], `"per-key";r=19;`) {
		t.Fatalf("RateLimit lines %q", rl)
	}
}

func TestQuotaWeightedCost(t *testing.T) {
	q := newQuota(t, quota.Config{Name: "w", Rate: 1, Burst: 50})
	h := quotaHandler(t, httpgate.QuotaConfig{Limiter: q, Cost: httpgate.CostByPathPrefix(1, map[string]int{"/scan": 50, "/s": 5})})
	codes := func(paths ...string) (out []int) {
		for _, p := range paths {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
			out = append(out, rec.Code)
		}
		return out
	}
	if got := codes("/scan/all", "/item"); got[0] != 200 || got[1] != 429 {
		t.Fatalf("a 50-token scan then a point read: %v, want [200 429]", got)
	}
	cost := httpgate.CostByPathPrefix(0, map[string]int{"/scan": 50, "/s": 5})
	for path, want := range map[string]int{"/scan": 50, "/scanner": 50, "/search": 5, "/x": 1} {
		if got := cost(httptest.NewRequest("GET", path, nil)); got != want {
			t.Errorf("cost(%s) = %d, want %d", path, got, want)
		}
	}
}

func TestQuotaNonRefusalErrorIs500(t *testing.T) {
	q := newQuota(t, quota.Config{Name: "small", Rate: 1, Burst: 2})
	h := quotaHandler(t, httpgate.QuotaConfig{Limiter: q, Cost: func(*http.Request) int { return 3 }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 500 {
		t.Fatalf("cost above burst: %d, want 500", rec.Code)
	}
	if _, err := httpgate.Quota(httpgate.QuotaConfig{}, http.NotFoundHandler()); !errors.Is(err, httpgate.ErrInvalidConfig) {
		t.Fatalf("nil limiter: %v", err)
	}
}

func TestKeyClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	key := httpgate.KeyClientIP(trusted)
	cases := []struct {
		remote string
		xff    []string
		want   string
	}{
		{"203.0.113.9:1234", nil, "203.0.113.9"},
		{"203.0.113.9:1234", []string{"1.2.3.4"}, "203.0.113.9"}, // untrusted peer: XFF ignored
		{"10.1.1.1:80", []string{"198.51.100.7"}, "198.51.100.7"},
		{"10.1.1.1:80", []string{"6.6.6.6, 198.51.100.7, 10.2.2.2"}, "198.51.100.7"}, // rightmost untrusted
		{"10.1.1.1:80", []string{"6.6.6.6", "198.51.100.7, 10.2.2.2"}, "198.51.100.7"},
		{"10.1.1.1:80", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"}, // all trusted: leftmost
		{"10.1.1.1:80", []string{"garbage, 10.2.2.2"}, "10.2.2.2"},  // malformed stops the walk
		{"10.1.1.1:80", nil, "10.1.1.1"},
		{"[::1]:80", []string{"2001:db8::1"}, "2001:db8::1"},
		{"[::ffff:10.1.1.1]:80", []string{"192.0.2.1"}, "192.0.2.1"}, // v4-mapped peer
		{"not-an-address", nil, "not-an-address"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := key(r); got != c.want {
			t.Errorf("remote %s xff %q: key %q, want %q", c.remote, c.xff, got, c.want)
		}
	}
	plain := httpgate.KeyClientIP(nil)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.1.1:5"
	r.Header.Set("X-Forwarded-For", "1.1.1.1")
	if got := plain(r); got != "10.1.1.1" {
		t.Fatalf("no trusted proxies: key %q, want the peer", got)
	}
}

func TestKeyHeaderMissingSharesOneBucket(t *testing.T) {
	key := httpgate.KeyHeader("x-api-key")
	r := httptest.NewRequest("GET", "/", nil)
	if key(r) != "" {
		t.Fatal("missing header must key to the shared empty bucket")
	}
	r.Header.Set("X-Api-Key", "k1")
	if key(r) != "k1" {
		t.Fatal("header value not used")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid header name must panic at setup")
		}
	}()
	httpgate.KeyHeader("bad name")
}

func FuzzKeyClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "1.2.3.4, 10.0.0.2")
	f.Add("[::1]:1", "garbage,,::1")
	f.Add("x", "")
	key := httpgate.KeyClientIP([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		got := key(r)
		if _, err := netip.ParseAddr(got); err != nil && got != remote {
			t.Fatalf("key %q is neither an address nor the raw RemoteAddr %q", got, remote)
		}
	})
}
