package breaker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
)

func mustNew(t *testing.T, cfg Config) *Breaker {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// feed ends n calls with result r, each taking d.
func feed(t *testing.T, b *Breaker, n int, r Result, d time.Duration) {
	t.Helper()
	for range n {
		c, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow refused while feeding: %v", err)
		}
		if d > 0 {
			time.Sleep(d)
		}
		c.Done(r)
	}
}

// TestTransitions walks closed → open → half-open → open → half-open →
// closed on fake time, checking refusals and their RetryAfter.
func TestTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		b := mustNew(t, Config{Name: "users", MinCalls: 10, FailureRatio: 0.5, OpenFor: 2 * time.Second, Probes: 2,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})

		// Nine failures: below MinCalls, stays closed.
		feed(t, b, 9, Failure, 0)
		if s := b.State(); s != Closed {
			t.Fatalf("state after 9 failures = %v, want closed (MinCalls 10)", s)
		}
		feed(t, b, 1, Failure, 0)
		if s := b.State(); s != Open {
			t.Fatalf("state after 10 failures = %v, want open", s)
		}

		time.Sleep(500 * time.Millisecond)
		_, err := b.Allow()
		var re *admit.RejectedError
		if !errors.As(err, &re) || re.Reason() != admit.ReasonBreakerOpen || re.Gate() != "users" {
			t.Fatalf("open Allow err = %v, want RejectedError breaker_open gate users", err)
		}
		if re.RetryAfter() != 1500*time.Millisecond {
			t.Fatalf("RetryAfter = %v, want 1.5s (open time left)", re.RetryAfter())
		}
		if !errors.Is(err, admit.ErrRejected) || !IsOpen(err) {
			t.Fatalf("refusal %v does not match admit.ErrRejected / IsOpen", err)
		}

		time.Sleep(1500 * time.Millisecond)
		if s := b.State(); s != HalfOpen {
			t.Fatalf("state after OpenFor = %v, want half_open", s)
		}
		// One probe fails: open again for a full OpenFor.
		p, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		p.Done(Failure)
		if s := b.State(); s != Open {
			t.Fatalf("state after failed probe = %v, want open", s)
		}
		time.Sleep(2 * time.Second)
		p1, err1 := b.Allow()
		p2, err2 := b.Allow()
		_, err3 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatalf("half-open refused a probe within Probes: %v %v", err1, err2)
		}
		if !IsOpen(err3) {
			t.Fatalf("third probe err = %v, want refusal (Probes 2)", err3)
		}
		p1.Done(Success)
		if s := b.State(); s != HalfOpen {
			t.Fatalf("state after 1 of 2 probes = %v, want half_open", s)
		}
		p2.Done(Success)
		if s := b.State(); s != Closed {
			t.Fatalf("state after 2 good probes = %v, want closed", s)
		}
		// Closed again with a clean window.
		feed(t, b, 9, Failure, 0)
		if s := b.State(); s != Closed {
			t.Fatalf("state = %v, want closed: the window must restart on closing", s)
		}
		st := b.Stats()
		if st.Transitions[Closed][Open] != 1 || st.Transitions[Open][HalfOpen] != 2 ||
			st.Transitions[HalfOpen][Open] != 1 || st.Transitions[HalfOpen][Closed] != 1 {
			t.Fatalf("transitions = %v", st.Transitions)
		}
		if st.Rejected != 2 {
			t.Fatalf("Rejected = %d, want 2", st.Rejected)
		}
		if n := strings.Count(logs.String(), "breaker state change"); n != 5 {
			t.Fatalf("%d state change log events, want 5:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "to=half_open") {
			t.Fatalf("log lacks the half_open transition:\n%s", logs.String())
		}
	})
}

// TestFailureRatioNeedsThreshold: a ratio under FailureRatio never opens.
func TestFailureRatioNeedsThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 10, FailureRatio: 0.5})
		for range 20 { // 40 % failures
			feed(t, b, 3, Success, 0)
			feed(t, b, 2, Failure, 0)
		}
		if s := b.State(); s != Closed {
			t.Fatalf("40%% failures opened the breaker (threshold 50%%): %v", s)
		}
		// The window holds 60 successes and 40 failures: 20 more failures
		// reach exactly 50 %.
		feed(t, b, 19, Failure, 0)
		if s := b.State(); s != Closed {
			t.Fatalf("59/119 failures opened the breaker: %v", s)
		}
		feed(t, b, 1, Failure, 0)
		if s := b.State(); s != Open {
			t.Fatalf("state = %v at 60/120 failures, want open", s)
		}
	})
}

// TestSlowCallRatio: successes slower than SlowCall open the breaker.
func TestSlowCallRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 10, SlowCall: 100 * time.Millisecond, SlowCallRatio: 0.6, Window: time.Minute})
		feed(t, b, 5, Success, 10*time.Millisecond)
		feed(t, b, 5, Success, 200*time.Millisecond)
		if s := b.State(); s != Closed {
			t.Fatalf("50%% slow opened at 60%% threshold: %v", s)
		}
		feed(t, b, 3, Success, 200*time.Millisecond)
		if s := b.State(); s != Open {
			t.Fatalf("8/13 slow calls, state = %v, want open", s)
		}
	})
}

// TestWindowRolls: failures older than the window are forgotten.
func TestWindowRolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 10, Window: 10 * time.Second, Buckets: 10})
		feed(t, b, 9, Failure, 0)
		time.Sleep(11 * time.Second)
		feed(t, b, 5, Success, 0)
		feed(t, b, 4, Failure, 0)
		if s := b.State(); s != Closed {
			t.Fatalf("state = %v: old failures still counted after the window passed", s)
		}
		if st := b.Stats(); st.WindowCalls != 9 || st.WindowFailures != 4 {
			t.Fatalf("window = %d calls %d failures, want 9 and 4", st.WindowCalls, st.WindowFailures)
		}
	})
}

// TestStaleDoneIgnored: a call that began while closed and ends after the
// breaker opened does not count in the new state.
func TestStaleDoneIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 2, OpenFor: time.Second, Probes: 1})
		slow, _ := b.Allow()
		feed(t, b, 2, Failure, 0)
		time.Sleep(time.Second)
		probe, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		slow.Done(Success) // from the closed generation: must not close the breaker
		if s := b.State(); s != HalfOpen {
			t.Fatalf("stale Done changed state to %v", s)
		}
		probe.Done(Success)
		if s := b.State(); s != Closed {
			t.Fatalf("state = %v after the probe succeeded", s)
		}
	})
}

// TestIgnoredProbeFreesSlot: an Ignored probe hands its slot back.
func TestIgnoredProbeFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 1, OpenFor: time.Second, Probes: 1})
		feed(t, b, 1, Failure, 0)
		time.Sleep(time.Second)
		p, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Allow(); err == nil {
			t.Fatal("second probe admitted with Probes 1")
		}
		p.Done(Ignored)
		p2, err := b.Allow()
		if err != nil {
			t.Fatalf("probe slot not handed back after Ignored: %v", err)
		}
		p2.Done(Success)
		if s := b.State(); s != Closed {
			t.Fatalf("state = %v", s)
		}
	})
}

// TestHalfOpenProbeBoundConcurrent: many goroutines race for probes in
// half-open; at most Probes are ever in flight or admitted per half-open
// period, and the breaker ends closed.
func TestHalfOpenProbeBoundConcurrent(t *testing.T) {
	const probes = 4
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	b := mustNew(t, Config{MinCalls: 1, OpenFor: time.Second, Probes: probes, Now: now})
	c, _ := b.Allow()
	c.Done(Failure)
	if b.State() != Open {
		t.Fatal("not open")
	}
	clock.Add(int64(time.Second))

	var (
		admitted, inflight, peak atomic.Int64
		start                    = make(chan struct{})
		hold                     = make(chan struct{})
		wg                       sync.WaitGroup
		calls                    = make(chan Call, 64)
	)
	for range 64 {
		wg.Go(func() {
			<-start
			call, err := b.Allow()
			if err != nil {
				if !IsOpen(err) {
					t.Errorf("refusal of unexpected type: %v", err)
				}
				return
			}
			admitted.Add(1)
			n := inflight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			calls <- call
		})
	}
	close(start)
	wg.Wait()
	close(calls)
	if got := admitted.Load(); got != probes {
		t.Fatalf("half-open admitted %d of 64 racing callers, want exactly %d", got, probes)
	}
	close(hold)
	var done sync.WaitGroup
	for call := range calls {
		done.Go(func() { <-hold; inflight.Add(-1); call.Done(Success) })
	}
	done.Wait()
	if peak.Load() > probes {
		t.Fatalf("peak probes in flight %d > %d", peak.Load(), probes)
	}
	if s := b.State(); s != Closed {
		t.Fatalf("state = %v after %d good probes", s, probes)
	}
}

// TestStressInvariants hammers a breaker from many goroutines with mixed
// results on a moving clock and checks that Allowed+Rejected equals the
// calls made and that window sums never go negative.
func TestStressInvariants(t *testing.T) {
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Add(int64(time.Millisecond))) }
	b := mustNew(t, Config{MinCalls: 5, OpenFor: 50 * time.Millisecond, Probes: 2, Window: time.Second, Now: now})
	var wg sync.WaitGroup
	var made atomic.Uint64
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				made.Add(1)
				c, err := b.Allow()
				if err != nil {
					continue
				}
				switch (g + i) % 5 {
				case 0, 1:
					c.Done(Failure)
				case 2:
					c.Done(Ignored)
				default:
					c.Done(Success)
				}
				if i%100 == 0 {
					st := b.Stats()
					if st.WindowCalls < 0 || st.WindowFailures < 0 || st.WindowFailures > st.WindowCalls {
						t.Errorf("bad window sums %+v", st)
					}
				}
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	if st.Allowed+st.Rejected != made.Load() {
		t.Fatalf("allowed %d + rejected %d != %d calls", st.Allowed, st.Rejected, made.Load())
	}
	if st.Transitions[Closed][Open] == 0 || st.Transitions[Open][HalfOpen] == 0 {
		t.Fatalf("stress never cycled the breaker: %v", st.Transitions)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Window: -1}, {Buckets: -1}, {MinCalls: -1}, {FailureRatio: 1.5}, {SlowCallRatio: 2},
		{OpenFor: -time.Second}, {Probes: -2},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := New(Config{FailureRatio: -1, SlowCallRatio: -1}); err != nil {
		t.Errorf("negative ratios (disabled) refused: %v", err)
	}
}

func TestZeroCallDone(t *testing.T) {
	var c Call
	c.Done(Failure) // must not panic
	if IsOpen(errors.New("x")) || IsOpen(nil) {
		t.Fatal("IsOpen true for a non-breaker error")
	}
	if Open.String() != "open" || HalfOpen.String() != "half_open" || State(9).String() != "state(9)" {
		t.Fatal("State.String")
	}
}

// TestLateFailure: a success that failed after all (its answer's body
// stalled) turns into a failure without counting the call twice; half-open
// it fails the probe.
func TestLateFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 4, FailureRatio: 0.5, OpenFor: time.Second, Probes: 1})
		feed(t, b, 4, Success, 0)
		b.LateFailure()
		if s := b.Stats(); s.State != Closed || s.WindowCalls != 4 || s.WindowFailures != 1 {
			t.Fatalf("after 4 successes and one late failure: %+v; want closed, 4 calls, 1 failure", s)
		}
		b.LateFailure()
		if s := b.State(); s != Open {
			t.Fatalf("2 of 4 calls failed late: %v, want open", s)
		}
		b.LateFailure() // open: nothing to change
		time.Sleep(time.Second)
		feed(t, b, 1, Success, 0) // the probe's headers were good: closed
		if s := b.Stats(); s.State != Closed || s.WindowFailures != 0 {
			t.Fatalf("after a good probe: %+v; want closed with a fresh window", s)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{MinCalls: 1, OpenFor: time.Second, Probes: 2})
		feed(t, b, 1, Failure, 0)
		time.Sleep(time.Second)
		feed(t, b, 1, Success, 0) // one of two probes succeeded
		b.LateFailure()           // and then its body failed
		if s := b.State(); s != Open {
			t.Fatalf("a probe that failed late: %v, want open again", s)
		}
	})
}

// ConsecutiveFailures opens the breaker after that many failures in a row
// even when a window full of earlier successes keeps the ratio low; a
// success in between ends the streak, and an ignored call does not.
func TestConsecutiveFailuresOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Config{Name: "store", ConsecutiveFailures: 3})
		feed(t, b, 100, Success, 0)
		feed(t, b, 2, Failure, 0)
		feed(t, b, 1, Success, 0)
		feed(t, b, 2, Failure, 0)
		feed(t, b, 1, Ignored, 0)
		if s := b.State(); s != Closed {
			t.Fatalf("state after two streaks of 2 failures = %v, want closed", s)
		}
		feed(t, b, 1, Failure, 0)
		if s := b.State(); s != Open {
			t.Fatalf("state after 3 failures in a row (ratio %d/%d) = %v, want open", 5, 106, s)
		}
		if _, err := New(Config{ConsecutiveFailures: -1}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("negative ConsecutiveFailures: %v", err)
		}
	})
}
