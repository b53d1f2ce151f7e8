package admit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied to zero Config fields.
const (
	DefaultCapacity      = 16
	DefaultMaxWait       = time.Second
	DefaultMaxOvertakes  = 16
	DefaultMaxRetryAfter = 30 * time.Second
)

// MaxCapacity is the largest capacity (and weight) a gate accepts. Slots in
// use share one 64-bit word with the completion count (see doc.go), which
// leaves 20 bits for them.
const MaxCapacity = 1<<usedBits - 1

// MaxKinds bounds the kinds a gate can be told about, so kind labels stay a
// small, fixed set.
const MaxKinds = 64

const (
	usedBits     = 20
	usedMask     = 1<<usedBits - 1
	completedOne = 1 << usedBits // adds one to the completion count
)

// Config configures a Gate. The zero Config is valid: a gate named
// "default" with 16 slots, no wait queue, one kind ("default") and timing on.
type Config struct {
	// Name is the gate's label in errors and metrics ("disk", "upstream").
	// Empty means "default". Letters, digits, '_', '-' and '.', at most 64.
	Name string

	// Capacity is the number of slots. Zero means DefaultCapacity; negative
	// or above MaxCapacity is an error. Change it later with SetCapacity.
	Capacity int64

	// MaxWaiters bounds the FIFO queue that Acquire may wait in. Zero means
	// no queue: Acquire refuses at once when the gate is full, like
	// TryAcquire. Negative is an error.
	MaxWaiters int

	// MaxWait bounds the time one caller spends in the queue before it is
	// refused with ReasonWaitTimeout. Zero means DefaultMaxWait; negative
	// means no gate-imposed limit (only the caller's context ends a wait).
	MaxWait time.Duration

	// MaxOvertakes bounds head-of-line blocking for weighted work: when the
	// oldest waiter does not fit, later waiters that do fit may go first,
	// but only MaxOvertakes times; then the gate holds freed slots back
	// until the oldest fits, so big units cannot starve either. Zero means
	// DefaultMaxOvertakes; negative means strict FIFO.
	MaxOvertakes int

	// Kinds is the bounded set of work kinds this gate counts apart
	// ("read", "stream"). Empty means one kind, "default". Kind 0 is the
	// first; unknown kinds are counted as "other", never as a new label.
	Kinds []string

	// Observer, if not nil, sees every decision and completion.
	Observer Observer

	// NoTiming turns off the two clock reads per permit that measure hold
	// time. HoldTime stays zero, observers see no hold samples and
	// RetryAfter falls back to one second. Time spent queued is still
	// measured (it is on the slow path anyway).
	NoTiming bool

	// MaxRetryAfter caps the suggested RetryAfter. Zero means
	// DefaultMaxRetryAfter; negative is an error.
	MaxRetryAfter time.Duration
}

// Kind is a gate-local handle for a kind of work, from Gate.Kind. The zero
// Kind is the gate's first kind.
type Kind uint16

var labelRE = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// A Gate guards one scarce resource with a fixed (but adjustable) number of
// slots. All methods are safe for concurrent use. See the package
// documentation for the model and the invariants it keeps.
type Gate struct {
	// state is written by every admission and release; it sits alone on
	// its cache line so that the read-mostly fields below stay shared
	// between cores instead of bouncing with it.
	_     [64]byte
	state atomic.Uint64 // low usedBits: slots in use; the rest: completions mod 2^44
	_     [56]byte

	// Read on every admission, written rarely.
	capacity atomic.Int64 // slots; -1 once closed
	nwait    atomic.Int64 // callers in Acquire not yet decided (queued or granted, not taken up)
	peak     atomic.Int64 // most slots ever in use at once
	timed    bool
	bare     bool // !timed && obs == nil: admission is a bare CAS
	obs      Observer
	_        [64]byte

	wraps     atomic.Uint64 // times the completion count wrapped
	extra     atomic.Int64  // sum of (weight-1) over held slots, so permits = used - extra - pending
	pending   atomic.Int64  // granted to a waiter that has not taken the slot up yet
	misuse    atomic.Uint64 // Done called again on a finished permit
	holdNanos atomic.Int64
	waitNanos atomic.Int64
	setCap    atomic.Int64 // last configured capacity, kept when closed

	name          string
	kinds         []string // configured kinds, then "other"
	kindIndex     map[string]Kind
	other         Kind
	maxWaiters    int
	maxWait       time.Duration
	maxOvertakes  int
	maxRetryAfter time.Duration
	epoch         time.Time // monotonic origin for permit timestamps

	perKind []kindCounters

	// mu guards the wait queue and the closed flag. It is never held while
	// calling an Observer or waiting. Lock order: mu is a leaf.
	mu     sync.Mutex
	head   *waiter
	tail   *waiter
	qlen   int
	closed bool
}

// kindCounters are per-kind counts. admitted and completed are kept only
// for kinds other than 0; kind 0's are derived from the gate totals, so a
// single-kind gate pays nothing extra for them.
type kindCounters struct {
	admitted  atomic.Uint64
	completed atomic.Uint64
	nonOK     [numOutcomes]atomic.Uint64 // index OutcomeOK unused: ok = completed - others
	rejected  [numReasons]atomic.Uint64
	waiting   atomic.Int64
	// last refusal per reason, reused while nothing it reports has changed
	lastRejection [numReasons]atomic.Pointer[RejectedError]
}

// New returns a gate configured by cfg, or an error wrapping
// ErrInvalidConfig.
func New(cfg Config) (*Gate, error) {
	g := &Gate{
		name:          cfg.Name,
		maxWaiters:    cfg.MaxWaiters,
		maxWait:       cfg.MaxWait,
		maxOvertakes:  cfg.MaxOvertakes,
		maxRetryAfter: cfg.MaxRetryAfter,
		obs:           cfg.Observer,
		timed:         !cfg.NoTiming,
		epoch:         time.Now(),
	}
	if g.name == "" {
		g.name = "default"
	}
	if !labelRE.MatchString(g.name) {
		return nil, fmt.Errorf("%w: gate name %q: want 1-64 letters, digits, '_', '-' or '.'", ErrInvalidConfig, g.name)
	}
	c := cfg.Capacity
	switch {
	case c == 0:
		c = DefaultCapacity
	case c < 0 || c > MaxCapacity:
		return nil, fmt.Errorf("%w: gate %q: capacity %d outside 1..%d", ErrInvalidConfig, g.name, c, MaxCapacity)
	}
	if g.maxWaiters < 0 {
		return nil, fmt.Errorf("%w: gate %q: negative MaxWaiters %d", ErrInvalidConfig, g.name, g.maxWaiters)
	}
	if g.maxWait == 0 {
		g.maxWait = DefaultMaxWait
	}
	if g.maxOvertakes == 0 {
		g.maxOvertakes = DefaultMaxOvertakes
	}
	switch {
	case g.maxRetryAfter == 0:
		g.maxRetryAfter = DefaultMaxRetryAfter
	case g.maxRetryAfter < 0:
		return nil, fmt.Errorf("%w: gate %q: negative MaxRetryAfter", ErrInvalidConfig, g.name)
	}
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = []string{"default"}
	}
	if len(kinds) > MaxKinds {
		return nil, fmt.Errorf("%w: gate %q: %d kinds, at most %d", ErrInvalidConfig, g.name, len(kinds), MaxKinds)
	}
	g.kindIndex = make(map[string]Kind, len(kinds)+1)
	for i, k := range kinds {
		if !labelRE.MatchString(k) || k == "other" {
			return nil, fmt.Errorf("%w: gate %q: kind %q: want 1-64 letters, digits, '_', '-' or '.', not \"other\"", ErrInvalidConfig, g.name, k)
		}
		if _, dup := g.kindIndex[k]; dup {
			return nil, fmt.Errorf("%w: gate %q: kind %q listed twice", ErrInvalidConfig, g.name, k)
		}
		g.kindIndex[k] = Kind(i)
	}
	g.kinds = append(append(make([]string, 0, len(kinds)+1), kinds...), "other")
	g.other = Kind(len(kinds))
	g.kindIndex["other"] = g.other
	g.perKind = make([]kindCounters, len(g.kinds))
	g.bare = !g.timed && g.obs == nil
	g.capacity.Store(c)
	g.setCap.Store(c)
	return g, nil
}

// Name returns the gate's name.
func (g *Gate) Name() string { return g.name }

// Kind returns the handle for a kind name; names the gate was not told
// about map to "other".
func (g *Gate) Kind(name string) Kind {
	if k, ok := g.kindIndex[name]; ok {
		return k
	}
	return g.other
}

// KindName returns the label of k ("other" for out-of-range handles).
func (g *Gate) KindName(k Kind) string { return g.kinds[g.clampKind(k)] }

// Kinds returns the gate's kind labels, "other" last.
func (g *Gate) Kinds() []string { return append([]string(nil), g.kinds...) }

func (g *Gate) clampKind(k Kind) Kind {
	if int(k) >= len(g.kinds) {
		return g.other
	}
	return k
}

// Capacity returns the current capacity (the configured one if closed).
func (g *Gate) Capacity() int64 { return g.setCap.Load() }

// InUse returns the number of slots held right now.
func (g *Gate) InUse() int64 { return int64(g.state.Load() & usedMask) }

// SetCapacity changes the number of slots. Growing admits queued callers
// at once; shrinking never revokes held permits, it only stops admissions
// until enough of them are done. It returns an error for a capacity outside
// 0..MaxCapacity and does nothing on a closed gate. Zero is allowed: the
// gate then refuses everything new (a drain).
func (g *Gate) SetCapacity(c int64) error {
	if c < 0 || c > MaxCapacity {
		return fmt.Errorf("%w: gate %q: capacity %d outside 0..%d", ErrInvalidConfig, g.name, c, MaxCapacity)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.capacity.Store(c)
	g.setCap.Store(c)
	g.grantLocked()
	return nil
}

// TryAcquire takes one slot for work of kind k if one is free now and
// nobody is queued ahead, else refuses at once with a *RejectedError.
func (g *Gate) TryAcquire(k Kind) (Permit, error) {
	// The common case, a one-slot permit of the first kind on a gate
	// without timing or observer, is small enough to inline.
	if k == 0 && g.bare && g.nwait.Load() == 0 {
		s := g.state.Load()
		if int64(s&usedMask) < g.capacity.Load() && g.state.CompareAndSwap(s, s+1) {
			if used := int64(s&usedMask) + 1; used > g.peak.Load() {
				g.raisePeak(used)
			}
			return Permit{g: g, meta: 1}, nil
		}
	}
	return g.TryAcquireN(k, 1)
}

// TryAcquireN is TryAcquire for work that costs n slots (n < 1 counts as 1).
func (g *Gate) TryAcquireN(k Kind, n int64) (Permit, error) {
	k, n = g.clampKind(k), max(n, 1)
	if g.nwait.Load() == 0 {
		if used, ok := g.take(n); ok {
			return g.admit(k, n, used, 0, false), nil
		}
	}
	return Permit{}, g.refuse(k, n, g.fullReason())
}

// Acquire takes one slot for work of kind k, waiting in the gate's bounded
// FIFO queue if it has one (Config.MaxWaiters). The wait ends with a slot,
// or with a refusal when the queue is full (queue_full), MaxWait passes
// (wait_timeout), ctx ends (deadline or canceled) or the gate closes
// (closed). A slot granted at the moment the caller gives up is handed on
// to the next waiter, never lost.
func (g *Gate) Acquire(ctx context.Context, k Kind) (Permit, error) {
	return g.AcquireN(ctx, k, 1)
}

// AcquireN is Acquire for work that costs n slots (n < 1 counts as 1).
func (g *Gate) AcquireN(ctx context.Context, k Kind, n int64) (Permit, error) {
	k, n = g.clampKind(k), max(n, 1)
	if err := ctx.Err(); err != nil {
		return Permit{}, g.refuse(k, n, ctxReason(err))
	}
	if g.nwait.Load() == 0 {
		if used, ok := g.take(n); ok {
			return g.admit(k, n, used, 0, false), nil
		}
	}
	if g.maxWaiters == 0 {
		return Permit{}, g.refuse(k, n, g.fullReason())
	}
	return g.wait(ctx, k, n)
}

// Close refuses all queued and future acquisitions with ReasonClosed.
// Held permits stay valid and are released as usual. Close is idempotent.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	g.capacity.Store(-1)
	for w := g.head; w != nil; {
		next := w.next
		g.unlink(w)
		w.state = waiterClosed
		w.ready <- struct{}{}
		w = next
	}
}

// Closed reports whether Close has been called.
func (g *Gate) Closed() bool { return g.capacity.Load() < 0 }

// WaitIdle blocks until no slot is held and nobody waits, or ctx ends.
// It is meant for shutdown (Close, then WaitIdle with a deadline), and
// polls rather than adding work to every release.
func (g *Gate) WaitIdle(ctx context.Context) error {
	d := time.Millisecond
	for {
		if g.InUse() == 0 && g.nwait.Load() == 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		d = min(2*d, 50*time.Millisecond)
	}
}

// take adds n slots to the ones in use if they fit in the capacity. It
// returns the slots in use after taking.
func (g *Gate) take(n int64) (int64, bool) {
	for {
		c := g.capacity.Load()
		s := g.state.Load()
		used := int64(s&usedMask) + n
		if used > c {
			return 0, false
		}
		if g.state.CompareAndSwap(s, s+uint64(n)) {
			return used, true
		}
	}
}

func (g *Gate) fullReason() Reason {
	if g.capacity.Load() < 0 {
		return ReasonClosed
	}
	return ReasonFull
}

func ctxReason(err error) Reason {
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonDeadline
	}
	return ReasonCanceled
}

// admit builds the permit for n slots just taken. queued is true for
// slots granted through the queue (their pending mark and extra weight were
// already recorded by the granter).
func (g *Gate) admit(k Kind, n, used int64, wait time.Duration, queued bool) Permit {
	if !queued && n > 1 {
		g.extra.Add(n - 1)
	}
	if k != 0 {
		g.perKind[k].admitted.Add(1)
	}
	if used > g.peak.Load() {
		g.raisePeak(used)
	}
	if g.obs != nil {
		g.observeAdmitted(k, n, wait)
	}
	var start int64
	if g.timed {
		start = int64(time.Since(g.epoch))
	}
	return Permit{g: g, meta: permitMeta(n, k), start: start}
}

// observeAdmitted is out of line to keep the admission path's frame small.
func (g *Gate) observeAdmitted(k Kind, n int64, wait time.Duration) {
	g.obs.ObserveAdmission(AdmissionEvent{
		Gate: g.name, Kind: g.kinds[k], Accepted: true, Weight: n,
		Inflight: g.InUse(), Capacity: g.setCap.Load(), Waiting: g.nwait.Load(), Wait: wait,
	})
}

func (g *Gate) raisePeak(used int64) {
	for {
		p := g.peak.Load()
		if used <= p || g.peak.CompareAndSwap(p, used) {
			return
		}
	}
}

// refuse counts a refusal and returns its error.
func (g *Gate) refuse(k Kind, n int64, r Reason) *RejectedError {
	return g.refuseAfter(k, n, r, 0)
}

func (g *Gate) refuseAfter(k Kind, n int64, r Reason, wait time.Duration) *RejectedError {
	kc := &g.perKind[k]
	kc.rejected[r].Add(1)
	used, c := g.InUse(), g.setCap.Load()
	ra := g.retryAfter(r, c)
	e := kc.lastRejection[r].Load()
	if e == nil || e.Inflight != used || e.Capacity != c || e.RetryAfter != ra {
		e = &RejectedError{Gate: g.name, Kind: g.kinds[k], Reason: r, Inflight: used, Capacity: c, RetryAfter: ra}
		kc.lastRejection[r].Store(e)
	}
	if g.obs != nil {
		g.obs.ObserveAdmission(AdmissionEvent{
			Gate: g.name, Kind: g.kinds[k], Reason: r, Weight: n,
			Inflight: used, Capacity: c, Waiting: g.nwait.Load(), Wait: wait,
		})
	}
	return e
}

// retryAfter estimates when a refused caller might find a free slot: the
// backlog ahead of it times the mean hold time, spread over the slots,
// rounded up to whole seconds and kept within [1s, MaxRetryAfter].
func (g *Gate) retryAfter(r Reason, c int64) time.Duration {
	est := time.Second
	if g.timed && r.Overload() {
		if done := g.completedTotal(); done > 0 {
			meanHold := float64(g.holdNanos.Load()) / float64(done)
			backlog := float64(g.nwait.Load() + 1)
			secs := math.Ceil(meanHold * backlog / float64(max(c, 1)) / float64(time.Second))
			est = time.Duration(max(secs, 1)) * time.Second
		}
	}
	return min(est, g.maxRetryAfter)
}

// completedTotal reads the completion count, including wraps of its
// 44-bit field.
func (g *Gate) completedTotal() uint64 {
	for {
		w := g.wraps.Load()
		s := g.state.Load()
		if g.wraps.Load() == w {
			return w<<(64-usedBits) + s>>usedBits
		}
	}
}

// afterRelease is the slow tail of an inlined release: count a wrap of the
// completion field, wake waiters.
func (g *Gate) afterRelease(s uint64) {
	if s>>usedBits == 0 {
		g.wraps.Add(1)
	}
	if g.nwait.Load() > 0 {
		g.grant()
	}
}

// release returns a permit's slots. Called once per permit, by Done.
func (g *Gate) release(p *Permit, o Outcome) {
	var hold time.Duration
	if g.timed {
		hold = time.Since(g.epoch) - time.Duration(p.start)
		g.holdNanos.Add(int64(hold))
	}
	k := p.kind()
	kc := &g.perKind[k]
	if o != OutcomeOK {
		kc.nonOK[o].Add(1)
	}
	if k != 0 {
		kc.completed.Add(1)
	}
	n := p.weight()
	if n > 1 {
		g.extra.Add(-(n - 1))
	}
	// One add frees the slots and counts the completion.
	if s := g.state.Add(completedOne - uint64(n)); s>>usedBits == 0 {
		g.wraps.Add(1)
	}
	if g.nwait.Load() > 0 {
		g.grant()
	}
	if g.obs != nil {
		g.observeCompleted(k, o, n, hold)
	}
}

// observeCompleted is out of line to keep the release path's frame small.
func (g *Gate) observeCompleted(k Kind, o Outcome, n int64, hold time.Duration) {
	g.obs.ObserveCompletion(CompletionEvent{Gate: g.name, Kind: g.kinds[k], Outcome: o, Weight: n, Hold: hold})
}
