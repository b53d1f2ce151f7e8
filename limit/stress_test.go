package limit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// recordingGate wraps a real gate and checks, on every capacity change,
// that decisions are at least a window apart and within Min..Max.
type recordingGate struct {
	*admit.Gate
	a        *Adaptive
	window   time.Duration
	min, max int64

	mu      sync.Mutex
	last    time.Time
	changes int
	errs    []string
}

func (r *recordingGate) SetCapacity(c int64) error {
	r.mu.Lock()
	// SetCapacity is called under the Adaptive's lock, after the window
	// closed: windowStart is the decision's own time. (A wall-clock reading
	// here would carry scheduling jitter: a goroutine preempted between its
	// decision and this call makes two decisions look close.)
	now := r.a.windowStart
	if !r.last.IsZero() && now.Sub(r.last) < r.window {
		r.errs = append(r.errs, "two decisions within one window: "+now.Sub(r.last).String())
	}
	if c < r.min || c > r.max {
		r.errs = append(r.errs, "capacity outside min..max")
	}
	r.last = now
	r.changes++
	r.mu.Unlock()
	return r.Gate.SetCapacity(c)
}

// Many goroutines acquire, hold and release through a gate whose observer
// is the Adaptive, while others read State. Under -race this checks the
// observer path and the decision for data races; the recorder checks
// decisions are at most once per window and within bounds, and the state
// snapshots are consistent.
func TestConcurrentObserversStress(t *testing.T) {
	const window = 5 * time.Millisecond
	a, err := New(Config{Law: &Vegas{}, Min: 2, Max: 64, Initial: 8, Window: window, SLO: 20 * time.Millisecond,
		Ramp: Ramp{Hold: 2 * window}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := admit.New(admit.Config{Name: "stress", Capacity: 8, Observer: a})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingGate{Gate: g, a: a, window: window, min: 2, max: 64}
	if err := a.attach(rec); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.last = time.Time{} // Attach's own SetCapacity is not a decision
	rec.mu.Unlock()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var done atomic.Int64
	for i := range 16 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				p, err := g.TryAcquire()
				if err != nil {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if (n+i)%7 == 0 {
					time.Sleep(time.Duration(i%4) * time.Millisecond)
				}
				o := admit.OutcomeOK
				if n%11 == 0 {
					o = admit.OutcomeDropped
				}
				p.Done(o)
				done.Add(1)
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := a.State()
			var sum uint64
			for _, n := range st.Decisions {
				sum += n
			}
			if sum != st.Windows || st.Limit < 2 || st.Limit > 64 {
				t.Errorf("inconsistent state: %d decisions over %d windows, limit %d", sum, st.Windows, st.Limit)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	start := time.Now()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.errs {
		t.Error(e)
	}
	st := a.State()
	if st.Windows == 0 || done.Load() == 0 {
		t.Fatalf("no windows judged (%d) or no work done (%d)", st.Windows, done.Load())
	}
	if maxWindows := uint64(elapsed/window) + 1; st.Windows > maxWindows {
		t.Errorf("%d windows judged in %v: more than one per window", st.Windows, elapsed)
	}
	if g.Capacity() != st.Limit {
		t.Errorf("gate capacity %d, state limit %d", g.Capacity(), st.Limit)
	}
}

// TestQueueWaitFromTarget: the queue's wait is the age of the target's
// oldest queued request as a window closes, once two windows in a row
// have seen it, and the hold's budget is the SLO less it (at least half
// the SLO).
func TestQueueWaitFromTarget(t *testing.T) {
	for _, tc := range []struct {
		ages         []time.Duration
		wait, budget time.Duration
	}{
		{[]time.Duration{37 * time.Millisecond, 40 * time.Millisecond}, 37 * time.Millisecond, 63 * time.Millisecond},
		{[]time.Duration{80 * time.Millisecond, 90 * time.Millisecond}, 80 * time.Millisecond, 50 * time.Millisecond},
		{[]time.Duration{0, 90 * time.Millisecond}, 0, 100 * time.Millisecond}, // one late wake-up
	} {
		a, err := New(Config{Law: &Gradient2{}, Initial: 10, SLO: 100 * time.Millisecond, Ramp: Ramp{Steps: -1}})
		if err != nil {
			t.Fatal(err)
		}
		tgt := &fakeTarget{name: "g"}
		if err := a.attach(tgt); err != nil {
			t.Fatal(err)
		}
		now := epoch
		for _, age := range tc.ages {
			tgt.oldest = age
			now = feedWindow(a, now, DefaultWindow, 5*time.Millisecond, 5, DefaultMinSamples)
		}
		if st := a.State(); st.Windows != 2 || st.Wait != tc.wait || st.Budget != tc.budget {
			t.Errorf("ages %v: after %d window(s) wait %v, budget %v; want %v and %v", tc.ages, st.Windows, st.Wait, st.Budget, tc.wait, tc.budget)
		}
	}
}

func TestQueueWaitFor(t *testing.T) {
	for slo, want := range map[time.Duration]time.Duration{0: 0, -time.Second: 0, 50 * time.Millisecond: 12500 * time.Microsecond, 2 * time.Second: 500 * time.Millisecond} {
		if got := QueueWaitFor(slo); got != want {
			t.Errorf("QueueWaitFor(%v) = %v, want %v", slo, got, want)
		}
	}
}
