// Package limit_test measures the cost of an adaptive limit on the
// admission path, side by side in one run: sluice's admit gate with a
// fixed capacity (bare, and with a do-nothing observer, which is what any
// observer costs the gate), the same gate driven by limit.Adaptive (the
// observer path runs on every completion), the observer path alone, and
// failsafe-go's adaptive limiter (acquire a permit, record its latency). It lives in the
// bench module so the main module does not depend on the peer.
package limit_test

import (
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
)

const slots = 1 << 16 // large enough that no benchmark is ever refused

func adaptiveGate(b *testing.B, law limit.Law) (*admit.Gate, *limit.Adaptive) {
	b.Helper()
	a, err := limit.New(limit.Config{Law: law, Min: slots, Max: slots, Initial: slots, SLO: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	g, err := admit.New(admit.Config{Name: "bench", Capacity: slots, Observer: a})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		b.Fatal(err)
	}
	return g, a
}

// nopObserver receives every event and does nothing: a fixed gate with it
// pays what any observer costs (the events and the hold-time clock reads),
// so the difference to the adaptive gate is the limit's own cost.
type nopObserver struct{}

func (nopObserver) ObserveAdmission(admit.AdmissionEvent)   {}
func (nopObserver) ObserveCompletion(admit.CompletionEvent) {}

func failsafeLimiter() adaptivelimiter.AdaptiveLimiter[any] {
	return adaptivelimiter.NewBuilder[any]().WithLimits(slots, slots, slots).Build()
}

// BenchmarkObserve is the per-sample cost of the observer alone.
func BenchmarkObserve(b *testing.B) {
	for _, law := range []limit.Law{&limit.AIMD{}, &limit.Vegas{}, &limit.Gradient2{}} {
		b.Run("sluice/"+law.Name(), func(b *testing.B) {
			_, a := adaptiveGate(b, law)
			ev := admit.CompletionEvent{Gate: "bench", Outcome: admit.OutcomeOK, Weight: 1, Hold: 3 * time.Millisecond}
			b.ReportAllocs()
			for b.Loop() {
				a.ObserveCompletion(ev)
			}
		})
	}
}

// BenchmarkAcquireRecord: take a slot, give it back with a latency sample.
func BenchmarkAcquireRecord(b *testing.B) {
	b.Run("sluice/fixed", func(b *testing.B) {
		g, err := admit.New(admit.Config{Name: "bench", Capacity: slots})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("sluice/fixed+observer", func(b *testing.B) {
		g, err := admit.New(admit.Config{Name: "bench", Capacity: slots, Observer: nopObserver{}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("sluice/adaptive-vegas", func(b *testing.B) {
		g, _ := adaptiveGate(b, &limit.Vegas{})
		b.ReportAllocs()
		for b.Loop() {
			p, err := g.TryAcquire()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
		}
	})
	b.Run("failsafe/adaptivelimiter", func(b *testing.B) {
		l := failsafeLimiter()
		b.ReportAllocs()
		for b.Loop() {
			p, ok := l.TryAcquirePermit()
			if !ok {
				b.Fatal("refused")
			}
			p.Record()
		}
	})
}

// BenchmarkAcquireRecordParallel is the same with GOMAXPROCS goroutines.
func BenchmarkAcquireRecordParallel(b *testing.B) {
	b.Run("sluice/fixed", func(b *testing.B) {
		g, err := admit.New(admit.Config{Name: "bench", Capacity: slots})
		if err != nil {
			b.Fatal(err)
		}
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
	b.Run("sluice/fixed+observer", func(b *testing.B) {
		g, err := admit.New(admit.Config{Name: "bench", Capacity: slots, Observer: nopObserver{}})
		if err != nil {
			b.Fatal(err)
		}
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
	b.Run("sluice/adaptive-vegas", func(b *testing.B) {
		g, _ := adaptiveGate(b, &limit.Vegas{})
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
	b.Run("failsafe/adaptivelimiter", func(b *testing.B) {
		l := failsafeLimiter()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, ok := l.TryAcquirePermit()
				if !ok {
					b.Error("refused")
					return
				}
				p.Record()
			}
		})
	})
}
