package httpgate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/quota"
)

// rawFields is a request's fields as a parser that keeps them in order
// and as sent (any case) holds them: the Fields of a front end without
// an http.Header.
type rawFields [][2]string

func (f rawFields) Get(name string) string {
	for _, kv := range f {
		if strings.EqualFold(kv[0], name) {
			return kv[1]
		}
	}
	return ""
}

func (f rawFields) Values(name string) []string {
	var out []string
	for _, kv := range f {
		if strings.EqualFold(kv[0], name) {
			out = append(out, kv[1])
		}
	}
	return out
}

// The request-key forms decide as the KeyFuncs do, over fields in any
// case and order.
func TestRequestKeysMatchKeyFuncs(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		remote string
		fields rawFields
	}{
		{"203.0.113.9:1234", nil},
		{"203.0.113.9:1234", rawFields{{"x-forwarded-for", "1.2.3.4"}}},
		{"10.1.1.1:80", rawFields{{"X-FORWARDED-FOR", "6.6.6.6, 198.51.100.7, 10.2.2.2"}}},
		{"10.1.1.1:80", rawFields{{"x-forwarded-for", "6.6.6.6"}, {"X-Api-Key", "k"}, {"X-Forwarded-For", "198.51.100.7, 10.2.2.2"}}},
		{"10.1.1.1:80", rawFields{{"X-Forwarded-For", "garbage, 10.2.2.2"}}},
		{"[::1]:80", rawFields{{"X-Forwarded-For", "2001:db8::1"}, {"x-api-key", "second"}}},
		{"not-an-address", nil},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for _, kv := range c.fields {
			r.Header.Add(kv[0], kv[1])
		}
		for _, trust := range [][]netip.Prefix{nil, trusted} {
			if got, want := httpgate.ClientIPKey(trust)(c.remote, c.fields), httpgate.KeyClientIP(trust)(r); got != want {
				t.Errorf("remote %s fields %q trusted %v: %q, the KeyFunc says %q", c.remote, c.fields, trust, got, want)
			}
		}
		if got, want := httpgate.HeaderKey("x-api-key")(c.remote, c.fields), httpgate.KeyHeader("X-Api-Key")(r); got != want {
			t.Errorf("fields %q: header key %q, the KeyFunc says %q", c.fields, got, want)
		}
	}
}

// A QuotaRule decides as the Quota middleware does: the same refusals and
// the same RateLimit headers, in the same sequence.
func TestQuotaRuleMatchesQuota(t *testing.T) {
	cfg := quota.Config{Name: "api", Rate: 1, Burst: 3}
	h := quotaHandler(t, httpgate.QuotaConfig{Limiter: newQuota(t, cfg), Key: httpgate.KeyHeader("X-Key")})
	rule := httpgate.NewQuotaRule(newQuota(t, cfg), false)
	for i := range 6 {
		key := []string{"a", "a", "b", "a", "a", "b"}[i]
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		a, err := rule.Decide(context.Background(), key, 1)
		if (err != nil) != (rec.Code == http.StatusTooManyRequests) {
			t.Fatalf("request %d: rule error %v, middleware %d", i, err, rec.Code)
		}
		if got, want := a.Policy, rec.Header().Get("RateLimit-Policy"); got != want || got == "" {
			t.Errorf("request %d: policy %q, middleware %q", i, got, want)
		}
		if got, want := a.RateLimit, rec.Header().Get("RateLimit"); got != want || got == "" {
			t.Errorf("request %d: RateLimit %q, middleware %q", i, got, want)
		}
		if err != nil && a.RateLimit != rule.RefusedRateLimit(int(mustRetryAfter(t, rec))) {
			t.Errorf("request %d: RefusedRateLimit disagrees with the refusal's %q", i, a.RateLimit)
		}
	}
	if off := httpgate.NewQuotaRule(newQuota(t, cfg), true); off.Policy() != "" || off.RefusedRateLimit(1) != "" {
		t.Fatal("headers off, yet a policy")
	}
}

func mustRetryAfter(t *testing.T, rec *httptest.ResponseRecorder) int64 {
	t.Helper()
	var n int64
	for _, c := range rec.Header().Get("Retry-After") {
		n = n*10 + int64(c-'0')
	}
	return n
}
