package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// TestConcurrentDecisionsReloadsAndScrapes decides from eight goroutines
// while another reloads the configuration (same rules: counters kept)
// and another scrapes metrics and /state. Each key must admit exactly its
// limit, counters sampled meanwhile must never go backwards, and the
// collector must stay consistent (a pedantic registry checks it).
func TestConcurrentDecisionsReloadsAndScrapes(t *testing.T) {
	const rules = `
domain: d
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 50, algorithm: fixed_window}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 50}
`
	clk := newClock(time.Date(2030, 1, 1, 12, 10, 0, 0, time.UTC))
	s := mustService(t, Config{Now: clk.Now}, rules)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())

	const keys, workers, hits = 4, 8, 100
	var admitted [2][keys]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			for i := range hits {
				k := (w + i) % keys
				for a, name := range []string{"fixed", "gcra"} {
					resp, err := s.ShouldRateLimit(context.Background(), req("d", desc(name, "k"+strconv.Itoa(k))))
					if err != nil {
						t.Error(err)
						return
					}
					if resp.OverallCode == pb.RateLimitResponse_OK {
						admitted[a][k].Add(1)
					}
				}
			}
		})
	}
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			tb, err := Parse("test.yaml", []byte(rules))
			if err == nil {
				err = s.SetTable(tb)
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	bg.Go(func() {
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Errorf("gather: %v", err)
				return
			}
			st := s.State()
			n := st.Domains[0].OK + st.Domains[0].OverLimit
			if n < last {
				t.Errorf("decisions went backwards: %d after %d", n, last)
				return
			}
			last = n
		}
	})
	wg.Wait()
	close(stop)
	bg.Wait()
	for a, name := range []string{"fixed", "gcra"} {
		for k := range keys {
			if n := admitted[a][k].Load(); n != 50 {
				t.Errorf("%s key %d admitted %d of %d, want its limit of 50", name, k, n, workers*hits/keys)
			}
		}
	}
	st := s.State()
	if d := st.Domains[0]; d.OK+d.OverLimit != 2*workers*hits {
		t.Errorf("state counts %d decisions, want %d", d.OK+d.OverLimit, 2*workers*hits)
	}
}
