package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// newClient returns a client that fails fast: a dead Redis must reach the
// breaker, not be retried for seconds.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 32,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const fleetYAML = `
domain: fleet
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 300, algorithm: fixed_window}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 300}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 300, fail: closed}
  - key: fixedclosed
    rate_limit: {unit: hour, requests_per_unit: 300, algorithm: fixed_window, fail: closed}
`

// waitAwayFromHourEdge keeps a fixed-window test from straddling two
// windows of Redis's clock.
func waitAwayFromHourEdge(t *testing.T, c *redis.Client) {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Hour - time.Duration(now.UnixNano()%int64(time.Hour)); left < 30*time.Second {
		t.Logf("waiting %v for the next hour's window", left)
		time.Sleep(left + 100*time.Millisecond)
	}
}

// TestFleetOfThreeSharesOneLimit runs three services on one Redis, four
// callers each, all hitting one key until they are refused: together
// they must admit the limit, within 5 %. (Callers stop at their first
// refusal rather than after a fixed count, so that no instance stops
// while holding leased tokens it would have spent.)
func TestFleetOfThreeSharesOneLimit(t *testing.T) {
	srv := redistest.Start(t)
	waitAwayFromHourEdge(t, newClient(t, srv.Addr()))
	for _, tc := range []struct {
		name  string
		key   string
		spend redisquota.Mode
	}{
		{"fixed_window", "fixed", redisquota.Exact},
		{"gcra_exact", "gcra", redisquota.Exact},
		{"gcra_lease", "gcra", redisquota.Lease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fleet []*Service
			for i := range 3 {
				fleet = append(fleet, mustService(t, Config{
					Redis: newClient(t, srv.Addr()), Prefix: "t:" + tc.name + ":", Spend: tc.spend, Instances: 3,
					Timeout: time.Second,
				}, fleetYAML))
				_ = i
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for _, s := range fleet {
				for range 4 {
					wg.Go(func() {
						for range 400 {
							resp, err := s.ShouldRateLimit(context.Background(), req("fleet", desc(tc.key, "k")))
							if err != nil {
								t.Error(err)
								return
							}
							if resp.OverallCode != pb.RateLimitResponse_OK {
								return
							}
							admitted.Add(1)
						}
					})
				}
			}
			wg.Wait()
			if n := admitted.Load(); n < 285 || n > 315 {
				t.Errorf("three instances admitted %d, want 300 (within 5%%)", n)
			}
			for _, s := range fleet {
				if st := s.State(); st.Mode != quota.ModeFleet {
					t.Errorf("mode %q, want fleet", st.Mode)
				}
			}
		})
	}
}

// decideTimed decides one descriptor and says how long it took.
func decideTimed(t *testing.T, s *Service, key, value string) (pb.RateLimitResponse_Code, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := s.ShouldRateLimit(context.Background(), req("fleet", desc(key, value)))
	if err != nil {
		t.Fatal(err)
	}
	return resp.OverallCode, time.Since(start)
}

// TestRedisFaults kills, pauses and slows Redis under services with each
// fail policy: every answer comes within the timeout (plus scheduling
// slack), fail open admits this instance's share, fail closed refuses,
// and the fleet mode comes back by itself.
// It takes about five seconds: each fault lasts until the breakers have
// opened and, after it, until their one-second cooldowns let probes close
// them again.
func TestRedisFaults(t *testing.T) {
	const timeout = 50 * time.Millisecond
	const slack = 150 * time.Millisecond // a loaded 2-core machine with -race
	srv := redistest.Start(t)
	waitAwayFromHourEdge(t, newClient(t, srv.Addr()))
	s := mustService(t, Config{Redis: newClient(t, srv.Addr()), Instances: 3, Timeout: timeout}, fleetYAML)
	admin := newClient(t, srv.Addr())
	for _, k := range []string{"gcra", "fixed", "closed", "fixedclosed"} {
		if code, _ := decideTimed(t, s, k, "up"); code != pb.RateLimitResponse_OK {
			t.Fatalf("%s with Redis up: %v", k, code)
		}
	}
	for _, fault := range []struct {
		name        string
		start, stop func()
	}{
		{"killed", srv.Kill, srv.Restart},
		{"paused", srv.Pause, srv.Resume},
		{"slow", func() {
			if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
				t.Fatal(err)
			}
		}, func() {}},
	} {
		t.Run(fault.name, func(t *testing.T) {
			fault.start()
			stopped := false
			defer func() {
				if !stopped {
					fault.stop()
				}
			}()
			// Fail open: this instance's share of 300 is 100 per hour,
			// decided here; 150 hits admit at most 100.
			open, fixedOpen := 0, 0
			for range 150 {
				code, took := decideTimed(t, s, "gcra", fault.name)
				if took > timeout+slack {
					t.Fatalf("gcra decided in %v with a %v timeout", took, timeout)
				}
				if code == pb.RateLimitResponse_OK {
					open++
				}
				code, took = decideTimed(t, s, "fixed", fault.name)
				if took > timeout+slack {
					t.Fatalf("fixed window decided in %v with a %v timeout", took, timeout)
				}
				if code == pb.RateLimitResponse_OK {
					fixedOpen++
				}
			}
			if open > 100 || open == 0 || fixedOpen > 100 || fixedOpen == 0 {
				t.Errorf("fail open admitted gcra %d, fixed %d of 150: want this instance's share, at most 100", open, fixedOpen)
			}
			for _, k := range []string{"closed", "fixedclosed"} {
				code, took := decideTimed(t, s, k, fault.name)
				if code != pb.RateLimitResponse_OVER_LIMIT || took > timeout+slack {
					t.Errorf("fail closed %s: %v in %v, want OVER_LIMIT within the timeout", k, code, took)
				}
			}
			if st := s.State(); st.Mode != quota.ModeFallback {
				t.Errorf("mode %q while Redis is %s, want fallback", st.Mode, fault.name)
			}
			fault.stop()
			stopped = true
			testutil.Eventually(t, "fleet mode back after the fault", func() bool {
				for _, k := range []string{"gcra", "fixed", "closed", "fixedclosed"} {
					_, _ = decideTimed(t, s, k, fault.name)
				}
				time.Sleep(50 * time.Millisecond)
				return s.State().Mode == quota.ModeFleet
			})
			if code, _ := decideTimed(t, s, "closed", fault.name); code != pb.RateLimitResponse_OK {
				t.Errorf("fail closed after recovery: %v", code)
			}
		})
	}
	fallbacks := uint64(0)
	for _, d := range s.State().Domains {
		for _, r := range d.Rules {
			fallbacks += r.Stats.FallbackDecisions
		}
	}
	if fallbacks == 0 {
		t.Error("no fallback decisions counted")
	}
}
