package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("breaker: invalid config")

// State is a breaker's state. The zero State is Closed.
type State uint8

// The three states of a breaker.
const (
	Closed   State = iota // calls pass; outcomes are counted in the rolling window
	Open                  // calls are refused until the open time ends
	HalfOpen              // a bounded number of probe calls pass; the rest are refused
	numStates
)

// NumStates is the size of arrays indexed by State.
const NumStates = int(numStates)

var stateNames = [numStates]string{"closed", "open", "half_open"}

// String returns the state's label: "closed", "open" or "half_open".
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Result is how a call that the breaker let through ended.
type Result uint8

// The results a caller reports with Call.Done.
const (
	// Success: the upstream answered as it should. A success slower than
	// Config.SlowCall still counts as slow.
	Success Result = iota
	// Failure: the upstream failed (an error, a 5xx, a timeout).
	Failure
	// Ignored: the call says nothing about the upstream (the caller gave up,
	// the request was bad). It is not counted; a half-open probe slot it held
	// is handed back.
	Ignored
)

// Config configures a Breaker. The zero Config is a valid default: a 10 s
// window in 10 buckets, at least 20 calls before judging, open at 50 %
// failures, slow calls not judged, 5 s open, 3 probes.
type Config struct {
	// Name labels refusals (RejectedError.Gate), logs and metrics; use the
	// upstream's name. Empty means "breaker".
	Name string
	// Window is the rolling window over which outcomes are counted while
	// closed. 0 means 10 s; negative is an error.
	Window time.Duration
	// Buckets is how many slices the window rolls in. 0 means 10; negative
	// is an error. Outcomes older than the window drop out one bucket at a
	// time.
	Buckets int
	// MinCalls is the fewest calls in the window before a ratio can open
	// the breaker, so two failures out of three calls at night do not. 0
	// means 20; negative is an error.
	MinCalls int
	// FailureRatio opens the breaker when failures/calls in the window
	// reach it. 0 means 0.5; negative disables failure judging; above 1 is
	// an error.
	FailureRatio float64
	// ConsecutiveFailures opens the breaker after this many failures in a
	// row while closed, whatever the window's ratio and MinCalls say: a
	// dependency that is down fails every call, and waiting for a window
	// of them makes each pay its timeout (a shared store such as Redis).
	// A success, slow or not, ends the streak; Ignored results leave it
	// alone. 0 means off; negative is an error.
	ConsecutiveFailures int
	// SlowCall is the duration from Allow to Done at or above which a call
	// counts as slow, whatever its result. 0 or negative means slowness is
	// not judged.
	SlowCall time.Duration
	// SlowCallRatio opens the breaker when slow/calls in the window reach
	// it (only when SlowCall > 0). 0 means 0.8; negative disables; above 1
	// is an error.
	SlowCallRatio float64
	// OpenFor is how long the breaker stays open before letting probes
	// through. 0 means 5 s; negative is an error.
	OpenFor time.Duration
	// Probes is how many calls half-open lets through; all of them must
	// succeed (and not be slow) to close, any failure opens again. 0 means
	// 3; negative is an error.
	Probes int
	// Logger receives one Info event per state change. Nil is silent.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now (which testing/synctest fakes).
	Now func() time.Time
}

// Breaker is a circuit breaker for one upstream. Closed, it counts call
// outcomes in a rolling window and opens when the failure ratio or the slow
// call ratio reaches its threshold over at least MinCalls calls (or, with
// ConsecutiveFailures, after that many failures in a row). Open, it
// refuses every call with a *admit.RejectedError of reason breaker_open
// whose RetryAfter is the open time left. After OpenFor it turns half-open
// and lets Probes calls through: all succeed, it closes; one fails, it
// opens again.
//
// Create one with New; the zero Breaker is not usable. Safe for concurrent
// use. Every call Allow lets through must be ended with Call.Done exactly
// once, or a half-open probe slot stays taken until the next state change.
type Breaker struct {
	name                    string
	window, width, openFor  time.Duration
	slowCall                time.Duration
	minCalls, probes        int
	consecutive             int // ConsecutiveFailures; 0: off
	failureRatio, slowRatio float64
	log                     *slog.Logger
	now                     func() time.Time

	mu          sync.Mutex // guards everything below
	state       State
	gen         uint64 // bumped on every state change; stale Done calls are dropped
	openUntil   time.Time
	buckets     []bucket
	cur         int       // index of the bucket now being filled
	bucketStart time.Time // when buckets[cur] began
	sum         bucket    // sum over buckets
	probesOut   int       // probes admitted (and not Ignored) in this half-open period
	probesOK    int       // of which succeeded
	streak      int       // failures in a row while closed
	stats       Stats
}

type bucket struct{ calls, failures, slow int }

func (b *bucket) add(o bucket) {
	b.calls += o.calls
	b.failures += o.failures
	b.slow += o.slow
}

func (b *bucket) sub(o bucket) {
	b.calls -= o.calls
	b.failures -= o.failures
	b.slow -= o.slow
}

// New returns a closed Breaker, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Breaker, error) {
	bad := func(field string, v any) (*Breaker, error) {
		return nil, fmt.Errorf("%w: %s %v", ErrInvalidConfig, field, v)
	}
	switch {
	case cfg.Window < 0:
		return bad("Window", cfg.Window)
	case cfg.Buckets < 0:
		return bad("Buckets", cfg.Buckets)
	case cfg.MinCalls < 0:
		return bad("MinCalls", cfg.MinCalls)
	case cfg.ConsecutiveFailures < 0:
		return bad("ConsecutiveFailures", cfg.ConsecutiveFailures)
	case cfg.FailureRatio > 1 || cfg.FailureRatio != cfg.FailureRatio:
		return bad("FailureRatio", cfg.FailureRatio)
	case cfg.SlowCallRatio > 1 || cfg.SlowCallRatio != cfg.SlowCallRatio:
		return bad("SlowCallRatio", cfg.SlowCallRatio)
	case cfg.OpenFor < 0:
		return bad("OpenFor", cfg.OpenFor)
	case cfg.Probes < 0:
		return bad("Probes", cfg.Probes)
	}
	b := &Breaker{
		name:         cmp(cfg.Name, "breaker"),
		window:       cmp(cfg.Window, 10*time.Second),
		slowCall:     cfg.SlowCall,
		minCalls:     cmp(cfg.MinCalls, 20),
		consecutive:  cfg.ConsecutiveFailures,
		probes:       cmp(cfg.Probes, 3),
		failureRatio: cmp(cfg.FailureRatio, 0.5),
		slowRatio:    cmp(cfg.SlowCallRatio, 0.8),
		openFor:      cmp(cfg.OpenFor, 5*time.Second),
		log:          cfg.Logger,
		now:          cfg.Now,
	}
	if b.now == nil {
		b.now = time.Now
	}
	n := cmp(cfg.Buckets, 10)
	b.buckets = make([]bucket, n)
	b.width = max(b.window/time.Duration(n), 1)
	b.bucketStart = b.now()
	return b, nil
}

// cmp returns v, or def when v is the zero value.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// Call is a call the breaker let through. End it with Done exactly once.
// The zero Call's Done does nothing.
type Call struct {
	b     *Breaker
	gen   uint64
	start time.Time
}

// Allow asks whether a call may go to the upstream now. It returns a Call
// to end with Done, or a *admit.RejectedError with Reason
// admit.ReasonBreakerOpen and Gate = the breaker's name. While open its
// RetryAfter is the open time left, exact (not rounded to seconds;
// RetryAfterSeconds rounds up for HTTP); while half-open with every probe
// slot taken it is the shorter of OpenFor and one second. IsOpen tells a
// breaker's refusal from other errors.
func (b *Breaker) Allow() (Call, error) { return b.AllowAt(b.now()) }

// AllowAt is Allow at time now instead of the breaker's clock, for
// callers that have just read the clock (a time.Now costs up to 100 ns on
// some virtual machines). now must not go backwards.
func (b *Breaker) AllowAt(now time.Time) (Call, error) {
	b.mu.Lock()
	var ev *transition
	if b.state == Open && !now.Before(b.openUntil) {
		ev = b.setState(HalfOpen, now)
	}
	var err error
	switch b.state {
	case Open:
		err = b.refusal(b.openUntil.Sub(now))
	case HalfOpen:
		if b.probesOut >= b.probes {
			err = b.refusal(min(b.openFor, time.Second))
		} else {
			b.probesOut++
		}
	}
	if err != nil {
		b.stats.Rejected++
	} else {
		b.stats.Allowed++
	}
	c := Call{b: b, gen: b.gen, start: now}
	b.mu.Unlock()
	b.logTransition(ev)
	if err != nil {
		return Call{}, err
	}
	return c, nil
}

// refusal builds the breaker's refusal: the admit refusal itself, so HTTP
// and gRPC edges map it like any gate's refusal.
func (b *Breaker) refusal(retryAfter time.Duration) error {
	return admit.NewRejectedError(b.name, "", admit.ReasonBreakerOpen, 0, 0, max(retryAfter, time.Millisecond))
}

// IsOpen reports whether err is (or wraps) a breaker's refusal.
func IsOpen(err error) bool {
	var re *admit.RejectedError
	return errors.As(err, &re) && re.Reason() == admit.ReasonBreakerOpen
}

// Done records the call's result. Calls begun before the last state change
// are not counted. Done on the zero Call does nothing.
func (c Call) Done(r Result) {
	if c.b != nil {
		c.DoneAt(r, c.b.now())
	}
}

// DoneAt is Done at time now instead of the breaker's clock.
func (c Call) DoneAt(r Result, now time.Time) {
	b := c.b
	if b == nil {
		return
	}
	b.mu.Lock()
	var ev *transition
	if c.gen == b.gen {
		ev = b.record(r, now.Sub(c.start) >= b.slowCall && b.slowCall > 0, now)
	}
	b.mu.Unlock()
	b.logTransition(ev)
}

// LateFailure records that a call already ended with Success failed after
// all, as a caller learns when an answer whose headers were good then
// stalls or is cut short in its body. Closed, one success of the window
// becomes a failure (the call is not counted twice) and the ratio is
// judged again; half-open, it fails like a probe and opens the breaker;
// open, there is nothing to change.
func (b *Breaker) LateFailure() { b.LateFailureAt(b.now()) }

// LateFailureAt is LateFailure at time now instead of the breaker's clock.
func (b *Breaker) LateFailureAt(now time.Time) {
	b.mu.Lock()
	var ev *transition
	switch b.state {
	case Closed:
		b.roll(now)
		b.buckets[b.cur].add(bucket{failures: 1})
		b.sum.add(bucket{failures: 1})
		if b.sum.calls >= b.minCalls && b.failureRatio > 0 && float64(b.sum.failures)/float64(b.sum.calls) >= b.failureRatio {
			ev = b.setState(Open, now)
		}
	case HalfOpen:
		ev = b.setState(Open, now)
	}
	b.mu.Unlock()
	b.logTransition(ev)
}

// record counts one result. Callers hold mu.
func (b *Breaker) record(r Result, slow bool, now time.Time) *transition {
	switch b.state {
	case Closed:
		if r == Ignored {
			return nil
		}
		b.roll(now)
		o := bucket{calls: 1}
		if r == Failure {
			o.failures = 1
			b.streak++
		} else {
			b.streak = 0
		}
		if slow {
			o.slow = 1
		}
		b.buckets[b.cur].add(o)
		b.sum.add(o)
		if b.consecutive > 0 && b.streak >= b.consecutive {
			return b.setState(Open, now)
		}
		if b.sum.calls < b.minCalls {
			return nil
		}
		calls := float64(b.sum.calls)
		if (b.failureRatio > 0 && float64(b.sum.failures)/calls >= b.failureRatio) ||
			(b.slowCall > 0 && b.slowRatio > 0 && float64(b.sum.slow)/calls >= b.slowRatio) {
			return b.setState(Open, now)
		}
	case HalfOpen:
		switch {
		case r == Ignored:
			b.probesOut--
		case r == Failure || slow:
			return b.setState(Open, now)
		default:
			b.probesOK++
			if b.probesOK >= b.probes {
				return b.setState(Closed, now)
			}
		}
	}
	return nil
}

// roll moves the window forward to now, dropping buckets that fell out.
// Callers hold mu.
func (b *Breaker) roll(now time.Time) {
	steps := int64(now.Sub(b.bucketStart) / b.width)
	if steps <= 0 {
		return
	}
	if steps >= int64(len(b.buckets)) {
		clear(b.buckets)
		b.sum = bucket{}
		b.bucketStart = b.bucketStart.Add(time.Duration(steps) * b.width)
		return
	}
	for range steps {
		b.cur = (b.cur + 1) % len(b.buckets)
		b.sum.sub(b.buckets[b.cur])
		b.buckets[b.cur] = bucket{}
	}
	b.bucketStart = b.bucketStart.Add(time.Duration(steps) * b.width)
}

type transition struct {
	from, to State
	window   bucket
	openFor  time.Duration
}

// setState moves to a new state and starts a new generation. Callers hold mu.
func (b *Breaker) setState(to State, now time.Time) *transition {
	ev := &transition{from: b.state, to: to, window: b.sum}
	b.stats.Transitions[b.state][to]++
	b.state = to
	b.gen++
	b.probesOut, b.probesOK, b.streak = 0, 0, 0
	switch to {
	case Open:
		b.openUntil = now.Add(b.openFor)
		ev.openFor = b.openFor
	case Closed:
		clear(b.buckets)
		b.sum = bucket{}
		b.cur = 0
		b.bucketStart = now
	}
	return ev
}

func (b *Breaker) logTransition(ev *transition) {
	if ev == nil || b.log == nil {
		return
	}
	b.log.LogAttrs(context.Background(), slog.LevelInfo, "breaker state change",
		slog.String("breaker", b.name),
		slog.String("from", ev.from.String()),
		slog.String("to", ev.to.String()),
		slog.Int("window_calls", ev.window.calls),
		slog.Int("window_failures", ev.window.failures),
		slog.Int("window_slow", ev.window.slow),
		slog.Duration("open_for", ev.openFor))
}

// State returns the breaker's state now (an open breaker whose time is up
// reports HalfOpen).
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && !b.now().Before(b.openUntil) {
		return HalfOpen
	}
	return b.state
}

// Stats is a snapshot of a breaker's counters since New.
type Stats struct {
	State State
	// Allowed counts calls let through (probes included); Rejected counts
	// refusals.
	Allowed, Rejected uint64
	// Transitions[from][to] counts state changes.
	Transitions [NumStates][NumStates]uint64
	// WindowCalls, WindowFailures and WindowSlow are the closed-state
	// window's sums at the last recorded result.
	WindowCalls, WindowFailures, WindowSlow int
}

// Stats returns a snapshot of the breaker's counters.
func (b *Breaker) Stats() Stats {
	st := b.State()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.State = st
	s.WindowCalls, s.WindowFailures, s.WindowSlow = b.sum.calls, b.sum.failures, b.sum.slow
	return s
}
