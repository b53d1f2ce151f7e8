package limit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t *testing.T, cfg Config) (*Adaptive, *fakeTarget) {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tgt := &fakeTarget{name: "g"}
	if err := a.attach(tgt); err != nil {
		t.Fatal(err)
	}
	return a, tgt
}

func TestConfigErrors(t *testing.T) {
	bad := map[string]Config{
		"negative min":      {Min: -1},
		"negative max":      {Max: -1},
		"max below min":     {Min: 10, Max: 5},
		"max above gate":    {Max: admit.MaxCapacity + 1},
		"negative initial":  {Initial: -1},
		"negative slo":      {SLO: -time.Second},
		"negative window":   {Window: -time.Second},
		"backoff 1":         {Backoff: 1},
		"negative backoff":  {Backoff: -0.5},
		"quantile above 1":  {Quantile: 1.5},
		"negative quantile": {Quantile: -0.1},
		"app limited >1":    {AppLimited: 2},
		"negative hold":     {Ramp: Ramp{Hold: -1}},
		"trigger 1":         {Ramp: Ramp{Trigger: 1}},
		"gain 1":            {Ramp: Ramp{MinGain: 1}},
		"negative gain":     {Ramp: Ramp{MinGain: -0.1}},
	}
	for name, cfg := range bad {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
	a, err := New(Config{})
	if err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	if err := a.Attach(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Attach(nil) = %v, want ErrInvalidConfig", err)
	}
	if got := a.State().Law; got != "gradient2" {
		t.Errorf("default law %q, want gradient2", got)
	}
}

func TestInitialFromGateAndClamped(t *testing.T) {
	g, err := admit.New(admit.Config{Name: "disk", Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Max: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		t.Fatal(err)
	}
	if g.Capacity() != 50 || a.Limit() != 50 {
		t.Errorf("gate capacity %d, limit %d; want both clamped to Max 50", g.Capacity(), a.Limit())
	}
	if a.State().Gate != "disk" {
		t.Errorf("state gate %q, want disk", a.State().Gate)
	}
}

// Dropped work ended before it did what it was admitted for; its hold time
// says nothing about the backend and must not move the limit.
func TestDroppedWorkIsNotASample(t *testing.T) {
	for _, law := range []string{"aimd", "vegas", "gradient2"} {
		l, _ := lawByName(law)
		a, _ := mustNew(t, Config{Law: l, Initial: 20, Ramp: Ramp{Steps: -1}})
		now := epoch
		for w := range 5 {
			a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: 20})
			for k := range 10 {
				at := now.Add(time.Duration(k) * time.Millisecond)
				a.ObserveCompletionAt(admit.CompletionEvent{Outcome: admit.OutcomeOK, Weight: 1, Hold: 10 * time.Millisecond}, at)
				for range 3 { // many dropped permits that held their slot for ten seconds
					a.ObserveCompletionAt(admit.CompletionEvent{Outcome: admit.OutcomeDropped, Weight: 1, Hold: 10 * time.Second}, at)
				}
			}
			now = now.Add(DefaultWindow)
			a.DecideAt(now)
			st := a.State()
			if st.Samples != 10 || st.Latency > 11*time.Millisecond {
				t.Fatalf("%s window %d: samples %d, latency %v; dropped work fed the measure", law, w, st.Samples, st.Latency)
			}
			if st.Decision == DecisionShrink {
				t.Fatalf("%s window %d: limit shrank to %d on dropped work", law, w, st.Limit)
			}
		}
	}
}

// One very slow request among many cannot swing the limit: the measure is
// a quantile, not a mean or a maximum.
func TestSingleSlowRequestCannotSwing(t *testing.T) {
	for _, law := range []string{"aimd", "vegas", "gradient2"} {
		l, _ := lawByName(law)
		a, _ := mustNew(t, Config{Law: l, Initial: 20, SLO: 100 * time.Millisecond, Ramp: Ramp{Steps: -1}})
		now := epoch
		for w := range 10 {
			a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: a.Limit()})
			for k := range 20 {
				hold := 10 * time.Millisecond
				if k == 7 {
					hold = 30 * time.Second
				}
				a.ObserveCompletionAt(admit.CompletionEvent{Outcome: admit.OutcomeOK, Weight: 1, Hold: hold}, now.Add(time.Duration(k)*time.Millisecond))
			}
			now = now.Add(DefaultWindow)
			a.DecideAt(now)
			if st := a.State(); st.Decision == DecisionShrink || st.Overload {
				t.Fatalf("%s window %d: one slow request made it %s (%s), latency %v", law, w, st.Decision, st.Why, st.Latency)
			}
		}
	}
}

func TestWindowWaitsForMinSamples(t *testing.T) {
	a, _ := mustNew(t, Config{Law: &AIMD{}, Initial: 10})
	a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: 10})
	for k := range 3 {
		a.ObserveCompletionAt(admit.CompletionEvent{Outcome: admit.OutcomeOK, Hold: time.Millisecond}, epoch.Add(time.Duration(k)*time.Millisecond))
	}
	a.DecideAt(epoch.Add(3 * DefaultWindow))
	if w := a.State().Windows; w != 0 {
		t.Fatalf("a window of 3 samples (< MinSamples) was judged after 3 windows: %d", w)
	}
	a.DecideAt(epoch.Add(10 * DefaultWindow))
	if st := a.State(); st.Windows != 1 || st.Samples != 3 {
		t.Fatalf("after 10 windows the short window must be judged: windows %d, samples %d", st.Windows, st.Samples)
	}
}

// The drift reported against adaptive limiters (failsafe-go #127, Netflix
// concurrency-limits #137, Envoy #11579): during a long incident the
// baseline follows latency up until slow looks normal and the limit grows
// back. With an SLO ceiling the limit stays down for the whole incident and
// the baseline never rises above the ceiling.
// Seconds under -race: a ten-minute incident fed window by window to each
// of three laws.
func TestSLOCeilingStopsDrift(t *testing.T) {
	const slo = 50 * time.Millisecond
	for _, law := range []string{"vegas", "gradient2", "aimd"} {
		l, _ := lawByName(law)
		a, _ := mustNew(t, Config{Law: l, Initial: 40, Min: 2, Max: 200, SLO: slo})
		now := epoch
		for range 20 {
			now = feedWindow(a, now, DefaultWindow, 10*time.Millisecond, a.Limit(), 10)
		}
		before := a.Limit()
		// A ten-minute incident: every request takes four times the SLO, and
		// the gate stays full (callers keep coming).
		for w := range 6000 {
			now = feedWindow(a, now, DefaultWindow, 4*slo, a.Limit(), 10)
			if w > 100 && a.Limit() > 2 {
				st := a.State()
				t.Fatalf("%s: %v into the incident the limit drifted back to %d (before %d), baseline %v",
					law, time.Duration(w)*DefaultWindow, st.Limit, before, st.Baseline)
			}
		}
		if st := a.State(); st.Baseline > slo {
			t.Errorf("%s: baseline %v above the SLO %v after the incident", law, st.Baseline, slo)
		}
	}
}

// Without a ceiling the drift is real: the same incident lets Gradient2's
// limit climb back. This is why Config.SLO should be set.
func TestWithoutCeilingGradientDrifts(t *testing.T) {
	a, _ := mustNew(t, Config{Law: &Gradient2{}, Initial: 40, Min: 2, Max: 200})
	now := epoch
	for range 20 {
		now = feedWindow(a, now, DefaultWindow, 10*time.Millisecond, a.Limit(), 10)
	}
	lowest := a.Limit()
	for range 600 {
		now = feedWindow(a, now, DefaultWindow, 200*time.Millisecond, a.Limit(), 10)
		lowest = min(lowest, a.Limit())
	}
	if got := a.Limit(); got < 2*lowest {
		t.Fatalf("expected the ceiling-less limit to drift up from %d; it is %d", lowest, got)
	}
}

func TestDecisionStrings(t *testing.T) {
	seen := map[string]bool{}
	for d := range NumDecisions {
		s := d.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("decision %d has label %q", d, s)
		}
		seen[s] = true
	}
	if NumDecisions.String() != "unknown" {
		t.Error("out-of-range decision must say unknown")
	}
}

// The observer path, decisions included, allocates nothing.
func TestObservePathDoesNotAllocate(t *testing.T) {
	g, err := admit.New(admit.Config{Name: "g", Capacity: 20})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Law: &Vegas{}, Initial: 20, SLO: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		t.Fatal(err)
	}
	now := epoch
	i := 0
	ev := admit.CompletionEvent{Gate: "g", Outcome: admit.OutcomeOK, Weight: 1, Hold: 5 * time.Millisecond}
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		now = now.Add(DefaultWindow / 20) // a decision every 20 samples
		a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: int64(i % 25)})
		a.ObserveCompletionAt(ev, now)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per sample", allocs)
	}
	if a.State().Windows < 40 {
		t.Fatalf("only %d windows judged: the decisions were not exercised", a.State().Windows)
	}
}

// On a gate whose only observer it is, the Adaptive learns the window's
// peak of slots in use from the gate's grants (ObserveGrant): ten permits
// held at once, all ended before the window is judged, still count as ten
// in use for the application-limited guard.
func TestPeakInflightFromGrants(t *testing.T) {
	now := epoch
	a, err := New(Config{Law: &AIMD{}, Initial: 40, Max: 40, MinSamples: 1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := admit.New(admit.Config{Name: "g", Capacity: 40, Observer: a})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		t.Fatal(err)
	}
	a.Decide() // opens the first window
	ps := make([]admit.Permit, 10)
	for i := range ps {
		if ps[i], err = g.TryAcquire(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ps {
		ps[i].Done(admit.OutcomeOK)
	}
	now = now.Add(DefaultWindow)
	a.Decide()
	if st := a.State(); st.Windows != 1 || st.Inflight != 10 {
		t.Fatalf("window %d judged with inflight %d, want the peak of 10", st.Windows, st.Inflight)
	}
}

// Run decides every window even without completions, so a Signal can
// shed while nothing completes; it returns when its context ends.
func TestRunDecidesWithoutCompletions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _ := mustNew(t, Config{Law: &AIMD{}, Initial: 40, SLO: 5 * time.Millisecond,
			Signal: &fixedSignal{d: 20 * time.Millisecond}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		time.Sleep(time.Second + DefaultWindow/2)
		cancel()
		<-done
		st := a.State()
		if st.Windows < 8 || st.Limit >= 20 || st.Decision != DecisionShrink {
			t.Fatalf("Run with an overloaded signal: %d windows, limit %d, %s", st.Windows, st.Limit, st.Decision)
		}
	})
}

func TestStateMarshalsReadableJSON(t *testing.T) {
	a, _ := mustNew(t, Config{Law: &AIMD{}, Initial: 10})
	feedWindow(a, epoch, DefaultWindow, time.Millisecond, 10, 10)
	b, err := json.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"Decision":"grow"`) || !strings.Contains(string(b), `"Law":"aimd"`) {
		t.Fatalf("state JSON lacks readable decision or law: %s", b)
	}
}
