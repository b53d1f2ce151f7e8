package redisquota

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/quota"
)

func TestExactRetryAfterFromRedis(t *testing.T) {
	_, c := startRedis(t)
	q := mustNew(t, Config{Name: "api", Rate: 10, Burst: 5, Client: c, Timeout: loadedTimeout})
	ctx := context.Background()
	for i := range 5 {
		d, err := q.Decide(ctx, "k", 1)
		if err != nil {
			t.Fatalf("token %d of the burst: %v", i, err)
		}
		if d.Remaining != 4-i {
			t.Fatalf("token %d: remaining %d, want %d", i, d.Remaining, 4-i)
		}
	}
	_, err := q.Decide(ctx, "k", 3)
	var re *admit.RejectedError
	if !errors.As(err, &re) || re.Reason() != admit.ReasonRate {
		t.Fatalf("want a rate refusal, got %v", err)
	}
	// 3 tokens at 10/s: about 300 ms, less the little time spent so far.
	if re.RetryAfter() > 300*time.Millisecond || re.RetryAfter() < 200*time.Millisecond {
		t.Fatalf("RetryAfter %v, want just under 300ms (refill for cost 3)", re.RetryAfter())
	}
	if _, err := q.Decide(ctx, "k", 6); !errors.Is(err, quota.ErrCostOverBurst) {
		t.Fatalf("cost above burst: %v", err)
	}
	if st := q.State(); st.Mode != quota.ModeFleet || st.Breaker != "closed" {
		t.Fatalf("state %+v", st)
	}
}

// run offers decisions for key from every quota on its own goroutines
// until stop, and returns the tokens admitted.
func hammer(qs []*Quota, key string, d time.Duration) (admitted int64, elapsed time.Duration) {
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, q := range qs {
		for range 3 {
			wg.Go(func() {
				for time.Since(start) < d {
					if _, err := q.Decide(context.Background(), key, 1); err == nil {
						n.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	return n.Load(), time.Since(start)
}

// loadedTimeout keeps decisions on Redis on a loaded test machine: these
// tests are about the shared bucket, not the fallback.
const loadedTimeout = 2 * time.Second

// offered is how many decisions the quotas were asked for.
func offered(qs []*Quota) float64 {
	var n uint64
	for _, q := range qs {
		s := q.Stats()
		n += s.Allowed + s.Limited + s.RejectedFull + s.RejectedStore
	}
	return float64(n)
}

// fallbacks is how many decisions the quotas made without Redis (each
// may admit outside the shared bucket); normally zero.
func fallbacks(qs []*Quota) float64 {
	var n uint64
	for _, q := range qs {
		n += q.Stats().FallbackDecisions
	}
	return float64(n)
}

func TestExactSharedByInstances(t *testing.T) {
	srv, _ := startRedis(t)
	const rate, burst = 200.0, 20
	var qs []*Quota
	for range 3 {
		qs = append(qs, mustNew(t, Config{Name: "shared", Rate: rate, Burst: burst, Client: newClient(t, srv.Addr()), Timeout: loadedTimeout}))
	}
	got, el := hammer(qs, "client", 500*time.Millisecond)
	bound := burst + rate*el.Seconds() + 1 + fallbacks(qs)
	if float64(got) > bound {
		t.Fatalf("three instances admitted %d in %v, the shared bound is %.0f", got, el, bound)
	}
	// The floor is judged against what the quota could admit: the bound,
	// or fewer when a loaded machine offered fewer decisions than that.
	if floor := 0.5 * min(bound, offered(qs)); float64(got) < floor {
		t.Fatalf("admitted %d of %.0f offered in %v: far below the quota %.0f, the instances are not sharing it well", got, offered(qs), el, bound)
	}
}

// TestRedisClockDecides: instances whose clocks are an hour apart still
// share one bucket, because the script reads Redis's TIME.
func TestRedisClockDecides(t *testing.T) {
	srv, _ := startRedis(t)
	const rate, burst = 100.0, 10
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	behind := func() time.Time { return time.Now().Add(-time.Hour) }
	qs := []*Quota{
		mustNew(t, Config{Name: "skew", Rate: rate, Burst: burst, Client: newClient(t, srv.Addr()), Now: ahead, Timeout: loadedTimeout}),
		mustNew(t, Config{Name: "skew", Rate: rate, Burst: burst, Client: newClient(t, srv.Addr()), Now: behind, Timeout: loadedTimeout}),
		mustNew(t, Config{Name: "skew", Rate: rate, Burst: burst, Client: newClient(t, srv.Addr()), Timeout: loadedTimeout}),
	}
	got, el := hammer(qs, "k", 300*time.Millisecond)
	bound := burst + rate*el.Seconds() + 1 + fallbacks(qs)
	if float64(got) > bound {
		t.Fatalf("skewed instances admitted %d in %v, bound %.0f: a client clock leaked into the decision", got, el, bound)
	}
	if skew := qs[0].State().ClockSkew; skew > -59*time.Minute || skew < -61*time.Minute {
		t.Fatalf("instance an hour ahead reports skew %v, want about -1h", skew)
	}
}

// TestLeaseOverAdmissionBound: lease mode admits at most Burst +
// Rate*window + Instances*LeaseSize, with far fewer round trips.
func TestLeaseOverAdmissionBound(t *testing.T) {
	srv, _ := startRedis(t)
	const rate, burst, size = 300.0, 30, 10
	var qs []*Quota
	for range 3 {
		qs = append(qs, mustNew(t, Config{Name: "lease", Rate: rate, Burst: burst, Mode: Lease, LeaseSize: size,
			Client: newClient(t, srv.Addr()), Timeout: loadedTimeout}))
	}
	got, el := hammer(qs, "k", 500*time.Millisecond)
	bound := burst + rate*el.Seconds() + 3*size + 1 + fallbacks(qs)
	if float64(got) > bound {
		t.Fatalf("lease mode admitted %d in %v, documented bound %.0f", got, el, bound)
	}
	var calls, allowed uint64
	for _, q := range qs {
		calls += q.LeaseCalls()
		allowed += q.Stats().Allowed
	}
	if allowed != uint64(got) {
		t.Fatalf("stats say %d allowed, counted %d", allowed, got)
	}
	t.Logf("%d admitted in %v with %d round trips (bound %.0f)", got, el, calls, bound)
}

func TestLeaseBatches(t *testing.T) {
	_, c := startRedis(t)
	// A long LeaseTTL: the default (10 ms here) can pass between two
	// decisions on a loaded machine, and an expired lease is fetched again.
	q := mustNew(t, Config{Name: "batch", Rate: 1000, Burst: 100, Mode: Lease, LeaseSize: 10, LeaseTTL: time.Minute, Client: c, Timeout: loadedTimeout})
	for i := range 50 {
		if _, err := q.Decide(context.Background(), "k", 1); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
	}
	if n := q.LeaseCalls(); n > 6 {
		t.Fatalf("50 decisions with leases of 10 took %d round trips, want at most 6", n)
	}
}

// TestLeaseExpires: tokens leased but not spent within LeaseTTL are
// dropped, so a lease cannot carry old tokens into a bucket the fleet has
// since emptied.
func TestLeaseExpires(t *testing.T) {
	srv, _ := startRedis(t)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	a := mustNew(t, Config{Name: "ttl", Rate: 0.1, Burst: 10, Mode: Lease, LeaseSize: 5, LeaseTTL: time.Second,
		Client: newClient(t, srv.Addr()), Now: clock, Timeout: loadedTimeout})
	b := mustNew(t, Config{Name: "ttl", Rate: 0.1, Burst: 10, Client: newClient(t, srv.Addr()), Timeout: loadedTimeout})
	ctx := context.Background()
	if _, err := a.Decide(ctx, "k", 1); err != nil { // leases 5, spends 1
		t.Fatal(err)
	}
	for i := range 5 { // b drains the rest of the bucket
		if _, err := b.Decide(ctx, "k", 1); err != nil {
			t.Fatalf("drain %d: %v", i, err)
		}
	}
	if _, err := b.Decide(ctx, "k", 1); err == nil {
		t.Fatal("bucket should be empty")
	}
	if _, err := a.Decide(ctx, "k", 1); err != nil {
		t.Fatalf("a still holds 4 leased tokens within the TTL: %v", err)
	}
	offset.Store(int64(2 * time.Second)) // a's lease is now past its TTL
	if _, err := a.Decide(ctx, "k", 1); err == nil {
		t.Fatal("a spent a token from a lease past its TTL")
	}
}

func TestFailOpenShare(t *testing.T) {
	c := newClient(t, deadAddr(t))
	q := mustNew(t, Config{Name: "share", Rate: 4, Burst: 40, Instances: 4, Client: c, BreakerCooldown: time.Hour})
	ctx := context.Background()
	admitted := 0
	for range 40 {
		if _, err := q.Decide(ctx, "k", 1); err == nil {
			admitted++
		} else if !errors.Is(err, admit.ErrRejected) {
			t.Fatalf("fallback must refuse like a quota: %v", err)
		}
	}
	if admitted != 10 {
		t.Fatalf("Redis down, 4 instances, burst 40: this instance admitted %d at once, want its share 10", admitted)
	}
	st := q.Stats()
	if st.Mode != quota.ModeFallback || st.FallbackDecisions != 40 || st.Breaker != "open" {
		t.Fatalf("stats %+v", st)
	}
	// The store breaker is a breaker like any other, for metrics.
	if b := q.Breaker(); b.Name() != "share.redis" || b.State() != breaker.Open || b.Stats().Transitions[breaker.Closed][breaker.Open] != 1 {
		t.Fatalf("store breaker %q in state %v, stats %+v; want share.redis, opened once", b.Name(), b.State(), b.Stats())
	}
	// Three failures opened the breaker: later decisions do not dial.
	if st.StoreErrors != DefaultBreakerFailures {
		t.Fatalf("store errors %d: the breaker should have stopped calls after %d", st.StoreErrors, DefaultBreakerFailures)
	}
}

func TestFailClosed(t *testing.T) {
	c := newClient(t, deadAddr(t))
	q := mustNew(t, Config{Name: "closed", Rate: 10, Burst: 10, Fallback: FailClosed, Client: c})
	_, err := q.Decide(context.Background(), "k", 1)
	var re *admit.RejectedError
	if !errors.As(err, &re) || re.Reason() != admit.ReasonBreakerOpen {
		t.Fatalf("fail closed: got %v, want a breaker_open refusal", err)
	}
	if q.Stats().RejectedStore != 1 {
		t.Fatalf("stats %+v", q.Stats())
	}
}

// TestRedisKilledAndRestarted: killed mid-run, decisions fall back within
// 100 ms and never hang; restarted, fleet mode resumes by itself.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv, c := startRedis(t)
	q := mustNew(t, Config{Name: "crash", Rate: 1000, Burst: 100, Instances: 2, Client: c, BreakerCooldown: 200 * time.Millisecond})
	ctx := context.Background()
	var slowest atomic.Int64
	var fallbackAt atomic.Int64
	stop := make(chan struct{})
	var killedAt atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, _ = q.Decide(ctx, "k", 1)
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d)
				}
				if k := killedAt.Load(); k != 0 && q.State().Mode == quota.ModeFallback {
					fallbackAt.CompareAndSwap(0, time.Now().UnixNano())
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	// Before the kill, decisions are on Redis. On a loaded machine a round
	// trip can miss the 50 ms timeout and open the breaker for its
	// cooldown; wait for the fleet mode rather than assume it. (A longer
	// timeout would not do: it also lets go-redis retry its dials after
	// the kill, and the fallback comes late.)
	testutil.Eventually(t, "fleet mode before the kill", func() bool { return q.State().Mode == quota.ModeFleet })
	killedAt.Store(time.Now().UnixNano())
	srv.Kill()
	deadline := time.Now().Add(2 * time.Second)
	for fallbackAt.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fallbackAt.Load() == 0 {
		close(stop)
		wg.Wait()
		t.Fatal("no fallback within 2s of the kill")
	}
	if lag := time.Duration(fallbackAt.Load() - killedAt.Load()); lag > 100*time.Millisecond {
		t.Errorf("fallback engaged %v after the kill, want within 100ms", lag)
	}
	srv.Restart()
	// Connections pooled before the kill fail once each after the
	// restart, and may open the breaker again for a cooldown: wait for
	// fleet mode with the breaker closed, while the callers keep going.
	deadline = time.Now().Add(3 * time.Second)
	resumed := func() bool { st := q.State(); return st.Mode == quota.ModeFleet && st.Breaker == "closed" }
	for !resumed() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ok := resumed()
	close(stop)
	wg.Wait()
	if !ok {
		t.Fatalf("after the restart the fleet mode must resume by itself: %+v", q.State())
	}
	if s := time.Duration(slowest.Load()); s > q.timeout+250*time.Millisecond {
		t.Fatalf("slowest decision took %v: a dead Redis must not hang callers", s)
	}
}

// TestSlowRedis: a paused Redis costs each caller at most the timeout;
// after BreakerFailures timeouts the breaker opens and decisions stop
// waiting; when Redis answers again the breaker closes.
// Over a second: Redis is paused for 800 ms and the breaker's cooldown is
// waited out on the real clock.
func TestSlowRedis(t *testing.T) {
	srv, c := startRedis(t)
	var logs syncBuffer
	q := mustNew(t, Config{Name: "slow", Rate: 1000, Burst: 100, Client: c, Timeout: 30 * time.Millisecond,
		BreakerCooldown: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	if _, err := q.Decide(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, srv.Addr())
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "800", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	var times []time.Duration
	for range 6 {
		start := time.Now()
		_, _ = q.Decide(ctx, "k", 1)
		times = append(times, time.Since(start))
	}
	for i, d := range times[:DefaultBreakerFailures] {
		if d > 30*time.Millisecond+150*time.Millisecond {
			t.Fatalf("decision %d took %v with a 30ms timeout", i, d)
		}
	}
	for i, d := range times[DefaultBreakerFailures:] {
		if d > 20*time.Millisecond { // a call would wait the 30ms timeout
			t.Fatalf("decision %d took %v after the breaker opened: it still waits for Redis", i+DefaultBreakerFailures, d)
		}
	}
	if st := q.State(); st.Breaker != "open" || st.Mode != quota.ModeFallback {
		t.Fatalf("state %+v", st)
	}
	deadline := time.Now().Add(3 * time.Second)
	for q.State().Mode != quota.ModeFleet && time.Now().Before(deadline) {
		_, _ = q.Decide(ctx, "k", 1)
		time.Sleep(20 * time.Millisecond)
	}
	if st := q.State(); st.Mode != quota.ModeFleet {
		t.Fatalf("after the pause the breaker must close: %+v", st)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN msg=\"Redis unreachable; breaker open, deciding without it\" name=slow.redis") ||
		!strings.Contains(out, "level=INFO msg=\"Redis reachable again; breaker closed\"") {
		t.Errorf("the breaker's opening (a warning) and closing are not logged:\n%s", out)
	}
}

// TestCallerLeavingIsNotRedisFault: callers who leave (their context is
// canceled) while Redis hangs (a socket that accepts and never answers)
// are refused with reason canceled, and do not open the breaker: their
// calls say nothing about Redis.
func TestCallerLeavingIsNotRedisFault(t *testing.T) {
	q := mustNew(t, Config{Name: "left", Rate: 1000, Burst: 100, Client: newClient(t, silentAddr(t)), Timeout: 100 * time.Millisecond})
	for i := range 2 * DefaultBreakerFailures {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(10*time.Millisecond, cancel)
		_, err := q.Decide(ctx, "k", 1)
		stop.Stop()
		cancel()
		var re *admit.RejectedError
		if !errors.As(err, &re) || re.Reason() != admit.ReasonCanceled {
			t.Fatalf("decision %d whose caller left while Redis hung: %v, want a canceled refusal", i, err)
		}
	}
	if st := q.Breaker().Stats(); st.State != breaker.Closed || st.Transitions[breaker.Closed][breaker.Open] != 0 {
		t.Fatalf("callers that left opened the store breaker: %+v", st)
	}
}

// silentAddr is a loopback address that accepts connections and never
// answers on them: a Redis that hangs.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

func TestConfigValidation(t *testing.T) {
	c := newClient(t, deadAddr(t))
	bad := []Config{
		{}, {Client: c, Rate: -1}, {Client: c, Instances: -1}, {Client: c, Timeout: -1},
		{Client: c, Burst: 5, LeaseSize: 6}, {Client: c, Mode: 9}, {Client: c, Name: "a b"},
	}
	for _, cfg := range bad {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
