package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
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

// TestAdaptiveRampStepsBackOnQueueAge: the proxy's adaptive gate is built
// with its limit reading the gate's queue, so the recovery ramp steps
// back when the oldest queued request's age doubles, as sluice serve's
// does. More workers than slots keep a queue standing through an
// overload (slow upstream), the recovery (fast again, the ramp climbing)
// and then a burst of new callers that leaves the queue standing much
// longer. Each worker's hold differs a little, so that releases, and the
// queue's state, never move in lockstep. Virtual time: about 6 s of it,
// and some 30 000 admissions, which take about a second of wall time
// under the race detector.
func TestAdaptiveRampStepsBackOnQueueAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gs, err := newGateSet(GateUpstream, 40, 1000, 10*time.Second,
			Limit{Law: "gradient2", Min: 4, SLO: Duration(50 * time.Millisecond)}, Queueing{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := gs.adaptive
		var hold atomic.Int64 // the upstream's latency, ns
		hold.Store(int64(10 * time.Millisecond))
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		started := 0
		workers := func(n int) {
			for range n {
				jitter := time.Duration(started) * 11 * time.Microsecond
				started++
				wg.Go(func() {
					for ctx.Err() == nil {
						p, err := gs.gate.Acquire(ctx)
						if err != nil {
							time.Sleep(time.Millisecond)
							continue
						}
						time.Sleep(time.Duration(hold.Load()) + jitter)
						p.Done(admit.OutcomeOK)
					}
				})
			}
		}
		defer func() {
			cancel()
			wg.Wait()
			gs.gate.Close()
		}()

		workers(60)             // 20 more than the 40 slots: a queue stands
		time.Sleep(time.Second) // healthy: the limit learns the baseline
		hold.Store(int64(200 * time.Millisecond))
		time.Sleep(1500 * time.Millisecond) // overload: an episode, the limit cut
		if st := a.State(); !st.Episode || st.Limit >= 40 {
			t.Fatalf("a slow upstream did not start an episode and cut the limit: %+v", st)
		}
		hold.Store(int64(10 * time.Millisecond))
		climbing := false
		for range 40 { // recovery: the ramp starts and climbs a step
			time.Sleep(100 * time.Millisecond)
			if r := a.State().Ramp; r.Active && r.Level >= 1 {
				climbing = true
				break
			}
		}
		if !climbing {
			t.Fatalf("the ramp did not start and climb: %+v", a.State())
		}
		if age := gs.gate.OldestWait(); age <= 0 {
			t.Fatalf("no queue while the ramp climbs (oldest wait %v): the test needs one", age)
		}
		workers(200) // the queue now stands several times longer
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			if r := a.State().Ramp; r.Decision == limit.DecisionRampBack && r.Why == "queue_age_rose" {
				return
			}
		}
		t.Fatalf("the ramp did not step back when the queue's age rose: %+v", a.State().Ramp)
	})
}
