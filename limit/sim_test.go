package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// simBackend is a server of known capacity: slots workers, each taking a
// fixed service time per request. Requests beyond the slots queue inside
// it, which is what a latency-based limit must detect.
type simBackend struct {
	slots   chan struct{}
	service atomic.Int64 // time.Duration
}

// serve does one request's work at the backend's speed of the moment: a
// request needs one service time of work at the current speed, done in
// steps of at most simTick, so that one begun during a stall speeds up
// when the stall ends instead of keeping the stall's service time to the
// end (which left slow stragglers for up to a stall's service time after
// the backend recovered, and let a window of them abort a recovery ramp
// or not, depending on the order goroutines ran at one instant).
func (b *simBackend) serve() {
	b.slots <- struct{}{}
	for left := 1.0; left > 1e-9; {
		svc := float64(b.service.Load())
		d := math.Min(float64(simTick), left*svc)
		time.Sleep(time.Duration(d))
		left -= d / svc
	}
	<-b.slots
}

// simTick is the longest step of a request's work in the simulation.
const simTick = 10 * time.Millisecond

// simResult is the gate capacity sampled every 50 ms.
type simResult struct {
	at    []time.Duration
	caps  []int64
	ramps []RampState
}

// settledAfter returns how long after from the capacity entered, and then
// stayed within, ±band of the median of its last three seconds, and that
// median.
func (r simResult) settledAfter(from time.Duration, band float64) (time.Duration, int64) {
	end := r.at[len(r.at)-1]
	var tail []int64
	for i, at := range r.at {
		if at >= end-3*time.Second {
			tail = append(tail, r.caps[i])
		}
	}
	slices.Sort(tail)
	med := tail[len(tail)/2]
	lo, hi := float64(med)*(1-band), float64(med)*(1+band)
	settled := from
	for i, at := range r.at {
		if at < from {
			continue
		}
		if c := float64(r.caps[i]); c < lo || c > hi {
			settled = at + 50*time.Millisecond
		}
	}
	return settled - from, med
}

func (r simResult) String() string {
	var b strings.Builder
	for i := 0; i < len(r.at); i += 5 {
		fmt.Fprintf(&b, "%v:%d ", r.at[i], r.caps[i])
	}
	return b.String()
}

// The two ways a backend becomes 2× slower.
const (
	halfTheSlots   = iota // half its workers vanish: concurrency capacity halves
	doubledService        // every request takes twice as long: throughput halves, concurrency capacity does not
	stall                 // every request takes 20× as long for 3 s, then the backend is well again
)

// simulate runs closed-loop clients against a gate driven by law in
// front of a backend of 40 slots × 10 ms; at 5 s the backend becomes 2×
// slower (how: change); it returns the capacity trajectory until total.
// Run inside a synctest bubble.
func simulate(t *testing.T, law Law, slo time.Duration, change int, total time.Duration) simResult {
	const (
		slots   = 40
		clients = 120
		service = 10 * time.Millisecond
		step    = 5 * time.Second
	)
	a, err := New(Config{Law: law, Min: 1, Max: 200, Initial: 10, SLO: slo})
	if err != nil {
		t.Fatal(err)
	}
	g, err := admit.New(admit.Config{Name: "sim", Capacity: 10, Observer: a})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		t.Fatal(err)
	}
	be := &simBackend{slots: make(chan struct{}, slots)}
	be.service.Store(int64(service))
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				p, err := g.TryAcquire()
				if err != nil {
					if !errors.Is(err, admit.ErrRejected) {
						t.Error(err)
						return
					}
					time.Sleep(5 * time.Millisecond) // a client that retries later
					continue
				}
				be.serve()
				p.Done(admit.OutcomeOK)
			}
		})
	}
	wg.Go(func() { // the step
		time.Sleep(step)
		switch change {
		case doubledService:
			be.service.Store(int64(2 * service))
			return
		case stall:
			be.service.Store(int64(20 * service))
			time.Sleep(3 * time.Second)
			be.service.Store(int64(service))
			return
		}
		for range slots / 2 { // half the backend's slots are taken for good
			be.slots <- struct{}{}
		}
		<-ctx.Done()
	})
	var r simResult
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		// one snapshot: the capacity and the ramp read apart could straddle
		// a window's decision (a ramp seen started beside the limit before it)
		st := a.State()
		r.at = append(r.at, time.Since(start))
		r.caps = append(r.caps, st.Limit)
		r.ramps = append(r.ramps, st.Ramp)
	}
	wg.Wait()
	return r
}

// TestStepChangeSettles: the backend loses half its capacity at 5 s. Each
// law must settle (stay within ±20% of where it ends up) within 2 s of the
// step, near the new capacity, and must have settled before the step too.
// Seconds of CPU under -race: 12 virtual seconds of closed-loop load per
// case (see simulate).
func TestStepChangeSettles(t *testing.T) {
	for _, tc := range []struct {
		law Law
	}{{&Vegas{}}, {&Gradient2{}}, {&AIMD{}}} {
		t.Run(tc.law.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := simulate(t, tc.law, 100*time.Millisecond, halfTheSlots, 12*time.Second)
				t.Log(r)
				var before []int64
				for i, at := range r.at {
					if at >= 3*time.Second && at < 5*time.Second {
						before = append(before, r.caps[i])
					}
				}
				if lo, hi := slices.Min(before), slices.Max(before); lo < 36 || hi > 53 {
					t.Errorf("before the step the limit ranged %d..%d, want within ±20%% of the 44 slots (40 + the 10%% the 90th percentile tolerates)", lo, hi)
				}
				after, med := r.settledAfter(5*time.Second, 0.2)
				t.Logf("settled %v after the step at %d slots", after, med)
				if after > 2*time.Second {
					t.Errorf("settled only %v after the step (want ≤ 2s); trajectory %v", after, r)
				}
				if med < 16 || med > 32 {
					t.Errorf("settled at %d slots, want near the backend's 20", med)
				}
			})
		})
	}
}

// TestServiceSlowdownFollowedWithSLO: every request becomes 2× slower at
// 5 s, with an SLO. The limit drops at first (no law can tell a slower
// backend from a queue), but once it has fallen by a quarter with the mean
// latency flat the baseline is re-anchored, and the limit must be back
// near the backend's 40 slots and settled within 3 s, not after the 10-20
// s a windowed minimum takes to forget (TestServiceSlowdownRelearned, the
// same without an SLO).
// Seconds of CPU under -race: 12 virtual seconds of closed-loop load per
// law (see simulate).
func TestServiceSlowdownFollowedWithSLO(t *testing.T) {
	for _, law := range []Law{&Vegas{}, &Gradient2{}, &AIMD{}} {
		t.Run(law.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := simulate(t, law, 100*time.Millisecond, doubledService, 12*time.Second)
				after, med := r.settledAfter(5*time.Second, 0.2)
				t.Logf("settled %v after the slowdown at %d slots", after, med)
				// 30..66: back at the backend's concurrency or somewhat
				// above it (AIMD's threshold, 1.5× a baseline the closed
				// loop's brief queues can lift, lets it hold up to 60), and
				// nowhere near the floor or the maximum.
				if med < 30 || med > 66 || after > 3*time.Second {
					t.Errorf("the limit settled at %d slots %v after the change, want 30..66 within 3s; trajectory %v", med, after, r)
				}
			})
		})
	}
}

// TestServiceSlowdownRelearned: every request becomes 2× slower at 5 s.
// The backend's concurrency capacity is unchanged, but no latency-based law
// can tell that from queueing at first: the limit drops. Once the
// windowed-minimum baseline has re-learned (one to two periods of 100
// windows, 10-20 s), the limit must be back near the backend's 40 slots.
// About 12 s of CPU under -race: the simulation (see simulate) runs 35
// virtual seconds of closed-loop load per law.
func TestServiceSlowdownRelearned(t *testing.T) {
	for _, law := range []Law{&Vegas{}, &Gradient2{}, &AIMD{}} {
		t.Run(law.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := simulate(t, law, 0, doubledService, 35*time.Second)
				after, med := r.settledAfter(5*time.Second, 0.2)
				t.Logf("settled %v after the slowdown at %d slots", after, med)
				if med < 34 || med > 56 || after > 25*time.Second {
					t.Errorf("after re-learning the limit settled at %d slots %v after the change, want about 44 within 25s; trajectory %v", med, after, r)
				}
			})
		})
	}
}

// TestRampAfterStall: the backend stalls (20× slower, far above the SLO)
// for 3 s and recovers. The limit is cut during the stall; afterwards the
// ramp brings capacity back in steps, each held at least its hold period,
// without steps back (completions rise with every step), up to the
// pre-stall level.
// Seconds of CPU under -race: the simulation (see simulate) runs 14 virtual
// seconds of closed-loop load.
func TestRampAfterStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := simulate(t, &Vegas{}, 100*time.Millisecond, stall, 14*time.Second)
		var before []int64
		for i, at := range r.at {
			if at >= 4*time.Second && at < 5*time.Second {
				before = append(before, r.caps[i])
			}
		}
		pre := slices.Min(before)
		lowest := pre
		var steps []int64
		var stepAt []time.Duration
		sawRamp := false
		for i, rs := range r.ramps {
			if r.at[i] < 5*time.Second {
				continue
			}
			lowest = min(lowest, r.caps[i])
			if rs.Active {
				sawRamp = true
				if len(steps) == 0 || r.caps[i] != steps[len(steps)-1] {
					steps = append(steps, r.caps[i])
					stepAt = append(stepAt, r.at[i])
				}
			}
			if rs.Decision == DecisionRampBack {
				t.Errorf("ramp stepped back at %v although the backend recovered: %+v", r.at[i], rs)
			}
		}
		t.Logf("pre-stall %d, lowest %d, ramp capacities %v at %v; trajectory %v", pre, lowest, steps, stepAt, r)
		if !sawRamp || lowest > pre/2 {
			t.Fatalf("the stall did not cut the limit (lowest %d of %d) or no ramp followed", lowest, pre)
		}
		if !slices.IsSorted(steps) || len(steps) < 4 {
			t.Fatalf("ramp capacities %v: want at least 4 rising steps", steps)
		}
		for i := 1; i < len(stepAt); i++ {
			if held := stepAt[i] - stepAt[i-1]; held < 450*time.Millisecond { // 500 ms hold, sampled every 50 ms
				t.Fatalf("step %d held %v, less than the hold period", steps[i-1], held)
			}
		}
		if end := r.caps[len(r.caps)-1]; float64(end) < 0.8*float64(pre) {
			t.Fatalf("capacity %d at the end, want back near the pre-stall %d", end, pre)
		}
	})
}
