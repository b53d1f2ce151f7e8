package proxy

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// TestQueueWaitFromSLO: a queue with no wait of its own in front of an
// adaptive limit with an SLO gives up after a quarter of the SLO (what
// the limit's SLO budget leaves the queue), as sluice serve does; a fixed
// gate keeps the gate's default, and a given wait is kept.
func TestQueueWaitFromSLO(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		l       Limit
		want    time.Duration
	}{
		{"adaptive with slo", 0, Limit{Law: "aimd", SLO: Duration(100 * time.Millisecond)}, 25 * time.Millisecond},
		{"wait given", 40 * time.Millisecond, Limit{Law: "aimd", SLO: Duration(100 * time.Millisecond)}, 40 * time.Millisecond},
		{"fixed", 0, Limit{}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gs, err := newGateSet("g", 1, 1, tc.maxWait, tc.l, Queueing{}, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				held, err := gs.gate.TryAcquire()
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				_, err = gs.gate.Acquire(context.Background())
				var rej *admit.RejectedError
				if !errors.As(err, &rej) {
					t.Fatalf("queued request: %v, want a refusal", err)
				}
				if waited := time.Since(start); waited != tc.want {
					t.Errorf("waited %v, want %v", waited, tc.want)
				}
				held.Done(admit.OutcomeOK)
			})
		})
	}
}
