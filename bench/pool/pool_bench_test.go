// Package pool_test compares sluice's bounded executor with the usual Go
// goroutine pools in one benchmark run: github.com/panjf2000/ants/v2 and
// github.com/sourcegraph/conc/pool. Each submits a trivial task and waits
// for all of them at the end, so a result is the cost of submit + run per
// task. It lives in the bench module so the main module does not depend
// on the peers.
package pool_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/panjf2000/ants/v2"
	"github.com/sluicehq/sluice/pool"
	concpool "github.com/sourcegraph/conc/pool"
)

// trivial is the task: it tells the benchmark it ran. A pointer to it is
// a pool.Task without allocating.
type trivial struct{ wg *sync.WaitGroup }

func (t *trivial) Run(context.Context) error { t.wg.Done(); return nil }

func workers() int { return runtime.GOMAXPROCS(0) }

func newSluice(b *testing.B, cfg pool.Config) *pool.Pool {
	b.Helper()
	p, err := pool.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// BenchmarkSubmitRun: one goroutine submits, GOMAXPROCS workers run.
func BenchmarkSubmitRun(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice/queue", func(b *testing.B) {
		// A bounded queue; a refused submission (queue full) is retried,
		// which is how a producer that must not lose work uses Abort.
		p := newSluice(b, pool.Config{Core: workers(), Queue: 1024})
		var wg sync.WaitGroup
		task := &trivial{wg: &wg}
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			for p.Go(ctx, task) != nil {
				runtime.Gosched()
			}
		}
		wg.Wait()
		s := p.Stats()
		b.ReportMetric(float64(s.Rejected.Total())/float64(s.Offered), "refused/op")
	})
	b.Run("sluice/handoff", func(b *testing.B) {
		// No queue: a task is accepted only if a worker takes it now,
		// which is ants's and conc's shape; a refusal is retried.
		p := newSluice(b, pool.Config{Core: workers()})
		var wg sync.WaitGroup
		task := &trivial{wg: &wg}
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			for p.Go(ctx, task) != nil {
				runtime.Gosched()
			}
		}
		wg.Wait()
		s := p.Stats()
		b.ReportMetric(float64(s.Rejected.Total())/float64(s.Offered), "refused/op")
	})
	b.Run("sluice/callerruns", func(b *testing.B) {
		// No queue; when every worker is busy the submitter runs the task.
		p := newSluice(b, pool.Config{Core: workers(), WhenFull: pool.CallerRuns})
		var wg sync.WaitGroup
		task := &trivial{wg: &wg}
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			if err := p.Go(ctx, task); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		s := p.Stats()
		b.ReportMetric(float64(s.CallerRuns)/float64(s.Offered), "callerruns/op")
	})
	b.Run("sluice/future", func(b *testing.B) {
		p := newSluice(b, pool.Config{Core: workers(), Queue: 1024})
		var wg sync.WaitGroup
		task := &trivial{wg: &wg}
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			for {
				if _, err := p.Submit(ctx, task); err == nil {
					break
				}
				runtime.Gosched()
			}
		}
		wg.Wait()
	})
	b.Run("ants", func(b *testing.B) {
		p, err := ants.NewPool(workers()) // Submit blocks while every worker is busy
		if err != nil {
			b.Fatal(err)
		}
		defer p.Release()
		var wg sync.WaitGroup
		task := func() { wg.Done() }
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			if err := p.Submit(task); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	})
	b.Run("ants/big", func(b *testing.B) {
		// ants's usual shape: a large pool, so Submit rarely waits (it
		// starts or reuses one of up to 10,000 goroutines instead).
		p, err := ants.NewPool(10000)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Release()
		var wg sync.WaitGroup
		task := func() { wg.Done() }
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			if err := p.Submit(task); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	})
	b.Run("conc", func(b *testing.B) {
		p := concpool.New().WithMaxGoroutines(workers()) // Go blocks while every worker is busy
		var wg sync.WaitGroup                            // the same per-task work as the others
		task := func() { wg.Done() }
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			p.Go(task)
		}
		p.Wait()
		wg.Wait()
	})
}

// BenchmarkSubmitRunParallel: GOMAXPROCS submitters at once.
func BenchmarkSubmitRunParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice/queue", func(b *testing.B) {
		p := newSluice(b, pool.Config{Core: workers(), Queue: 1024})
		var wg sync.WaitGroup
		task := &trivial{wg: &wg}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				for p.Go(ctx, task) != nil {
					runtime.Gosched()
				}
			}
		})
		wg.Wait()
	})
	b.Run("sluice/callerruns", func(b *testing.B) {
		p := newSluice(b, pool.Config{Core: workers(), WhenFull: pool.CallerRuns})
		var wg sync.WaitGroup
		task := &trivial{wg: &wg}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				if err := p.Go(ctx, task); err != nil {
					b.Error(err)
					return
				}
			}
		})
		wg.Wait()
	})
	b.Run("ants", func(b *testing.B) {
		p, err := ants.NewPool(workers())
		if err != nil {
			b.Fatal(err)
		}
		defer p.Release()
		var wg sync.WaitGroup
		task := func() { wg.Done() }
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				if err := p.Submit(task); err != nil {
					b.Error(err)
					return
				}
			}
		})
		wg.Wait()
	})
	b.Run("ants/big", func(b *testing.B) {
		p, err := ants.NewPool(10000)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Release()
		var wg sync.WaitGroup
		task := func() { wg.Done() }
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				if err := p.Submit(task); err != nil {
					b.Error(err)
					return
				}
			}
		})
		wg.Wait()
	})
	b.Run("conc", func(b *testing.B) {
		p := concpool.New().WithMaxGoroutines(workers())
		var wg sync.WaitGroup
		task := func() { wg.Done() }
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				p.Go(task)
			}
		})
		p.Wait()
		wg.Wait()
	})
}
