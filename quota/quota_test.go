package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

func mustNew(t testing.TB, cfg Config) *Quota {
	t.Helper()
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func rejected(t *testing.T, err error) *admit.RejectedError {
	t.Helper()
	var re *admit.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("want a *admit.RejectedError, got %v", err)
	}
	return re
}

func TestRetryAfterFollowsRefill(t *testing.T) {
	q := mustNew(t, Config{Name: "api", Rate: 10, Burst: 5})
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		if err := q.AllowNAt("k", 1, t0); err != nil {
			t.Fatalf("token %d of the burst refused: %v", i, err)
		}
	}
	cases := []struct {
		cost int
		at   time.Duration
		want time.Duration
	}{
		{1, 0, 100 * time.Millisecond},
		{3, 0, 300 * time.Millisecond},
		{1, 40 * time.Millisecond, 60 * time.Millisecond},
		{5, 250 * time.Millisecond, 250 * time.Millisecond},
	}
	for _, c := range cases {
		re := rejected(t, q.AllowNAt("k", c.cost, t0.Add(c.at)))
		if re.Reason() != admit.ReasonRate || re.Gate() != "api" {
			t.Fatalf("refusal %+v: want reason rate from gate api", re)
		}
		if d := re.RetryAfter() - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("cost %d at +%v: RetryAfter %v, want %v (the bucket's refill time)", c.cost, c.at, re.RetryAfter(), c.want)
		}
		if !errors.Is(re, admit.ErrRejected) {
			t.Fatal("a quota refusal must match admit.ErrRejected")
		}
	}
	// Waiting exactly RetryAfter admits (a key of its own: "k" has seen
	// +250ms, and a bucket's time never goes back).
	for range 5 {
		_ = q.AllowNAt("k2", 1, t0)
	}
	re := rejected(t, q.AllowNAt("k2", 2, t0))
	if err := q.AllowNAt("k2", 2, t0.Add(re.RetryAfter())); err != nil {
		t.Fatalf("after RetryAfter %v the cost must be admitted: %v", re.RetryAfter(), err)
	}
	if re.RetryAfterSeconds() != 1 {
		t.Fatalf("RetryAfterSeconds %d, want 1 (rounded up)", re.RetryAfterSeconds())
	}
}

func TestRetryAfterLongWaitRoundsUp(t *testing.T) {
	q := mustNew(t, Config{Rate: 0.4, Burst: 2}) // 2.5 s per token
	t0 := time.Unix(1000, 0)
	_ = q.AllowNAt("k", 2, t0)
	re := rejected(t, q.AllowNAt("k", 1, t0))
	if re.RetryAfter() != 2500*time.Millisecond || re.RetryAfterSeconds() != 3 {
		t.Fatalf("RetryAfter %v (%d s), want 2.5s (3 s)", re.RetryAfter(), re.RetryAfterSeconds())
	}
}

func TestWeightedCosts(t *testing.T) {
	q := mustNew(t, Config{Rate: 1, Burst: 50})
	t0 := time.Unix(1000, 0)
	if err := q.AllowNAt("c", 50, t0); err != nil {
		t.Fatal(err)
	}
	if err := q.AllowNAt("c", 1, t0); err == nil {
		t.Fatal("a scan costing the whole burst must leave nothing for a point read")
	}
	if err := q.AllowNAt("other", 1, t0); err != nil {
		t.Fatalf("keys have separate buckets: %v", err)
	}
	if err := q.AllowNAt("c", 51, t0); !errors.Is(err, ErrCostOverBurst) {
		t.Fatalf("cost above the burst: got %v, want ErrCostOverBurst", err)
	}
	if err := q.AllowNAt("fresh", 0, t0); err != nil {
		t.Fatalf("cost 0 counts as 1: %v", err)
	}
}

func TestDecideReportsBucketState(t *testing.T) {
	q := mustNew(t, Config{Rate: 10, Burst: 20})
	t0 := time.Unix(1000, 0)
	d, err := q.DecideAt("k", 5, t0)
	if err != nil || d.Remaining != 15 || d.Reset != 500*time.Millisecond {
		t.Fatalf("got %+v, %v; want 15 remaining, reset 500ms", d, err)
	}
	d, err = q.DecideAt("k", 16, t0)
	if err == nil || d.Remaining != 15 {
		t.Fatalf("refusal: got %+v, %v", d, err)
	}
}

// Over a second under -race: 20,000 new keys through each of four table
// sizes.
func TestKeyTableBounded(t *testing.T) {
	for _, maxKeys := range []int{1, 100, 5000, 4097} {
		q := mustNew(t, Config{Rate: 1, Burst: 1, MaxKeys: maxKeys, IdleTimeout: -1})
		t0 := time.Unix(1000, 0)
		const n = 20_000
		for i := range n {
			if err := q.AllowNAt(fmt.Sprint("key-", i), 1, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				t.Fatalf("EvictLRU must admit a new key: %v", err)
			}
		}
		st := q.Stats()
		if q.Len() > maxKeys || st.Keys > maxKeys {
			t.Fatalf("MaxKeys %d: table holds %d keys", maxKeys, q.Len())
		}
		if st.EvictedLRU < uint64(n-maxKeys) {
			t.Fatalf("MaxKeys %d: %d LRU evictions, want at least %d", maxKeys, st.EvictedLRU, n-maxKeys)
		}
	}
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	q := mustNew(t, Config{Rate: 1, Burst: 3, MaxKeys: 4, IdleTimeout: -1})
	t0 := time.Unix(1000, 0)
	for i, k := range []string{"a", "b", "c", "d"} {
		_ = q.AllowNAt(k, 1, t0.Add(time.Duration(i)*time.Second))
	}
	// Touch a, c, d: b is now the least recently used.
	for i, k := range []string{"a", "c", "d"} {
		_ = q.AllowNAt(k, 1, t0.Add(time.Duration(10+i)*time.Second))
	}
	_ = q.AllowNAt("e", 1, t0.Add(20*time.Second))
	s := &q.shards[0]
	if s.lru.Contains("b") {
		t.Fatalf("b was the least recently used key and should have been evicted; table %v", s.lru.Keys())
	}
	if s.lru.Len() != 4 || !s.lru.Contains("e") {
		t.Fatalf("table %v, want 4 keys with e", s.lru.Keys())
	}
}

func TestRefuseNewWhenFull(t *testing.T) {
	q := mustNew(t, Config{Name: "tight", Rate: 1, Burst: 1, MaxKeys: 2, IdleTimeout: time.Minute, WhenFull: RefuseNew})
	t0 := time.Unix(1000, 0)
	_ = q.AllowNAt("a", 1, t0)
	_ = q.AllowNAt("b", 1, t0)
	re := rejected(t, q.AllowNAt("c", 1, t0.Add(time.Second)))
	if re.Reason() != admit.ReasonFull || !re.Reason().Overload() {
		t.Fatalf("new key into a full RefuseNew table: reason %v, want full", re.Reason())
	}
	if st := q.Stats(); st.RejectedFull != 1 || st.Keys != 2 || st.EvictedLRU != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Once a key has been idle for IdleTimeout it makes room.
	if err := q.AllowNAt("c", 1, t0.Add(time.Minute)); err != nil {
		t.Fatalf("an idle key must make room: %v", err)
	}
	if st := q.Stats(); st.EvictedIdle == 0 {
		t.Fatalf("stats %+v: want an idle eviction", st)
	}
}

func TestSweepEvictsIdleKeys(t *testing.T) {
	q := mustNew(t, Config{Rate: 10, Burst: 10}) // refill 1 s -> IdleTimeout 1 s
	t0 := time.Unix(1000, 0)
	now := time.Now()
	for i := range 100 {
		_ = q.AllowNAt(fmt.Sprint(i), 1, now)
	}
	_ = t0
	if n := q.Sweep(now.Add(999 * time.Millisecond)); n != 0 {
		t.Fatalf("swept %d keys before they were idle", n)
	}
	_ = q.AllowNAt("7", 1, now.Add(500*time.Millisecond))
	if n := q.Sweep(now.Add(time.Second)); n != 99 {
		t.Fatalf("swept %d keys, want 99 (key 7 was used since)", n)
	}
	if q.Len() != 1 || q.Stats().EvictedIdle != 99 {
		t.Fatalf("len %d, stats %+v", q.Len(), q.Stats())
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Rate: -1}, {Rate: math.NaN()}, {Rate: math.Inf(1)}, {Burst: -1}, {MaxKeys: -5},
		{Name: "has space"}, {Name: string(make([]byte, 65))}, {WhenFull: 7},
	}
	for _, c := range bad {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): got %v, want ErrInvalidConfig", c, err)
		}
	}
	q := mustNew(t, Config{})
	if p := q.Shape(); p.Name != "quota" || p.Rate != DefaultRate || p.Burst != 10 || q.MaxKeys() != DefaultMaxKeys {
		t.Fatalf("zero Config: shape %+v, max keys %d", p, q.MaxKeys())
	}
	q = mustNew(t, Config{Rate: 0.5})
	if q.Shape().Burst != 1 {
		t.Fatalf("burst for rate 0.5: %d, want 1", q.Shape().Burst)
	}
}

func TestKnownKeyAllocatesNothing(t *testing.T) {
	q := mustNew(t, Config{Rate: 1e9, Burst: 1 << 20})
	_ = q.Allow("client-1")
	if n := testing.AllocsPerRun(1000, func() { _ = q.Allow("client-1") }); n != 0 {
		t.Fatalf("allow of a known key allocated %v times", n)
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _, _ = q.Decide(ctx, "client-1", 1) }); n != 0 {
		t.Fatalf("Decide of a known key allocated %v times", n)
	}
}

type countingObserver struct {
	allowed, limited, evicted atomic.Int64
}

func (o *countingObserver) ObserveQuota(ev Event) {
	switch {
	case ev.Evicted != NotEvicted:
		o.evicted.Add(1)
	case ev.Allowed:
		o.allowed.Add(1)
	default:
		o.limited.Add(1)
	}
}

// TestConcurrentDecisions runs many goroutines against a few keys with the
// real clock and checks the invariants: every decision counted once, and
// no key admitted more than its burst plus its rate times the elapsed
// time.
func TestConcurrentDecisions(t *testing.T) {
	obs := &countingObserver{}
	const rate, burst = 1000.0, 50
	q := mustNew(t, Config{Rate: rate, Burst: burst, MaxKeys: 3, Observer: obs})
	keys := []string{"a", "b", "c", "d"} // one more than fits: evictions race decisions
	var admitted [4]atomic.Int64
	var attempts atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				k := (g + i) % len(keys)
				attempts.Add(1)
				if err := q.AllowN(keys[k], 1+i%3); err == nil {
					admitted[k].Add(int64(1 + i%3))
				} else if !errors.Is(err, admit.ErrRejected) {
					t.Errorf("unexpected error %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	st := q.Stats()
	if got := st.Allowed + st.Limited + st.RejectedFull; got != uint64(attempts.Load()) {
		t.Fatalf("allowed+limited+refused = %d, attempts %d", got, attempts.Load())
	}
	if uint64(obs.allowed.Load()) != st.Allowed || uint64(obs.limited.Load()) != st.Limited+st.RejectedFull {
		t.Fatalf("observer saw %d/%d, stats %+v", obs.allowed.Load(), obs.limited.Load(), st)
	}
	if uint64(obs.evicted.Load()) != st.EvictedIdle+st.EvictedLRU {
		t.Fatalf("observer saw %d evictions, stats %+v", obs.evicted.Load(), st)
	}
	if st.Keys > 3 {
		t.Fatalf("table grew to %d keys", st.Keys)
	}
	// An evicted key comes back with a full bucket, so each eviction can
	// add one burst.
	for k := range keys {
		bound := float64(burst)*float64(1+st.EvictedLRU+st.EvictedIdle) + rate*elapsed + 1
		if float64(admitted[k].Load()) > bound {
			t.Fatalf("key %s admitted %d tokens in %.3fs, bound %.0f", keys[k], admitted[k].Load(), elapsed, bound)
		}
	}
}

// TestConcurrentSingleKeyNeverOverAdmits: with the table never full, a
// hot key shared by many goroutines gets at most burst + rate*elapsed.
// TestEarlierTimeNeverCreditsAgain: a decision whose time is earlier
// than the key's last one (concurrent callers read the clock before they
// take the lock, so one can arrive late) decides at the last time, never
// moves the bucket back: otherwise the next decision would be credited
// the same interval twice.
func TestEarlierTimeNeverCreditsAgain(t *testing.T) {
	q := mustNew(t, Config{Rate: 10, Burst: 2})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{time.Second, 500 * time.Millisecond} { // the second arrives late
		if err := q.AllowNAt("k", 1, t0.Add(at)); err != nil {
			t.Fatalf("token at +%v: %v, want one of the burst", at, err)
		}
	}
	if err := q.AllowNAt("k", 1, t0.Add(time.Second)); err == nil {
		t.Fatal("the burst is spent, yet a third token at +1s: the half second before it was credited again")
	}
	if err := q.AllowNAt("k", 1, t0.Add(time.Second+100*time.Millisecond)); err != nil {
		t.Fatalf("a tenth of a second later at 10/s: %v, want a token", err)
	}
}

func TestConcurrentSingleKeyNeverOverAdmits(t *testing.T) {
	const rate, burst = 2000.0, 20
	q := mustNew(t, Config{Rate: rate, Burst: burst})
	var admitted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5000 {
				if q.Allow("hot") == nil {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	bound := burst + rate*time.Since(start).Seconds() + 1
	if got := float64(admitted.Load()); got > bound {
		t.Fatalf("admitted %.0f, bound %.0f", got, bound)
	}
	if admitted.Load() < burst {
		t.Fatalf("admitted %d, want at least the burst %d", admitted.Load(), burst)
	}
}
