// Package admission_test measures the full admission gate, as sluice
// serve builds it (an adaptive limit, priority classes with a share, a
// queue, hold timing on every permit), against failsafe-go's adaptive
// limiter and its bulkhead, side by side in one run. It lives in the
// bench module so the main module does not depend on the peer.
package admission_test

import (
	"context"
	"syscall"
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

		Observer: a, // every permit timed, every completion sampled by the limit,
		Queueing: admit.Queueing{Discipline: d, ClassShares: admit.ClassShares{admit.ClassSheddable: 0.1}},
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
			defer reportCPU(b)()
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
			defer reportCPU(b)()
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
		defer reportCPU(b)()
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
		defer reportCPU(b)()
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
		defer reportCPU(b)()
		for b.Loop() {
			if err := bh.AcquirePermit(ctx); err != nil {
				b.Fatal(err)
			}
			bh.ReleasePermit()
		}
	})
}

// BenchmarkFullGateParts takes the full gate apart, to show where its
// time goes: the same gate (queue, class shares, Acquire(ctx) then
// Done(OutcomeOK)) with nothing timed or observed, with hold timing only,
// with timing and an observer that does nothing (the cost of the two
// events), and with the adaptive limit (the full gate).
func BenchmarkFullGateParts(b *testing.B) {
	ctx := context.Background()
	parts := []struct {
		name string
		gate func(b *testing.B) *admit.Gate
	}{
		{"untimed", func(b *testing.B) *admit.Gate { return partGate(b, nil, true) }},
		{"timed", func(b *testing.B) *admit.Gate { return partGate(b, nil, false) }},
		{"timed+noop-observer", func(b *testing.B) *admit.Gate { return partGate(b, noopObserver{}, false) }},
		{"full", func(b *testing.B) *admit.Gate { return fullGate(b, admit.DisciplineFIFO) }},
	}
	for _, p := range parts {
		b.Run("sluice/"+p.name, func(b *testing.B) {
			g := p.gate(b)
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				p, err := g.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.Done(admit.OutcomeOK)
			}
		})
	}
}

func partGate(b *testing.B, obs admit.Observer, untimed bool) *admit.Gate {
	b.Helper()
	g, err := admit.New(admit.Config{
		Name: "part", Capacity: slots, MaxWaiters: 64, MaxWait: 100 * time.Millisecond,
		Observer: obs, NoTiming: untimed, SampleEvery: 1,
		Queueing: admit.Queueing{ClassShares: admit.ClassShares{admit.ClassSheddable: 0.1}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

type noopObserver struct{}

func (noopObserver) ObserveAdmission(admit.AdmissionEvent)   {}
func (noopObserver) ObserveCompletion(admit.CompletionEvent) {}

// BenchmarkFullGateParallel is the same from GOMAXPROCS goroutines.
func BenchmarkFullGateParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice/fifo/critical", func(b *testing.B) {
		g := fullGate(b, admit.DisciplineFIFO)
		b.ReportAllocs()
		defer reportCPU(b)()
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
		defer reportCPU(b)()
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
		defer reportCPU(b)()
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

// reportCPU starts counting the CPU time the process spends and returns
// the function that reports it per operation (cpu-ns/op). On a machine
// shared with other work, ns/op also counts the time the benchmark waited
// for a core; CPU time does not, so it moves less between rounds. It
// includes the runtime's own threads, which do little here (nothing
// allocates).
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() { b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op") }
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClock is what the full gate cannot go below: a timed permit
// reads the monotonic clock twice (time.Since on a fixed base, as the gate
// does), and time.Now reads it and the wall clock.
func BenchmarkClock(b *testing.B) {
	base := time.Now()
	var sink time.Duration
	b.Run("since", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			sink += time.Since(base)
		}
	})
	b.Run("now", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			sink += time.Duration(time.Now().UnixNano())
		}
	})
	if sink == 42 {
		b.Log(sink)
	}
}
