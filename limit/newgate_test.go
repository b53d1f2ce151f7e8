package limit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// countingObserver counts the events a gate reports to it.
type countingObserver struct{ admissions, completions atomic.Int64 }

func (o *countingObserver) ObserveAdmission(admit.AdmissionEvent)   { o.admissions.Add(1) }
func (o *countingObserver) ObserveCompletion(admit.CompletionEvent) { o.completions.Add(1) }

// NewGate builds the gate, observes it with the Adaptive as well as the
// caller's own Observer, attaches the Adaptive, and gives a queue without
// a wait limit the SLO's share of the wait.
func TestNewGateWiresTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		own := &countingObserver{}
		g, a, err := NewGate(admit.Config{Name: "upstream", Capacity: 8, MaxWaiters: 4, Observer: own},
			&Config{Law: &AIMD{}, Min: 2, Max: 6, SLO: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if a == nil || g.Capacity() != 6 || a.Limit() != 6 || a.State().Gate != "upstream" {
			t.Fatalf("gate capacity %d, adaptive %v: want the limit attached, starting from the gate's capacity clamped to Max 6", g.Capacity(), a)
		}
		// The caller's observer still sees every event, and so does the
		// Adaptive (its window's peak follows the grants).
		var held [6]admit.Permit
		for i := range held {
			var err error
			if held[i], err = g.TryAcquire(); err != nil {
				t.Fatal(err)
			}
		}
		if own.admissions.Load() != 6 || a.peak.Load() != 6 {
			t.Fatalf("own observer saw %d admissions, the Adaptive a peak of %d; want 6 and 6", own.admissions.Load(), a.peak.Load())
		}
		// The queue waits a quarter of the SLO: 50 ms.
		start := time.Now()
		_, err = g.Acquire(context.Background())
		var re *admit.RejectedError
		if !errors.As(err, &re) || re.Reason() != admit.ReasonWaitTimeout || time.Since(start) != QueueWaitFor(200*time.Millisecond) {
			t.Fatalf("queued caller: %v after %v; want wait_timeout after 50ms", err, time.Since(start))
		}
		for i := range held {
			held[i].Done(admit.OutcomeOK)
		}
		if own.completions.Load() != 6 {
			t.Errorf("own observer saw %d completions, want 6", own.completions.Load())
		}
	})
}

// With no limit NewGate builds the plain gate; a bad limit builds nothing.
func TestNewGateFixedAndErrors(t *testing.T) {
	g, a, err := NewGate(admit.Config{Name: "fixed", Capacity: 3, MaxWaiters: 1}, nil)
	if err != nil || a != nil || g.Capacity() != 3 {
		t.Fatalf("NewGate without a limit: %v, %v, %v; want a fixed gate of 3 and no Adaptive", g, a, err)
	}
	g.Close()
	if _, _, err := NewGate(admit.Config{}, &Config{Min: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad limit: %v, want ErrInvalidConfig", err)
	}
	if _, _, err := NewGate(admit.Config{Capacity: -1}, &Config{}); !errors.Is(err, admit.ErrInvalidConfig) {
		t.Errorf("bad gate: %v, want admit.ErrInvalidConfig", err)
	}
}
