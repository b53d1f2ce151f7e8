package limit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// ErrInvalidConfig is wrapped by every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("limit: invalid config")

// Defaults for the zero Config.
const (
	DefaultWindow     = 100 * time.Millisecond
	DefaultMinSamples = 10
	DefaultQuantile   = 0.9
	DefaultAppLimited = 0.5
	DefaultBackoff    = 0.9
	DefaultMin        = 1
	DefaultMax        = 1000
	DefaultInitial    = 20
)

// target is what an Adaptive moves and reads: an *admit.Gate (tests give
// it stand-ins). Name names the state, Capacity gives the initial limit,
// InUse completes the window's inflight peak, and OldestWait is the
// queue's wait: its share of the SLO, and the ramp's queue age.
type target interface {
	Name() string
	Capacity() int64
	InUse() int64
	OldestWait() time.Duration
	SetCapacity(int64) error
}

// Signal is an overload measure other than hold times (see SchedLatency).
// Latency returns the measure for the interval ending at now, and false
// when it has nothing to say (no data yet); then the window is skipped.
// Signals are called under the Adaptive's lock, once per window.
type Signal interface {
	Latency(now time.Time) (time.Duration, bool)
}

// Config configures an Adaptive. The zero value is a valid default: a
// Gradient2 law, limits 1..1000 starting from the gate's capacity, 100 ms
// windows of at least 10 samples judged by their 90th percentile, no SLO ceiling
// and a four-step recovery ramp.
type Config struct {
	// Law moves the limit. Nil means a new Gradient2 with its defaults. A
	// Law holds state: give each Adaptive its own.
	Law Law

	// Min and Max bound the limit, in slots. Min 0 means 1; Max 0 means
	// 1000. Negative, or Max below Min, is an error.
	Min, Max int64
	// Initial is the first limit. 0 means the attached gate's capacity
	// (20 until a gate is attached); it is clamped to Min..Max. Negative
	// is an error.
	Initial int64

	// SLO is the latency the service promises its callers (at the 99th
	// percentile): the gate's queue wait plus the hold. The hold's budget
	// is the SLO less the queue's wait (the age of the gate's oldest
	// queued request as a window closes, if it was as old at the previous
	// window: one late wake-up is not a queue), at least half of it. A
	// window whose measure is above the budget is an overload: the limit
	// shrinks by Backoff whatever the law says, and no law learns from it.
	// A window whose 99th percentile is above the budget shrinks the
	// limit by Backoff too and never grows it. The law aims at 70% of
	// the budget, and no baseline rises above that, so a long incident
	// cannot make slow look normal. With a Signal the SLO is a ceiling on
	// the signal alone. Give the gate a queue wait well under the SLO
	// (QueueWaitFor). 0 means no ceiling (not recommended); negative is an
	// error.
	SLO time.Duration
	// Backoff multiplies the limit after an overloaded window. 0 means 0.9;
	// outside (0,1) is an error.
	Backoff float64

	// Window is the sampling window: the limit changes at most once per
	// window. 0 means 100 ms; negative is an error.
	Window time.Duration
	// MinSamples is how many samples a window needs before it is judged;
	// a window short of them is extended up to ten times its length. 0
	// means 10; negative means 1.
	MinSamples int
	// Quantile of the window's hold times used as its measure. 0 means
	// 0.9: high enough to see the part of the requests that queue when the
	// limit passes the backend's capacity (a median misses it until half
	// of them queue), low enough that the slowest tenth of a window, and so
	// one slow request, cannot move it. Outside (0,1] is an error.
	Quantile float64
	// Signal, if not nil, replaces hold times as the measure (for example
	// SchedLatency). SLO is then a ceiling on the signal.
	Signal Signal

	// AppLimited stops growth while the most slots used in a window is
	// below AppLimited × limit: a limit nobody reaches has not been tested
	// and must not climb. 0 means 0.5; negative turns the guard off; above
	// 1 is an error.
	AppLimited float64

	// Ramp configures recovery after an overload episode.
	Ramp Ramp

	// Logger receives episode and ramp transitions at Info and every
	// window's decision at Debug. Nil is silent.
	Logger *slog.Logger
	// Now is the clock. Nil means the system clock: the time New ran plus
	// the monotonic time since, so a step of the wall clock moves no window.
	Now func() time.Time
}

// Ramp configures the recovery ramp. After an overload episode (a window
// above the SLO, or the limit falling below Trigger × its recent high), the
// capacity does not jump back: it climbs from where the episode left it to
// the pre-episode level in Steps equal steps. Each step is held for Hold;
// at the end of a hold the ramp grows one step if completions rose against
// the step below, pauses if they did not (or latency is rising), and steps
// back one level if completions fell, latency rose to twice its level at
// the start of the ramp, or the age of the gate's oldest queued request
// doubled. The zero value is a four-step ramp.
type Ramp struct {
	// Steps is the number of steps. 0 means 4; negative means no ramp (the
	// law alone decides how fast capacity returns).
	Steps int
	// Hold is how long each step is held before it is judged. 0 means five
	// windows; negative is an error.
	Hold time.Duration
	// Trigger: the limit falling below Trigger × its recent high marks an
	// episode even without an SLO. 0 means 0.5; negative means only the
	// SLO marks episodes; 1 or more is an error.
	Trigger float64
	// MinGain is the relative rise in completions that counts as rising
	// (and its negative as falling). 0 means 0.05; negative or 1 or more is
	// an error.
	MinGain float64
}

type settings struct {
	min, max, initial   float64
	slo, window, hold   time.Duration
	backoff, quantile   float64
	sloQuantile         float64
	appLimited, trigger float64
	gain                float64
	minSamples, steps   int
	signal              Signal
	log                 *slog.Logger
	now                 func() time.Time
	initialFromTarget   bool
}

func (c Config) resolve() (settings, error) {
	bad := func(format string, args ...any) (settings, error) {
		return settings{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	s := settings{min: DefaultMin, max: DefaultMax, window: DefaultWindow, backoff: DefaultBackoff,
		quantile: DefaultQuantile, sloQuantile: 0.99, appLimited: DefaultAppLimited, minSamples: DefaultMinSamples,
		steps: 4, trigger: 0.5, gain: 0.05, signal: c.Signal,
		log: c.Logger, now: c.Now, slo: c.SLO}
	switch {
	case c.Min < 0 || c.Max < 0 || c.Initial < 0:
		return bad("Min, Max and Initial must not be negative")
	case c.SLO < 0:
		return bad("SLO %v is negative", c.SLO)
	case c.Window < 0:
		return bad("Window %v is negative", c.Window)
	case c.Backoff < 0 || c.Backoff >= 1 && c.Backoff != 0:
		return bad("Backoff %v outside (0,1)", c.Backoff)
	case c.Quantile < 0 || c.Quantile > 1:
		return bad("Quantile %v outside (0,1]", c.Quantile)
	case c.AppLimited > 1:
		return bad("AppLimited %v above 1", c.AppLimited)
	case c.Ramp.Hold < 0:
		return bad("Ramp.Hold %v is negative", c.Ramp.Hold)
	case c.Ramp.Trigger >= 1:
		return bad("Ramp.Trigger %v is 1 or more", c.Ramp.Trigger)
	case c.Ramp.MinGain < 0 || c.Ramp.MinGain >= 1:
		return bad("Ramp.MinGain %v outside [0,1)", c.Ramp.MinGain)
	}
	if c.Min > 0 {
		s.min = float64(c.Min)
	}
	if c.Max > 0 {
		s.max = float64(c.Max)
	}
	if c.Max > admit.MaxCapacity {
		return bad("Max %d above admit.MaxCapacity", c.Max)
	}
	if s.max < s.min {
		return bad("Max %v below Min %v", s.max, s.min)
	}
	s.initial = DefaultInitial
	if c.Initial > 0 {
		s.initial = float64(c.Initial)
	} else {
		s.initialFromTarget = true
	}
	if c.Window > 0 {
		s.window = c.Window
	}
	if c.Backoff > 0 {
		s.backoff = c.Backoff
	}
	if c.Quantile > 0 {
		s.quantile = c.Quantile
	}
	switch {
	case c.AppLimited < 0:
		s.appLimited = 0
	case c.AppLimited > 0:
		s.appLimited = c.AppLimited
	}
	switch {
	case c.MinSamples < 0:
		s.minSamples = 1
	case c.MinSamples > 0:
		s.minSamples = c.MinSamples
	}
	switch {
	case c.Ramp.Steps < 0:
		s.steps = 0
	case c.Ramp.Steps > 0:
		s.steps = c.Ramp.Steps
	}
	s.hold = 5 * s.window
	if c.Ramp.Hold > 0 {
		s.hold = c.Ramp.Hold
	}
	switch {
	case c.Ramp.Trigger < 0:
		s.trigger = 0
	case c.Ramp.Trigger > 0:
		s.trigger = c.Ramp.Trigger
	}
	if c.Ramp.MinGain > 0 {
		s.gain = c.Ramp.MinGain
	}
	if s.now == nil {
		// The monotonic clock from a fixed base: one clock read, where
		// time.Now makes two (wall and monotonic), on the sample path.
		base := time.Now()
		s.now = func() time.Time { return base.Add(time.Since(base)) }
	}
	return s, nil
}

// Adaptive is an admit.Observer that moves a gate's capacity: it feeds the
// hold time of every completion that produced a sample (dropped work never
// does) into a window, and once per window asks its Law for the next
// limit, applies the guardrails and the recovery ramp, and calls
// SetCapacity on the attached gate.
//
// NewGate builds a gate with its Adaptive in one step. By hand: create one
// with New, pass it as the gate's admit.Config.Observer (alone or with
// admit.Observers), then Attach the gate. Before Attach it still learns
// but moves nothing. The zero value is not usable.
//
// Safe for concurrent use: the gate calls it from every goroutine that
// ends a permit. The sample path takes no lock and does not allocate: two
// atomic increments, and a clock read on one completion in eight. The
// decision (at most once per window) runs in the goroutine whose
// completion found the window over, under a lock that no completion waits
// for (TryLock: if it is taken, the next completion tries again).
type Adaptive struct {
	cfg settings
	law Law

	// The sample path is lock-free: the peak, the window's histogram (one
	// of two, swapped when a window closes) and the time the window is due.
	peak  atomic.Int64  // most slots in use seen this window
	ticks atomic.Uint32 // completions, to read the clock on every clockEvery-th
	due   atomic.Int64  // Unix ns when the window may close; 0 before the first event
	cur   atomic.Pointer[histogram]
	hists [2]histogram

	mu          sync.Mutex // guards everything below; then the gate's own lock
	target      target     // the attached gate; nil before Attach
	name        string
	windowStart time.Time
	limit       float64       // the law's limit, unrounded
	capacity    int64         // what the gate was last given
	lastWait    time.Duration // the queue wait read at the previous window
	highWater   float64
	episode     bool
	episodeTop  float64
	ramp        rampState
	state       State
}

// New returns an Adaptive for cfg, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Adaptive, error) {
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	law := cfg.Law
	if law == nil {
		law = &Gradient2{}
	}
	a := &Adaptive{cfg: s, law: law}
	a.cur.Store(&a.hists[0])
	a.limit = clamp(s.initial, s.min, s.max)
	a.capacity = int64(math.Round(a.limit))
	a.highWater = a.limit
	a.state = State{Law: law.Name(), Limit: a.capacity, Ceiling: s.slo}
	a.state.Ramp.Steps = s.steps
	return a, nil
}

// Attach makes a the controller of g's capacity and sets g to the current
// limit (with Config.Initial 0, the limit starts from g's own capacity).
// From then on a reads g's slots in use (the window's peak), and the age
// of g's oldest queued request (the queue's share of the SLO, and the
// ramp's queue age). Attaching again replaces the gate. a must also be g's
// Observer, or it learns nothing: NewGate does both steps.
func (a *Adaptive) Attach(g *admit.Gate) error {
	if g == nil {
		return fmt.Errorf("%w: nil gate", ErrInvalidConfig)
	}
	return a.attach(g)
}

func (a *Adaptive) attach(t target) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.target = t
	a.name = t.Name()
	a.state.Gate = a.name
	if a.cfg.initialFromTarget && a.state.Windows == 0 {
		if have := t.Capacity(); have > 0 {
			a.limit = clamp(float64(have), a.cfg.min, a.cfg.max)
			a.highWater = a.limit
		}
	}
	a.capacity = int64(math.Round(a.limit))
	a.state.Limit = a.capacity
	return t.SetCapacity(a.capacity)
}

// NewGate builds the gate gate describes with an Adaptive, configured by
// lim, moving its capacity: it creates the Adaptive, makes it the gate's
// Observer besides gate.Observer (admit.Observers), builds the gate and
// attaches the Adaptive to it. A gate with a queue (MaxWaiters) but no
// MaxWait waits at most QueueWaitFor(lim.SLO) when lim has an SLO, so that
// the queue's wait and the hold fit in the SLO together.
//
// With lim nil it builds the gate alone, with a fixed capacity, and the
// Adaptive it returns is nil: code that configures either kind of gate
// (a flag that says fixed or adaptive) has one call for both. Errors from
// lim wrap ErrInvalidConfig; errors from gate are admit.New's.
func NewGate(gate admit.Config, lim *Config) (*admit.Gate, *Adaptive, error) {
	if lim == nil {
		g, err := admit.New(gate)
		return g, nil, err
	}
	a, err := New(*lim)
	if err != nil {
		return nil, nil, err
	}
	if gate.MaxWaiters > 0 && gate.MaxWait == 0 && lim.SLO > 0 {
		gate.MaxWait = QueueWaitFor(lim.SLO)
	}
	gate.Observer = admit.Observers(gate.Observer, a)
	g, err := admit.New(gate)
	if err != nil {
		return nil, nil, err
	}
	if err := a.Attach(g); err != nil {
		g.Close()
		return nil, nil, err
	}
	return g, a, nil
}

// ObserveAdmission implements admit.Observer: it keeps the window's peak of
// slots in use (the input of the application-limited guard).
func (a *Adaptive) ObserveAdmission(e admit.AdmissionEvent) {
	if e.Accepted {
		a.ObserveGrant(e.Inflight)
	}
}

// ObserveGrant implements admit.GrantObserver: a gate whose only observer
// is a, reports grants here, with the slots in use after each, and skips
// building the event it has no use for.
func (a *Adaptive) ObserveGrant(inflight int64) {
	for {
		p := a.peak.Load()
		if inflight <= p || a.peak.CompareAndSwap(p, inflight) {
			return
		}
	}
}

// QueueWaitFor is the queue wait to give a gate whose Adaptive has the
// given SLO, when nothing else says how long requests may wait: a quarter
// of the SLO. The SLO covers the queue's wait and the hold together; the
// Adaptive holds the hold's tail to what the queue leaves (at least half),
// so a queue allowed to wait most of the SLO would leave the limit nothing
// to work with. 0 for an SLO of 0 or less.
func QueueWaitFor(slo time.Duration) time.Duration {
	if slo <= 0 {
		return 0
	}
	return slo / 4
}

// lawMargin is the part of the hold's latency budget a law aims its
// measure (the 90th percentile) at; the rest is room for the tail (the
// 99th), which the SLO guard holds to the whole budget.
const lawMargin = 0.7

// clockEvery: ObserveCompletion reads the clock on one completion in
// this many. A clock read costs more than the rest of the sample path
// (some 25 ns of CPU on a VM), and a window closes a few completions late at
// worst: at low rates a window lasts until clockEvery completions.
const clockEvery = 8

// ObserveCompletion implements admit.Observer.
func (a *Adaptive) ObserveCompletion(e admit.CompletionEvent) {
	if a.ticks.Add(1)%clockEvery == 0 {
		a.closeIfDue(a.cfg.now())
	}
	a.record(e.Outcome, e.Hold)
}

// ObserveCompletionAt is ObserveCompletion at a given time (a seam for
// tests and simulations), checking the window on every call. Events
// without a sample (dropped work, gates without timing) still move the
// clock but never the measure.
func (a *Adaptive) ObserveCompletionAt(e admit.CompletionEvent, now time.Time) {
	a.closeIfDue(now)
	a.record(e.Outcome, e.Hold)
}

// closeIfDue judges the window if it is due, before the sample at hand is
// recorded, so that sample counts in the next window.
func (a *Adaptive) closeIfDue(now time.Time) {
	if now.UnixNano() >= a.due.Load() {
		a.tryDecide(now)
	}
}

// record adds a completion's hold time to the window if it is a sample.
// It takes the two fields it needs, not the event: a copy of the event,
// read back right after it was spilled from the registers it came in,
// stalled the sample path for longer than the rest of it took.
func (a *Adaptive) record(o admit.Outcome, hold time.Duration) {
	if sample := (admit.CompletionEvent{Outcome: o, Hold: hold}).Sample(); sample {
		a.cur.Load().add(hold)
	}
}

// tryDecide judges a due window unless another goroutine holds the lock
// (it is judging this very window, or reading State): then the next sample
// tries again, and no completion ever waits behind a decision.
func (a *Adaptive) tryDecide(now time.Time) {
	if !a.mu.TryLock() {
		return
	}
	a.decideDueLocked(now)
	a.mu.Unlock()
}

func (a *Adaptive) decideDueLocked(now time.Time) {
	if a.windowStart.IsZero() {
		a.openWindow(now)
	} else if now.UnixNano() >= a.due.Load() {
		a.decideLocked(now)
	}
}

func (a *Adaptive) openWindow(now time.Time) {
	a.windowStart = now
	a.due.Store(now.Add(a.cfg.window).UnixNano())
}

// Decide closes the current window if it is due (for callers that want
// decisions without completions, for example with a Signal and a ticker).
func (a *Adaptive) Decide() { a.DecideAt(a.cfg.now()) }

// DecideAt is Decide at a given time.
func (a *Adaptive) DecideAt(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decideDueLocked(now)
}

// Run calls Decide every Window until ctx ends. Use it with a Signal when
// completions may stop (a Signal still has something to say then).
func (a *Adaptive) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Decide()
		}
	}
}

func (a *Adaptive) decideLocked(now time.Time) {
	if a.cfg.signal == nil && int(a.cur.Load().n.Load()) < a.cfg.minSamples && now.Sub(a.windowStart) < 10*a.cfg.window {
		return // too few samples to judge: extend the window
	}
	h := a.closeWindow(now)
	samples := int(h.n.Load())
	var lat, tail, mean time.Duration
	if a.cfg.signal != nil {
		var ok bool
		if lat, ok = a.cfg.signal.Latency(now); !ok {
			return
		}
	} else {
		if samples == 0 {
			return
		}
		lat = h.quantile(a.cfg.quantile)
		tail = h.quantile(a.cfg.sloQuantile)
		mean = h.mean()
	}
	inflight := a.peak.Swap(0)
	// The queue's age is the age of the gate's oldest queued request as
	// the window closes (read here, once a window, rather than from every
	// admission). The ramp judges it as it is; the SLO's budget takes no
	// more than the previous window's: one late wake-up of a waiting
	// goroutine (on a busy machine, tens of milliseconds) must not take
	// the hold's budget for a window, and a queue that stands is there in
	// the next window too.
	var age time.Duration
	if a.target != nil {
		inflight = max(inflight, a.target.InUse())
		age = a.target.OldestWait()
	}
	wait := min(age, a.lastWait)
	a.lastWait = age
	a.step(now, Window{Latency: lat, Mean: mean, Samples: samples, Inflight: inflight}, max(tail, lat), wait, age, samples)
}

// closeWindow starts the next window with the other, emptied histogram and
// returns the closed window's.
func (a *Adaptive) closeWindow(now time.Time) *histogram {
	old := a.cur.Load()
	next := &a.hists[0]
	if old == next {
		next = &a.hists[1]
	}
	next.reset()
	a.cur.Store(next)
	a.openWindow(now)
	return old
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// step is one decision: the law, the guardrails, the episode and the
// ramp. wait is the queue's wait counted against the SLO, age the queue's
// age as the window closed.
func (a *Adaptive) step(now time.Time, w Window, tail, wait, age time.Duration, completed int) {
	budget, ceiling := a.cfg.slo, a.cfg.slo
	if budget > 0 && a.cfg.signal == nil {
		// The SLO covers what the caller sees: the queue's wait and the
		// hold. The hold gets what the queue left, at least half; the law
		// aims its measure below that (lawMargin), so that the tail, which
		// the guard holds to the whole budget, has room.
		budget = max(budget-wait, budget/2)
		ceiling = time.Duration(float64(budget) * lawMargin)
	}
	w.Ceiling = ceiling
	// An overload (an episode, and a window no law learns from) is the
	// law's measure above the budget: most requests slow. The tail above
	// it alone is the guard's business: the limit comes down, not the
	// whole recovery machinery.
	w.Overload = budget > 0 && w.Latency > budget
	tailOver := budget > 0 && tail > budget
	old := a.limit
	next := a.law.Next(old, w)
	decision, why := DecisionHold, "steady"
	switch {
	case w.Overload:
		next = math.Min(next, old*a.cfg.backoff)
		why = "above_slo"
	case tailOver:
		next = math.Min(next, old*a.cfg.backoff)
		why = "tail_above_slo"
	}
	if next > old && a.cfg.appLimited > 0 && float64(w.Inflight) < old*a.cfg.appLimited {
		next, why = old, "app_limited"
	}
	next = clamp(next, a.cfg.min, a.cfg.max)
	switch {
	case next > old:
		decision, why = DecisionGrow, "law"
	case next < old:
		decision = DecisionShrink
		if !w.Overload && !tailOver {
			why = "law"
		}
	}

	switch {
	case a.ramp.active && w.Overload:
		// The level that overloaded is not aimed at again: the next ramp
		// climbs to the level below it.
		top := math.Max(a.ramp.floor, a.ramp.levelCapacity(a.ramp.level-1))
		a.ramp.abort(now, "above_slo")
		a.episode, a.episodeTop = true, top
		a.logInfo("limit: ramp aborted, overload again", "latency", w.Latency, "limit", next)
		decision, why = DecisionRampAbort, "above_slo"
		a.limit = next
	case a.ramp.active && tailOver && a.ramp.level > 0:
		// The tail above the budget while the ramp climbs: one level
		// down now, not at the end of the hold. (At the floor there is
		// nothing below, and the first windows after an episode still
		// hold its slow leftovers.)
		a.ramp.back(now, "tail_above_slo")
		a.logInfo("limit: ramp", "decision", DecisionRampBack.String(), "why", "tail_above_slo", "level", a.ramp.level, "steps", a.ramp.steps, "capacity", a.ramp.capacity())
		decision, why = DecisionRampBack, "tail_above_slo"
		a.limit = a.ramp.capacity()
	case a.ramp.active:
		rd, rwhy := a.ramp.window(now, w.Latency, completed, age, a.cfg)
		if rd != DecisionNone {
			decision, why = rd, rwhy
			a.logInfo("limit: ramp", "decision", rd.String(), "why", rwhy, "level", a.ramp.level, "steps", a.ramp.steps, "capacity", a.ramp.capacity())
		} else {
			decision, why = DecisionHold, "ramp_holding"
		}
		a.limit = a.ramp.capacity()
		if !a.ramp.active { // finished
			a.highWater = a.limit
		}
	default:
		a.limit = next
		if !a.episode {
			if w.Overload || (a.cfg.trigger > 0 && next < a.cfg.trigger*a.highWater) {
				a.episode, a.episodeTop = true, a.highWater
				a.logInfo("limit: overload episode", "latency", w.Latency, "limit", next, "before", a.highWater)
			} else {
				// The high-water mark forgets slowly, so a limit that
				// drifted down over minutes is not mistaken for a collapse.
				a.highWater = math.Max(next, 0.99*a.highWater)
			}
		} else if !w.Overload && next >= old {
			a.episode = false
			if a.cfg.steps > 0 && a.episodeTop > next+1 {
				a.ramp.start(now, next, a.episodeTop, w.Latency, a.cfg.steps)
				decision, why = DecisionRampStart, "episode_over"
				a.logInfo("limit: ramp start", "from", next, "to", a.episodeTop, "steps", a.cfg.steps)
				a.limit = a.ramp.capacity()
			} else {
				a.highWater = next
			}
		}
	}

	c := int64(math.Round(a.limit))
	if c != a.capacity && a.target != nil {
		if err := a.target.SetCapacity(c); err != nil && a.cfg.log != nil {
			a.cfg.log.Warn("limit: SetCapacity failed", "gate", a.name, "capacity", c, "err", err)
		}
	}
	a.capacity = c

	st := &a.state
	st.Limit, st.Latency, st.Baseline = c, w.Latency, a.law.Baseline()
	st.Tail, st.Wait, st.Budget = tail, wait, budget
	st.Samples, st.Inflight, st.Overload, st.Episode = w.Samples, w.Inflight, w.Overload, a.episode
	st.Decision, st.Why, st.At = decision, why, now
	st.Windows++
	st.Decisions[decision]++
	st.Ramp = a.ramp.snapshot(a.cfg.steps)
	if a.cfg.log != nil {
		a.cfg.log.Debug("limit: window", "gate", a.name, "law", st.Law, "decision", decision.String(), "why", why,
			"limit", c, "latency", w.Latency, "baseline", st.Baseline, "samples", w.Samples, "inflight", w.Inflight)
	}
}

func (a *Adaptive) logInfo(msg string, args ...any) {
	if a.cfg.log != nil {
		a.cfg.log.Info(msg, append([]any{"gate", a.name}, args...)...)
	}
}

// Limit returns the capacity the Adaptive last set (or would set, before
// Attach).
func (a *Adaptive) Limit() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.capacity
}

// State returns a snapshot of the controller: the limit, the law's inputs,
// the last decision and why, and the ramp.
func (a *Adaptive) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}
