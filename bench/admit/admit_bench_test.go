// Package admit_test compares sluice's admission gate with the usual Go
// semaphores in one benchmark run: golang.org/x/sync/semaphore, a
// buffered channel, and failsafe-go's bulkhead (its defaults). It lives in the bench module so the main module does
// not depend on the peers.
package admit_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/sluicehq/sluice/admit"
	"golang.org/x/sync/semaphore"
)

const slots = 1 << 16 // large enough that parallel benchmarks never refuse

func newGate(b *testing.B, cfg admit.Config) *admit.Gate {
	b.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// Serial: one goroutine takes and returns a slot.

func BenchmarkSerial(b *testing.B) {
	b.Run("sluice/timed", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots})
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("sluice/untimed", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots, NoTiming: true})
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("sluice/timed-every", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots, SampleEvery: 1})
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("sluice/second-kind-weight2", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots, Kinds: []string{"a", "b"}})
		req := admit.Request{Kind: 1, Weight: 2}
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquireFor(req)
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("failsafe/bulkhead", func(b *testing.B) {
		bh := bulkhead.New[any](slots)
		b.ReportAllocs()
		for b.Loop() {
			if !bh.TryAcquirePermit() {
				b.Fatal("refused")
			}
			bh.ReleasePermit()
		}
	})
	b.Run("sluice/acquire-queue-uncontended", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots, MaxWaiters: 64, NoTiming: true})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("sluice/reject", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: 1, NoTiming: true})
		held, _ := g.TryAcquire()
		defer held.Done(admit.OutcomeOK)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.TryAcquire(); err == nil {
				b.Fatal("admitted past capacity")
			}
		}
	})
	b.Run("xsync", func(b *testing.B) {
		s := semaphore.NewWeighted(slots)
		b.ReportAllocs()
		for b.Loop() {
			if !s.TryAcquire(1) {
				b.Fatal("refused")
			}
			s.Release(1)
		}
	})
	b.Run("failsafe/bulkhead/reject", func(b *testing.B) {
		bh := bulkhead.New[any](1)
		bh.TryAcquirePermit()
		b.ReportAllocs()
		for b.Loop() {
			if bh.TryAcquirePermit() {
				b.Fatal("admitted past capacity")
			}
		}
	})
	b.Run("xsync/reject", func(b *testing.B) {
		s := semaphore.NewWeighted(1)
		s.TryAcquire(1)
		b.ReportAllocs()
		for b.Loop() {
			if s.TryAcquire(1) {
				b.Fatal("admitted past capacity")
			}
		}
	})
	// floor is the least any counting gate can do: one compare-and-swap to
	// take a slot and one atomic add to return it, nothing else. It shows
	// how close to the hardware the gate's own cost is.
	b.Run("floor/cas+add", func(b *testing.B) {
		var state atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			s := state.Load()
			if s >= slots || !state.CompareAndSwap(s, s+1) {
				b.Fatal("refused")
			}
			state.Add(-1)
		}
	})
	b.Run("chan", func(b *testing.B) {
		ch := make(chan struct{}, slots)
		b.ReportAllocs()
		for b.Loop() {
			select {
			case ch <- struct{}{}:
			default:
				b.Fatal("refused")
			}
			<-ch
		}
	})
}

// Parallel: every P takes and returns slots on one shared gate.

func BenchmarkParallel(b *testing.B) {
	b.Run("sluice/timed", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := g.TryAcquire()
				if err != nil {
					b.Error(err)
					return
				}
				p.Done(admit.OutcomeOK)
			}
		})
	})
	b.Run("sluice/untimed", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: slots, NoTiming: true})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := g.TryAcquire()
				if err != nil {
					b.Error(err)
					return
				}
				p.Done(admit.OutcomeOK)
			}
		})
	})
	b.Run("sluice/reject", func(b *testing.B) {
		g := newGate(b, admit.Config{Capacity: 1, NoTiming: true})
		held, _ := g.TryAcquire()
		defer held.Done(admit.OutcomeOK)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := g.TryAcquire(); err == nil {
					b.Error("admitted past capacity")
					return
				}
			}
		})
	})
	b.Run("xsync", func(b *testing.B) {
		s := semaphore.NewWeighted(slots)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !s.TryAcquire(1) {
					b.Error("refused")
					return
				}
				s.Release(1)
			}
		})
	})
	b.Run("failsafe/bulkhead", func(b *testing.B) {
		bh := bulkhead.New[any](slots)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !bh.TryAcquirePermit() {
					b.Error("refused")
					return
				}
				bh.ReleasePermit()
			}
		})
	})
	b.Run("chan", func(b *testing.B) {
		ch := make(chan struct{}, slots)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				select {
				case ch <- struct{}{}:
				default:
					b.Error("refused")
					return
				}
				<-ch
			}
		})
	})
}
