// Package admission_test measures the full admission gate, as sluice
// serve builds it (an adaptive limit, priority classes with a share, a
// queue, hold timing on every permit), against failsafe-go's adaptive
// limiter and its bulkhead, side by side in one run. It lives in the
// bench module so the main module does not depend on the peer.
package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
)

const slots = 1 << 16 // large enough that nothing is ever refused

func fullGate(b *testing.B, d admit.Discipline) *admit.Gate {
	b.Helper()
	a, err := limit.New(limit.Config{Law: &limit.Gradient2{}, Min: slots, Max: slots, Initial: slots, SLO: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	g, err := admit.New(admit.Config{
		Name: "full", Capacity: slots, MaxWaiters: 64, MaxWait: 100 * time.Millisecond,
		Discipline: d, ClassShares: admit.ClassShares{admit.ClassSheddable: 0.1},
		Observer: a, // every permit timed, every completion sampled by the limit
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkFullGate: acquire a slot (the way a handler does, with a
// context), release it with a latency sample.
func BenchmarkFullGate(b *testing.B) {
	ctx := context.Background()
	for _, d := range []admit.Discipline{admit.DisciplineFIFO, admit.DisciplineCoDel} {
		b.Run("sluice/"+d.String()+"/critical", func(b *testing.B) {
			g := fullGate(b, d)
			b.ReportAllocs()
			for b.Loop() {
				p, err := g.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.Done(admit.OutcomeOK)
			}
		})
		b.Run("sluice/"+d.String()+"/sheddable", func(b *testing.B) {
			g := fullGate(b, d)
			req := admit.Request{Class: admit.ClassSheddable}
			b.ReportAllocs()
			for b.Loop() {
				p, err := g.AcquireFor(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				p.Done(admit.OutcomeOK)
			}
		})
	}
	b.Run("sluice/deadline-ctx", func(b *testing.B) {
		g := fullGate(b, admit.DisciplineFIFO)
		dctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.Acquire(dctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("failsafe/adaptivelimiter", func(b *testing.B) {
		l := adaptivelimiter.NewBuilder[any]().WithLimits(slots, slots, slots).Build()
		b.ReportAllocs()
		for b.Loop() {
			p, err := l.AcquirePermit(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Record()
		}
	})
	b.Run("failsafe/bulkhead", func(b *testing.B) {
		bh := bulkhead.New[any](slots)
		b.ReportAllocs()
		for b.Loop() {
			if err := bh.AcquirePermit(ctx); err != nil {
				b.Fatal(err)
			}
			bh.ReleasePermit()
		}
	})
}

// BenchmarkFullGateParallel is the same from GOMAXPROCS goroutines.
func BenchmarkFullGateParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice/fifo/critical", func(b *testing.B) {
		g := fullGate(b, admit.DisciplineFIFO)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := g.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				p.Done(admit.OutcomeOK)
			}
		})
	})
	b.Run("failsafe/adaptivelimiter", func(b *testing.B) {
		l := adaptivelimiter.NewBuilder[any]().WithLimits(slots, slots, slots).Build()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := l.AcquirePermit(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				p.Record()
			}
		})
	})
	b.Run("failsafe/bulkhead", func(b *testing.B) {
		bh := bulkhead.New[any](slots)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := bh.AcquirePermit(ctx); err != nil {
					b.Error(err)
					return
				}
				bh.ReleasePermit()
			}
		})
	})
}
