package retry

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/httpgate"
)

// TestBudgetWindow: the budget allows ratio × requests + floor retries in
// the window, and frees up as old retries leave it.
func TestBudgetWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBudget(BudgetConfig{Ratio: 0.1, MinPerSecond: 0.2, Window: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			b.Request()
		}
		got := 0
		for b.TryRetry() {
			got++
		}
		if got != 7 { // 0.1 × 50 + 0.2 × 10
			t.Fatalf("%d retries allowed, want 7", got)
		}
		time.Sleep(11 * time.Second)
		if req, ret := b.Counts(); req != 0 || ret != 0 {
			t.Fatalf("after the window: %d requests %d retries, want 0 0", req, ret)
		}
		if !b.TryRetry() {
			t.Fatal("floor retry refused after the window rolled")
		}
	})
}

// TestBudgetConcurrent: many goroutines taking retries never exceed the
// budget.
func TestBudgetConcurrent(t *testing.T) {
	b, _ := NewBudget(BudgetConfig{Ratio: 0.5, MinPerSecond: -1, Window: time.Hour})
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Go(func() {
			for range 500 {
				b.Request()
				if b.TryRetry() {
					mu.Lock()
					granted++
					mu.Unlock()
				}
				if req, ret := b.Counts(); float64(ret) > 0.5*float64(req) {
					t.Errorf("retries %d > 0.5 × requests %d", ret, req)
				}
			}
		})
	}
	wg.Wait()
	if granted > 2000 || granted < 1900 {
		t.Fatalf("granted %d of a 2000 budget", granted)
	}
}

// TestThrottleProbability checks the formula: zero while accepts keep up,
// (requests − K·accepts)/(requests+1) otherwise.
func TestThrottleProbability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := NewThrottle(ThrottleConfig{Rand: func() float64 { return 0.999999 }, MinRequests: -1})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			th.Allow()
			th.Accepted()
		}
		if p := th.RejectProbability(); p != 0 {
			t.Fatalf("p = %v with every request accepted", p)
		}
		for range 90 {
			if th.Allow() {
				th.Refused()
			}
		}
		// 100 requests, 10 accepts: (100 − 20) / 101.
		if p, want := th.RejectProbability(), 80.0/101; math.Abs(p-want) > 1e-12 {
			t.Fatalf("p = %v, want %v", p, want)
		}
		time.Sleep(11 * time.Second)
		if p := th.RejectProbability(); p != 0 {
			t.Fatalf("p = %v after the window passed", p)
		}
	})
	th, _ := NewThrottle(ThrottleConfig{})
	for range 19 {
		th.Allow()
		th.Refused()
	}
	if p := th.RejectProbability(); p != 0 {
		t.Fatalf("p = %v below MinRequests", p)
	}
}

// TestThrottleCountsAnswersNotDepartures: requests in flight have no
// answer yet, so a burst of concurrent first requests (or long polls) is
// not mistaken for refusals. 32 calls start and wait together through a
// policy whose default throttle would refuse most of them if it counted
// each as it left (20 requests, 0 accepts: p = 20/21 > the draw of 0.5).
func TestThrottleCountsAnswersNotDepartures(t *testing.T) {
	p, err := New(Config{Name: "burst", Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	entered, refused := make(chan struct{}, n), make(chan error, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := p.Do(t.Context(), true, func(int, Timeout) Outcome {
				entered <- struct{}{}
				<-release
				return Outcome{Accepted: true}
			})
			if err != nil {
				refused <- err
			}
		})
	}
	var got, lost int
	for got+lost < n {
		select {
		case <-entered:
			got++
		case err := <-refused:
			lost++
			t.Errorf("refused while %d calls were in flight: %v", got, err)
		}
	}
	close(release)
	wg.Wait()
	if th := p.throttle; th.RejectProbability() != 0 {
		t.Errorf("after %d accepted answers the refusal probability is %v", n, th.RejectProbability())
	}
}

func TestBackoff(t *testing.T) {
	base, maxDelay := 10*time.Millisecond, 70*time.Millisecond
	for _, tc := range []struct {
		retry int
		want  time.Duration // ceiling
	}{{1, 10 * time.Millisecond}, {2, 20 * time.Millisecond}, {3, 40 * time.Millisecond}, {4, 70 * time.Millisecond}, {60, 70 * time.Millisecond}} {
		if got := Backoff(tc.retry, base, maxDelay, 0.5); got != tc.want/2 {
			t.Errorf("Backoff(%d, u=0.5) = %v, want %v", tc.retry, got, tc.want/2)
		}
		if got := Backoff(tc.retry, base, maxDelay, 0); got != 0 {
			t.Errorf("Backoff(%d, u=0) = %v, want 0 (full jitter)", tc.retry, got)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"3", 3 * time.Second}, {" 120 ", 2 * time.Minute}, {"99999999999999999999", 24 * time.Hour},
		{"Mon, 30 Nov 2026 12:00:05 GMT", 5 * time.Second},
		{"Mon, 30 Nov 2026 11:00:00 GMT", 0},
		{"Monday, 30-Nov-26 12:00:10 GMT", 10 * time.Second},
	} {
		got, err := ParseRetryAfter(tc.in, now)
		if err != nil || got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5", "soon", "3s", "Mon, 30 Nov 2026"} {
		if _, err := ParseRetryAfter(bad, now); !errors.Is(err, ErrBadRetryAfter) {
			t.Errorf("ParseRetryAfter(%q) err = %v, want ErrBadRetryAfter", bad, err)
		}
	}
}

func TestFormatTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Second: "2", 250 * time.Millisecond: "0.25", time.Microsecond: "0.001",
		1500*time.Millisecond + 999*time.Microsecond: "1.5", 61*time.Second + 7*time.Millisecond: "61.007",
	} {
		if got := FormatTimeout(d); got != want {
			t.Errorf("FormatTimeout(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{MaxAttempts: -1}, {BaseDelay: -1}, {MaxDelay: -time.Second}} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := NewBudget(BudgetConfig{Window: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Error("NewBudget accepted a negative window")
	}
	for _, k := range []float64{0.5, -2, math.NaN()} {
		if _, err := NewThrottle(ThrottleConfig{K: k}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewThrottle accepted K=%v", k)
		}
	}
	if Event(200).String() != "event(200)" || EventBudgetExhausted.String() != "budget_exhausted" || StopBudget.String() != "budget" {
		t.Fatal("labels")
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "Mon, 30 Nov 2026 12:00:05 GMT", "", "1e9", "  7\t", "99999999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseRetryAfter(s, now)
		if err != nil {
			if !errors.Is(err, ErrBadRetryAfter) {
				t.Fatalf("error %v does not wrap ErrBadRetryAfter", err)
			}
			return
		}
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v out of [0, 24h]", s, d)
		}
	})
}

// FuzzFormatTimeout: whatever FormatTimeout writes, httpgate parses back
// to within a millisecond below the input.
func FuzzFormatTimeout(f *testing.F) {
	for _, d := range []int64{0, 1, int64(time.Millisecond), int64(2500 * time.Millisecond), 1 << 50} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		s := FormatTimeout(d)
		got, err := httpgate.ParseDeadline(s)
		if err != nil {
			t.Fatalf("FormatTimeout(%v) = %q, which httpgate rejects: %v", d, s, err)
		}
		if d >= time.Millisecond && d < 1<<29*time.Second && (got > d || d-got >= time.Millisecond) {
			t.Fatalf("FormatTimeout(%v) = %q parses to %v", d, s, got)
		}
	})
}

type recordingObserver struct {
	mu     sync.Mutex
	counts map[string][NumEvents]uint64
}

func (o *recordingObserver) ObserveRetry(policy string, e Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.counts[policy]
	c[e]++
	o.counts[policy] = c
}

// TestObserverSeesEveryEvent: the Observer receives exactly the events
// Stats counts, under the policy's name.
func TestObserverSeesEveryEvent(t *testing.T) {
	obs := &recordingObserver{counts: map[string][NumEvents]uint64{}}
	p, err := New(Config{Name: "users", MaxAttempts: 3, Observer: obs, NoThrottle: true,
		Sleep: func(ctx context.Context, d time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p.Do(context.Background(), true, func(n int, to Timeout) Outcome {
			return Outcome{Retryable: true, Breaker: breaker.Failure, HasRetryAfter: n == 1, RetryAfter: time.Hour}
		})
	}
	st := p.Stats()
	if st[EventAttempt] == 0 || st[EventRetryAfterRefused] != 3 {
		t.Fatalf("stats %v", st)
	}
	if got := obs.counts["users"]; got != st {
		t.Fatalf("observer saw %v, stats say %v", got, st)
	}
}
