// Package quota_test measures package quota against a bare
// golang.org/x/time/rate Limiter and against a key table built on
// hashicorp/golang-lru, in the same run.
package quota_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/quota"
)

const benchRate, benchBurst = 1e12, 1 << 30 // never refuses: measure the admit path

// BenchmarkLocal compares one decision on a known key: the bare limiter
// (no key table), package quota, and the same limiter behind a
// golang-lru table (the alternative the package doc weighs).
func BenchmarkLocal(b *testing.B) {
	b.Run("impl=rate.Limiter", func(b *testing.B) {
		lim := rate.NewLimiter(benchRate, benchBurst)
		b.ReportAllocs()
		for b.Loop() {
			lim.AllowN(time.Now(), 1)
		}
	})
	b.Run("impl=quota", func(b *testing.B) {
		q, _ := quota.New(quota.Config{Rate: benchRate, Burst: benchBurst})
		_ = q.Allow("client-42")
		b.ReportAllocs()
		for b.Loop() {
			_ = q.AllowN("client-42", 1)
		}
	})
	b.Run("impl=golang-lru+rate", func(b *testing.B) {
		c, _ := lru.New[string, *rate.Limiter](100_000)
		c.Add("client-42", rate.NewLimiter(benchRate, benchBurst))
		b.ReportAllocs()
		for b.Loop() {
			lim, _ := c.Get("client-42")
			lim.AllowN(time.Now(), 1)
		}
	})
}

// BenchmarkLocalParallel is BenchmarkLocal on all cores, each goroutine
// with its own key (the common case: many clients).
func BenchmarkLocalParallel(b *testing.B) {
	b.Run("impl=quota", func(b *testing.B) {
		q, _ := quota.New(quota.Config{Rate: benchRate, Burst: benchBurst})
		var id sync.Mutex
		n := 0
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			id.Lock()
			key := "client-" + strconv.Itoa(n)
			n++
			id.Unlock()
			for pb.Next() {
				_ = q.AllowN(key, 1)
			}
		})
	})
	b.Run("impl=golang-lru+rate", func(b *testing.B) {
		c, _ := lru.New[string, *rate.Limiter](100_000)
		var id sync.Mutex
		n := 0
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			id.Lock()
			key := "client-" + strconv.Itoa(n)
			n++
			id.Unlock()
			c.Add(key, rate.NewLimiter(benchRate, benchBurst))
			for pb.Next() {
				lim, _ := c.Get(key)
				lim.AllowN(time.Now(), 1)
			}
		})
	})
}

// BenchmarkDistinctKeys offers a new key on almost every decision against
// a table bounded at 100 000 keys: the flood case. The keys are made
// before the loop so the benchmark measures the table, not strconv.
func BenchmarkDistinctKeys(b *testing.B) {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	q, _ := quota.New(quota.Config{Rate: 10, Burst: 10, MaxKeys: 100_000})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = q.Allow(keys[i&(len(keys)-1)])
		i++
	}
	b.ReportMetric(float64(q.Len()), "keys")
}
