package limit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// playWindow plays one window in synctest time: an admission that reached
// inflight slots, n completions of hold lat spread over the window, then
// the window's decision.
func playWindow(a *Adaptive, lat time.Duration, inflight int64, n int) {
	a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: inflight})
	step := DefaultWindow / time.Duration(2*n+1)
	for range n {
		a.ObserveCompletion(admit.CompletionEvent{Outcome: admit.OutcomeOK, Weight: 1, Hold: lat})
		time.Sleep(step)
	}
	time.Sleep(DefaultWindow - step*time.Duration(n))
	a.Decide()
}

const rampSLO = 50 * time.Millisecond

// episode drives an Adaptive (Gradient2, limit 40, SLO 50 ms, a 4-step
// ramp held 500 ms) through healthy traffic, an overload that cuts the
// limit, and back to healthy latency until the ramp starts. It returns
// the Adaptive at the start of the ramp.
func episode(t *testing.T) (*Adaptive, *fakeTarget) {
	t.Helper()
	a, tgt := mustNew(t, Config{Law: &Gradient2{}, Initial: 40, Min: 4, Max: 40, SLO: rampSLO,
		Ramp: Ramp{Steps: 4, Hold: 500 * time.Millisecond}})
	a.Decide() // opens the first window
	for range 10 {
		playWindow(a, 10*time.Millisecond, a.Limit(), 40)
	}
	for range 10 {
		playWindow(a, 4*rampSLO, a.Limit(), 10)
	}
	if st := a.State(); !st.Episode || st.Limit > 16 {
		t.Fatalf("overload did not start an episode and cut the limit: %+v", st)
	}
	for range 20 {
		playWindow(a, 10*time.Millisecond, a.Limit(), int(a.Limit()))
		if a.State().Ramp.Active {
			break
		}
	}
	st := a.State()
	if !st.Ramp.Active || st.Decision != DecisionRampStart || st.Ramp.Level != 0 || st.Ramp.Target != 40 {
		t.Fatalf("the ramp did not start from the episode's floor toward 40: %+v", st)
	}
	return a, tgt
}

// After an episode capacity returns in steps, each held for the hold
// period, while completions keep rising with it.
func TestRampRecoversInSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tgt := episode(t)
		floor := a.State().Ramp.Floor
		levelSince := time.Now()
		lastCap := a.Limit()
		var levels []int64
		for range 60 {
			// A backend with room: completions grow with the capacity.
			playWindow(a, 10*time.Millisecond, a.Limit(), int(a.Limit()))
			st := a.State()
			if c := st.Limit; c != lastCap {
				if c < lastCap {
					t.Fatalf("capacity fell from %d to %d while recovering: %+v", lastCap, c, st.Ramp)
				}
				if held := time.Since(levelSince); held < 500*time.Millisecond {
					t.Fatalf("level %d held only %v, less than the hold period", lastCap, held)
				}
				levels = append(levels, c)
				lastCap, levelSince = c, time.Now()
			}
			if st.Decision == DecisionRampDone {
				break
			}
		}
		st := a.State()
		if st.Ramp.Active || st.Ramp.Decision != DecisionRampDone || st.Limit != 40 {
			t.Fatalf("ramp did not finish at 40: %+v", st)
		}
		if len(levels) != 4 {
			t.Fatalf("capacity from %d went through %v, want 4 steps to 40", floor, levels)
		}
		if got := tgt.caps[len(tgt.caps)-1]; got != 40 {
			t.Fatalf("target was last given %d, want 40", got)
		}
	})
}

// When completions fall at a level, the ramp steps back one level instead
// of growing (a backend that gets worse with more load).
func TestRampStepsBackWhenCompletionsFall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _ := episode(t)
		// Level 0 is measured at full rate; then the backend degrades: above
		// the floor it completes far less.
		floorRate := int(a.Limit())
		var sawBack bool
		maxLevel := 0
		for range 40 {
			n := floorRate
			if a.State().Ramp.Level > 0 {
				n = floorRate / 2
			}
			playWindow(a, 10*time.Millisecond, a.Limit(), n)
			st := a.State()
			maxLevel = max(maxLevel, st.Ramp.Level)
			if st.Decision == DecisionRampGrow && st.Ramp.Level > 1 {
				t.Fatalf("ramp grew to level %d while completions fell: %+v", st.Ramp.Level, st.Ramp)
			}
			if st.Decision == DecisionRampBack {
				if st.Why != "completions_fell" || st.Ramp.Level != 0 {
					t.Fatalf("step back for the wrong reason or to the wrong level: %+v", st.Ramp)
				}
				sawBack = true
			}
		}
		if !sawBack || maxLevel > 1 {
			t.Fatalf("falling completions: stepped back %v, highest level %d", sawBack, maxLevel)
		}
	})
}

// When completions stop rising the ramp pauses at its level.
func TestRampPausesWhenCompletionsFlat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _ := episode(t)
		n := int(a.Limit()) // the backend completes this many a window, whatever the capacity
		for range 40 {
			playWindow(a, 10*time.Millisecond, a.Limit(), n)
		}
		st := a.State()
		if !st.Ramp.Active || st.Ramp.Level != 1 || st.Ramp.Decision != DecisionRampPause || st.Ramp.Why != "completions_flat" {
			t.Fatalf("flat completions must pause the ramp at level 1: %+v", st.Ramp)
		}
		if st.Decisions[DecisionRampPause] < 3 {
			t.Fatalf("expected repeated pauses, got %d", st.Decisions[DecisionRampPause])
		}
	})
}

// Latency rising to twice its level at the start of the ramp steps back;
// rising a little pauses.
func TestRampLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _ := episode(t)
		for range 5 { // measure level 0, grow to level 1
			playWindow(a, 10*time.Millisecond, a.Limit(), int(a.Limit()))
		}
		if lvl := a.State().Ramp.Level; lvl != 1 {
			t.Fatalf("level %d after the floor's hold, want 1", lvl)
		}
		for range 5 {
			playWindow(a, 13*time.Millisecond, a.Limit(), 2*int(a.Limit()))
		}
		if st := a.State().Ramp; st.Decision != DecisionRampPause || st.Why != "latency_rising" || st.Level != 1 {
			t.Fatalf("latency 1.3× the reference must pause: %+v", st)
		}
		for range 5 {
			playWindow(a, 25*time.Millisecond, a.Limit(), 2*int(a.Limit()))
		}
		if st := a.State().Ramp; st.Decision != DecisionRampBack || st.Why != "latency_rose" || st.Level != 0 {
			t.Fatalf("latency 2.5× the reference must step back: %+v", st)
		}
	})
}

// A queue whose oldest waiter doubles in age steps the ramp back: the ramp
// reads the age from the gate it moves.
func TestRampQueueAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, gate := episode(t)
		gate.oldest = 10 * time.Millisecond
		for range 5 {
			playWindow(a, 10*time.Millisecond, a.Limit(), int(a.Limit()))
		}
		gate.oldest = 50 * time.Millisecond
		for range 5 {
			playWindow(a, 10*time.Millisecond, a.Limit(), 3*int(a.Limit()))
		}
		if st := a.State().Ramp; st.Decision != DecisionRampBack || st.Why != "queue_age_rose" {
			t.Fatalf("queue age 5× must step back: %+v", st)
		}
	})
}

// Overload during the ramp aborts it and starts a new episode.
func TestRampAbortsOnOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _ := episode(t)
		before := a.Limit()
		playWindow(a, 4*rampSLO, a.Limit(), 10)
		st := a.State()
		if st.Ramp.Active || st.Decision != DecisionRampAbort || !st.Episode || st.Limit >= before {
			t.Fatalf("overload during the ramp must abort it and cut: %+v", st)
		}
	})
}

// Episode and ramp transitions are logged at Info with the gate's name;
// every window's decision only at Debug.
func TestRampLogged(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, _ := mustNew(t, Config{Law: &Gradient2{}, Initial: 40, Min: 4, Max: 40, SLO: rampSLO, Logger: log})
	now := epoch
	for range 5 {
		now = feedWindow(a, now, DefaultWindow, 10*time.Millisecond, 40, 40)
	}
	for range 10 {
		now = feedWindow(a, now, DefaultWindow, 4*rampSLO, a.Limit(), 10)
	}
	for range 10 {
		now = feedWindow(a, now, DefaultWindow, 10*time.Millisecond, a.Limit(), int(a.Limit()))
	}
	out := buf.String()
	for _, want := range []string{"limit: overload episode", "limit: ramp start", "gate=g", "level="} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "limit: window") {
		t.Errorf("per-window decisions must be Debug, not Info:\n%s", out)
	}
}
