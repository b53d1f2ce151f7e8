package quota_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// latencies collects per-decision latencies from parallel workers.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

func (l *latencies) p99() time.Duration {
	if len(l.all) == 0 {
		return 0
	}
	slices.Sort(l.all)
	return l.all[len(l.all)*99/100]
}

// BenchmarkRedis compares fleet decisions against one local
// redis-server, in one run: go-redis/redis_rate v10 (GCRA, one round trip,
// the peer), redisquota in exact mode (one round trip) and in lease mode
// (leases of 10 tokens). Each worker has its own key; the rate never
// refuses, so the admit path is measured. Reported: ns/op (inverse of
// decisions per second across all workers) and p99 per-decision latency.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	const burst = 100
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, MaxRetries: -1})
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	run := func(b *testing.B, decide func(ctx context.Context, key string) error) {
		var lat latencies
		var worker atomic.Int64
		b.SetParallelism(8) // 16 workers on 2 cores: round trips overlap
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			key := "bench-" + strconv.FormatInt(worker.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			local := make([]time.Duration, 0, 4096)
			for pb.Next() {
				start := time.Now()
				if err := decide(ctx, key); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(start))
			}
			lat.add(local)
		})
		b.StopTimer()
		b.ReportMetric(float64(lat.p99().Microseconds()), "p99-µs")
	}
	b.Run("impl=redis_rate", func(b *testing.B) {
		lim := redis_rate.NewLimiter(newClient())
		limit := redis_rate.Limit{Rate: 1_000_000, Burst: burst, Period: time.Second}
		run(b, func(ctx context.Context, key string) error {
			_, err := lim.Allow(ctx, key, limit)
			return err
		})
	})
	b.Run("impl=redisquota-exact", func(b *testing.B) {
		q, err := redisquota.New(redisquota.Config{Name: "exact", Rate: 1_000_000, Burst: burst, Client: newClient(), Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(ctx context.Context, key string) error {
			_, err := q.Decide(ctx, key, 1)
			return err
		})
		if st := q.Stats(); st.FallbackDecisions != 0 {
			b.Fatalf("%d decisions fell back: the comparison is void", st.FallbackDecisions)
		}
	})
	b.Run("impl=redisquota-lease", func(b *testing.B) {
		q, err := redisquota.New(redisquota.Config{Name: "lease", Rate: 1_000_000, Burst: burst, Client: newClient(), Timeout: time.Second,
			Mode: redisquota.Lease, LeaseSize: 10})
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(ctx context.Context, key string) error {
			_, err := q.Decide(ctx, key, 1)
			return err
		})
		if st := q.Stats(); st.FallbackDecisions != 0 {
			b.Fatalf("%d decisions fell back: the comparison is void", st.FallbackDecisions)
		}
	})
}
