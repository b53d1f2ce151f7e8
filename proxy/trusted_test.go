package proxy

import (
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
)

// TestRouteQuotaKeysOnForwardedClient: a route quota keyed on "ip"
// believes X-Forwarded-For from a trusted proxy (each client named there
// has its own bucket) and keys on the peer's address otherwise (every
// client behind the peer shares one bucket).
func TestRouteQuotaKeysOnForwardedClient(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		want    []int // answers to clients a, b, a
	}{
		{"trusted loopback", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, []int{200, 200, 429}},
		{"nothing trusted", nil, []int{200, 429, 429}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, Config{Upstreams: []*url.URL{up}, TrustedProxies: tc.trusted,
				Routes: []Route{{Name: "q", Quota: &RouteQuota{Rate: 0.001, Burst: 1, Key: "ip"}}}})
			base, c := front(t, p)
			for i, client := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.1"} {
				code, _, _, _ := get(t, c, base+"/x", "X-Forwarded-For", client)
				if code != tc.want[i] {
					t.Errorf("request %d (client %s): %d, want %d", i, client, code, tc.want[i])
				}
			}
		})
	}
}
