package proxy

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// TestRouteFleetQuotaSharedAcrossProxies: two proxies on one real
// redis-server share a route's fleet quota (the second proxy refuses the
// key the first one spent), while a route quota scoped local stays each
// proxy's own; /state says which is which.
func TestRouteFleetQuotaSharedAcrossProxies(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	routes := []Route{
		{Name: "shared", PathPrefix: "/shared", Quota: &RouteQuota{Rate: 0.001, Burst: 2, Key: "header:X-Key"}},
		{Name: "own", PathPrefix: "/own", Quota: &RouteQuota{Rate: 0.001, Burst: 1, Key: "header:X-Key", Scope: ScopeLocal}},
	}
	var bases []string
	var clients []*http.Client
	var proxies []*Proxy
	for range 2 {
		p := mustNew(t, Config{Upstreams: []*url.URL{up}, Routes: routes,
			// A generous Timeout: on a loaded machine a 50 ms one fails open
			// (admits) and the test would read that as a quota not shared.
			FleetQuotas: &redisquota.Config{Client: client, Prefix: "proxytest:", Timeout: time.Second}})
		base, c := front(t, p)
		bases, clients, proxies = append(bases, base), append(clients, c), append(proxies, p)
	}
	for i, step := range []struct {
		proxy int
		path  string
		want  int
	}{
		{0, "/shared", 200}, {1, "/shared", 200}, // the fleet bucket of 2 is spent, one at each proxy
		{0, "/shared", 429}, {1, "/shared", 429},
		{0, "/own", 200}, {1, "/own", 200}, // each proxy's own bucket of 1
		{0, "/own", 429},
	} {
		code, rb, _, _ := get(t, clients[step.proxy], bases[step.proxy]+step.path, "X-Key", "alice")
		if code != step.want || (code == 429 && rb.Gate != strings.TrimPrefix(step.path, "/")+"-quota") {
			t.Fatalf("step %d: %s at proxy %d: %d %+v; want %d", i, step.path, step.proxy, code, rb, step.want)
		}
	}
	st := proxies[1].State()
	if r := st.Routes[0]; r.QuotaScope != ScopeFleet || r.Fleet == nil || r.Quota.Limited != 1 || r.Quota.Allowed != 1 {
		t.Fatalf("fleet route in /state: %+v (fleet %+v)", r, r.Fleet)
	}
	if r := st.Routes[1]; r.QuotaScope != ScopeLocal || r.Fleet != nil {
		t.Fatalf("local route in /state: %+v", r)
	}
}

func TestFleetScopeNeedsAStore(t *testing.T) {
	up, _ := url.Parse("http://127.0.0.1:9")
	_, err := New(Config{Upstreams: []*url.URL{up}, Routes: []Route{{Name: "a", Quota: &RouteQuota{Rate: 1, Scope: ScopeFleet}}}})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "needs a fleet store") {
		t.Fatalf("fleet scope without FleetQuotas: %v", err)
	}
	_, err = ParseRules(strings.NewReader(`{"routes":[{"name":"a","quota":{"rate":1,"scope":"global"}}]}`))
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `scope "global"`) {
		t.Fatalf("unknown scope: %v", err)
	}
}
