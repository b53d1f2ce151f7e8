package proxy

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestAdaptiveGates: an adaptive upstream gate and an adaptive route gate
// are attached to their limits, shown in State, start at their ceiling
// and never leave Min..Max while traffic flows.
func TestAdaptiveGates(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Millisecond) })
	p := mustNew(t, Config{
		Upstreams: []*url.URL{up}, MaxInflight: 32,
		Limit:  Limit{Law: "aimd", Min: 4, SLO: Duration(50 * time.Millisecond)},
		Routes: []Route{{Name: "r", PathPrefix: "/r", MaxInflight: 8, Limit: Limit{Law: "vegas", Min: 2, Max: 6}}},
	})
	base, c := front(t, p)
	if n := len(p.Adaptives()); n != 2 {
		t.Fatalf("%d adaptive limits, want 2", n)
	}
	st := p.State()
	if st.Upstream.Limit == nil || st.Upstream.Limit.Law != "aimd" || st.Upstream.Capacity != 32 {
		t.Fatalf("upstream gate state %+v", st.Upstream)
	}
	if g := st.Routes[0].Gate; g == nil || g.Limit == nil || g.Capacity != 6 {
		t.Fatalf("route gate state %+v; want vegas starting at its limit_max 6", g)
	}
	for range 200 {
		get(t, c, base+"/r/x")
	}
	st = p.State()
	if c := st.Upstream.Capacity; c < 4 || c > 32 {
		t.Fatalf("upstream capacity %d outside 4..32", c)
	}
	if c := st.Routes[0].Gate.Capacity; c < 2 || c > 6 {
		t.Fatalf("route capacity %d outside 2..6", c)
	}
	waitIdle(t, p, time.Second)
}

func TestNewRejectsBadConfig(t *testing.T) {
	a, _ := url.Parse("http://127.0.0.1:1/api")
	b, _ := url.Parse("http://127.0.0.1:2/other")
	ftp, _ := url.Parse("ftp://127.0.0.1:1")
	for name, cfg := range map[string]Config{
		"no upstream":          {},
		"bad scheme":           {Upstreams: []*url.URL{ftp}},
		"different paths":      {Upstreams: []*url.URL{a, b}},
		"negative inflight":    {Upstreams: []*url.URL{a}, MaxInflight: -1},
		"limit above ceiling":  {Upstreams: []*url.URL{a}, MaxInflight: 4, Limit: Limit{Law: "aimd", Max: 5}},
		"unknown law":          {Upstreams: []*url.URL{a}, Limit: Limit{Law: "magic"}},
		"route without a name": {Upstreams: []*url.URL{a}, Routes: []Route{{PathPrefix: "/x"}}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: error %v, want ErrInvalidConfig", name, err)
		}
	}
}
