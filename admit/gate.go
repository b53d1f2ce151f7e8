package admit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
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
	DefaultSampleEvery   = 8
)

// MaxCapacity is the largest capacity (and weight) a gate accepts.
const MaxCapacity = 1<<20 - 1

// MaxKinds bounds the kinds a gate can be told about, so kind labels stay a
// small, fixed set.
const MaxKinds = 64

// The state word, from the low bits up:
//
//	bits  0-20  slots in use (one bit wider than MaxCapacity needs)
//	bit   21    someone is queued (set and cleared under Gate.mu)
//	bits 22-52  completions with outcome ok of fast permits, mod 2^31
//	bits 53-63  generation: bumped by SetCapacity and Close
//
// An admission is one CAS on this word, so the slots, the queue flag and
// the capacity (through its generation) it decided on are still what they
// were when the CAS lands: no admission can slip in after a Close or a
// shrink returned, or ahead of a waiter that queued first. The fast
// completions move to Gate.folded long before their field could overflow.
const (
	usedBits    = 21
	usedMask    = 1<<usedBits - 1
	queuedBit   = 1 << usedBits
	doneShift   = usedBits + 1
	doneBits    = 31
	doneMask    = 1<<doneBits - 1
	doneOne     = 1 << doneShift
	genOne      = 1 << (doneShift + doneBits)
	defaultFold = 1 << (doneBits - 2) // fast completions kept in the word before they move to Gate.folded
)

func doneField(s uint64) uint64 { return s >> doneShift & doneMask }

// Config configures a Gate. The zero Config is valid: a gate named
// "default" with 16 slots, no wait queue, one kind ("default"), and hold
// time measured on one permit in eight.
//
// What zero and negative mean, field by field:
//
//	field          zero                                  negative
//	Name           "default"                             -
//	Capacity       DefaultCapacity (16)                  error
//	MaxWaiters     no queue: Acquire refuses when full   error
//	MaxWait        DefaultMaxWait (1s) if there is a     no gate-imposed limit (only ctx ends
//	               queue; must be zero without a queue   a wait); an error without a queue
//	MaxOvertakes   DefaultMaxOvertakes (16)              strict FIFO
//	Kinds          one kind, "default"                   -
//	SampleEvery    every permit with an Observer, else   error
//	               DefaultSampleEvery (8)
//	MaxRetryAfter  DefaultMaxRetryAfter (30s)            error
//	Queueing       FIFO, no class shares                 see Queueing's fields:
//	 .Discipline   DisciplineFIFO                        -
//	 .CoDelTarget  DefaultCoDelTarget (5ms)              error
//	 .CoDelInterval DefaultCoDelInterval (100ms)         error
//	 .ClassShares  no guaranteed shares                  error
//	 .ClassAging   MaxWait/2 (500ms without a MaxWait)   queued age never counts
//	NoDeadlineCheck deadline-aware admission on          -
type Config struct {
	// Name is the gate's label in errors and metrics ("disk", "upstream").
	// Empty means "default". Letters, digits, '_', '-' and '.', at most 64.
	Name string

	// Capacity is the number of slots. Zero means DefaultCapacity; negative
	// or above MaxCapacity is an error. Change it later with SetCapacity.
	Capacity int64

	// MaxWaiters bounds the queue that Acquire may wait in. Zero means no
	// queue: Acquire refuses at once when the gate is full, like
	// TryAcquire. Negative is an error.
	MaxWaiters int

	// MaxWait bounds the time one caller spends in the queue before it is
	// refused with ReasonWaitTimeout. With a queue, zero means
	// DefaultMaxWait and negative means no gate-imposed limit (only the
	// caller's context ends a wait). Without a queue (MaxWaiters zero) it
	// must be zero: a MaxWait with nowhere to wait is a mistake New reports
	// rather than ignores.
	MaxWait time.Duration

	// MaxOvertakes bounds head-of-line blocking for weighted work: when the
	// oldest waiter does not fit, later waiters that do fit may go first,
	// but only MaxOvertakes times; then the gate holds freed slots back
	// until the oldest fits, so big units cannot starve either. Zero means
	// DefaultMaxOvertakes; negative means strict FIFO.
	MaxOvertakes int

	// Kinds is the bounded set of work kinds this gate counts apart
	// ("read", "stream"). Empty means one kind, "default". The first kind
	// is the one TryAcquire and Acquire use.
	Kinds []string

	// Observer, if not nil, sees every decision and completion.
	Observer Observer

	// NoTiming turns off hold-time measurement: Stats.HoldTime stays zero,
	// observers see no hold samples and RetryAfter falls back to one
	// second. Time spent queued is still measured (it is on the slow path
	// anyway).
	NoTiming bool

	// SampleEvery is how many permits share one hold-time measurement (two
	// clock reads): 1 times every permit. It is rounded up to a power of
	// two. Zero means every permit when the gate has an Observer (adaptive
	// limits and histograms want every sample) and DefaultSampleEvery
	// otherwise. Negative is an error. Sampling keeps the mean hold time,
	// and so RetryAfter, unbiased; what it loses is detail: HoldTime sums
	// only the sampled permits (see Stats.HoldSamples).
	SampleEvery int

	// MaxRetryAfter caps the suggested RetryAfter. Zero means
	// DefaultMaxRetryAfter; negative is an error.
	MaxRetryAfter time.Duration

	// Queueing is how the queue orders and sheds its waiters: the
	// discipline, CoDel's tuning, priority-class shares and aging, and
	// where a class comes from. The zero value is FIFO with no shares.
	// SetQueueing changes it on a running gate.
	Queueing

	// NoDeadlineCheck turns off deadline-aware admission: by default, when
	// the gate measures hold times, AcquireFor refuses at once (ReasonDeadline)
	// a caller whose context deadline is nearer than its expected wait
	// plus the recent hold time, since its work could not finish in time.
	NoDeadlineCheck bool
}

// Kind is a gate-local handle for a kind of work, from Gate.Kind or
// Gate.LookupKind. The zero Kind is the gate's first kind.
type Kind uint16

// Request describes one acquisition for TryAcquireFor and AcquireFor. The
// zero Request is one slot of the gate's first kind.
type Request struct {
	// Kind is the kind of work, for counting apart. Zero is the first kind.
	Kind Kind
	// Weight is the number of slots the work costs. Zero means 1. Negative
	// or above MaxCapacity is an invalid request; above the gate's capacity
	// is refused at once (ReasonFull), since it could never fit.
	Weight int64
	// Class is the work's criticality. Zero is ClassCritical, the default;
	// a value outside the defined classes is an invalid request.
	Class Class
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// A Gate guards one scarce resource with an adjustable number of slots.
// All methods are safe for concurrent use. See the package documentation
// for the model and the invariants it keeps.
type Gate struct {
	// state is written by every admission and release: the slots in use,
	// and the completions with outcome ok of fast permits (one slot, the
	// first kind, admitted without queueing). It sits alone on its cache
	// line so the read-mostly fields below stay shared between cores.
	_     [64]byte
	state atomic.Uint64
	_     [56]byte

	// Read on every admission, written rarely.
	capacity   atomic.Int64 // slots; -1 once closed
	queued     atomic.Int64 // callers in the queue, plus one deciding under mu whether to queue
	fastLimit  atomic.Int64 // min(capacity, peak) on bare gates, else -1: see TryAcquire
	timed      bool
	bare       bool   // !timed && obs == nil: a fast admission is the CAS alone
	sampleMask uint32 // a permit is timed when rand&sampleMask == 0
	obs        Observer
	grantObs   GrantObserver // obs, when it takes grants as ObserveGrant
	// capSeq is bumped by SetCapacity and Close before and after they
	// change the capacity (odd while one is under way), so a refusal can
	// tell it looked at a capacity that was still changing.
	capSeq atomic.Uint64
	_      [64]byte

	// acct makes the multi-counter steps of the slow paths atomic with
	// respect to Stats, which takes it exclusively: every change to the
	// counts is either one atomic operation or a group done under
	// acct.RLock, so a snapshot never sees half a step. Lock order: mu,
	// then acct; acct is a leaf.
	acct       sync.RWMutex
	folded     atomic.Uint64 // fast completions moved out of the state word
	slowUsed   atomic.Int64  // slots held by permits that are not fast, and grants not yet taken up
	fastFailed atomic.Uint64 // fast permits that ended with an outcome other than ok

	limitMu     sync.Mutex    // serialises fastLimit updates, so the last one saw the latest capacity and peak
	peak        atomic.Int64  // most slots ever in use at once
	misuse      atomic.Uint64 // Done called again on a finished permit
	holdNanos   atomic.Uint64 // summed hold time of sampled permits, ns, saturating at maxHoldNanos
	holdSamples atomic.Uint64
	holdEWMA    atomic.Int64 // recent hold time of sampled, non-dropped permits, ns
	waitSeconds atomicFloat  // summed time callers spent queued
	setCap      atomic.Int64 // last configured capacity, kept when closed

	name          string
	kinds         []string
	kindIndex     map[string]Kind
	maxWaiters    int
	maxWait       time.Duration
	maxOvertakes  int
	maxRetryAfter time.Duration
	epoch         time.Time // monotonic origin for permit timestamps
	foldAt        uint64

	perKind []kindCounters
	// perClass counts the classes other than the default one; the default
	// class's counts are the gate's totals minus these.
	perClass [numClasses]classCounters

	discipline    Discipline // guarded by mu; disciplineNow is its lock-free copy
	disciplineNow atomic.Uint32
	contextClass  atomic.Bool
	codelTarget   time.Duration
	codelInterval time.Duration
	shares        ClassShares
	hasShares     bool
	aging         time.Duration // <0: never
	deadlineCheck bool
	oldest        atomic.Int64 // enqueue time of the oldest waiter, ns since epoch + 1; 0 when none

	// mu guards the wait queue and the closed flag. It is never held while
	// calling an Observer or waiting.
	mu     sync.Mutex
	head   *waiter
	tail   *waiter
	qlen   int
	closed bool
	// guarded by mu as well:
	classQueued int             // queued waiters of a class other than the default
	classQ      [numClasses]int // queued waiters per class other than the default
	queueSince  int64           // when the queue last went from empty to not empty, ns since epoch
	seq         uint64          // arrival number of the last queued waiter
	round       uint64          // grant passes, to mark waiters visited in one
}

// classCounters are the counts of one class other than the default.
type classCounters struct {
	admitted atomic.Uint64
	rejected [numReasons]atomic.Uint64
	waiting  atomic.Int64
	used     atomic.Int64 // slots held, granted waiters included
}

// kindCounters are the counts of one kind, except those of fast permits,
// which the state word holds. Offered is not counted: it is admitted +
// rejected + waiting, read together.
type kindCounters struct {
	admitted  atomic.Uint64
	completed [numOutcomes]atomic.Uint64
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
		foldAt:        defaultFold,
	}
	if isNil(g.obs) {
		g.obs = nil // a typed nil (*promsluice.Metrics)(nil) observes nothing
	}
	g.grantObs, _ = g.obs.(GrantObserver)
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
	switch {
	case g.maxWaiters < 0:
		return nil, fmt.Errorf("%w: gate %q: negative MaxWaiters %d", ErrInvalidConfig, g.name, g.maxWaiters)
	case g.maxWaiters == 0 && g.maxWait != 0:
		return nil, fmt.Errorf("%w: gate %q: MaxWait %v without a queue (MaxWaiters is 0): set MaxWaiters to let callers wait", ErrInvalidConfig, g.name, g.maxWait)
	case g.maxWait == 0:
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
	every := cfg.SampleEvery
	switch {
	case every < 0:
		return nil, fmt.Errorf("%w: gate %q: negative SampleEvery %d", ErrInvalidConfig, g.name, every)
	case every == 0 && g.obs != nil:
		every = 1
	case every == 0:
		every = DefaultSampleEvery
	case every > 1<<30:
		every = 1 << 30
	}
	mask := uint32(1)
	for int(mask) < every {
		mask <<= 1
	}
	g.sampleMask = mask - 1
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = []string{"default"}
	}
	if len(kinds) > MaxKinds {
		return nil, fmt.Errorf("%w: gate %q: %d kinds, at most %d", ErrInvalidConfig, g.name, len(kinds), MaxKinds)
	}
	g.kindIndex = make(map[string]Kind, len(kinds))
	for i, k := range kinds {
		if !labelRE.MatchString(k) {
			return nil, fmt.Errorf("%w: gate %q: kind %q: want 1-64 letters, digits, '_', '-' or '.'", ErrInvalidConfig, g.name, k)
		}
		if _, dup := g.kindIndex[k]; dup {
			return nil, fmt.Errorf("%w: gate %q: kind %q listed twice", ErrInvalidConfig, g.name, k)
		}
		g.kindIndex[k] = Kind(i)
	}
	g.kinds = append([]string(nil), kinds...)
	g.perKind = make([]kindCounters, len(g.kinds))
	if err := g.configureQueue(cfg); err != nil {
		return nil, err
	}
	g.bare = !g.timed && g.obs == nil
	g.capacity.Store(c)
	g.setCap.Store(c)
	g.updateFastLimit()
	return g, nil
}

func isNil(o Observer) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// Name returns the gate's name.
func (g *Gate) Name() string { return g.name }

// Kind returns the handle for a kind name the gate was configured with. It
// panics for any other name: kind names are written in code, and a typo
// should fail the first test that runs it, not be counted under the wrong
// label for months. Use LookupKind for names that come from input.
func (g *Gate) Kind(name string) Kind {
	k, ok := g.kindIndex[name]
	if !ok {
		panic(fmt.Sprintf("admit: gate %q has no kind %q (it has %q)", g.name, name, g.kinds))
	}
	return k
}

// LookupKind returns the handle for a kind name, and false if the gate
// has no such kind.
func (g *Gate) LookupKind(name string) (Kind, bool) {
	k, ok := g.kindIndex[name]
	return k, ok
}

// KindName returns the label of k, or "" for a handle the gate does not have.
func (g *Gate) KindName(k Kind) string {
	if int(k) < len(g.kinds) {
		return g.kinds[k]
	}
	return ""
}

// Kinds returns the gate's kind labels, in configuration order.
func (g *Gate) Kinds() []string { return append([]string(nil), g.kinds...) }

// Capacity returns the current capacity (the configured one if closed).
func (g *Gate) Capacity() int64 { return g.setCap.Load() }

// InUse returns the number of slots held right now (including slots
// granted to a queued caller that has not woken up yet).
func (g *Gate) InUse() int64 { return int64(g.state.Load() & usedMask) }

// Queued returns the number of callers waiting in the queue.
func (g *Gate) Queued() int64 { return g.queued.Load() }

// SetCapacity changes the number of slots. Growing admits queued callers
// at once. Shrinking never revokes held permits; it stops admissions until
// enough of them are done, and refuses at once (ReasonFull) the queued
// callers whose weight no longer fits at all. It returns an error for a
// capacity outside 0..MaxCapacity and does nothing on a closed gate. Zero
// is allowed: the gate then refuses everything new (a drain).
func (g *Gate) SetCapacity(c int64) error {
	if c < 0 || c > MaxCapacity {
		return fmt.Errorf("%w: gate %q: capacity %d outside 0..%d", ErrInvalidConfig, g.name, c, MaxCapacity)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.capSeq.Add(1)
	g.capacity.Store(c)
	g.setCap.Store(c)
	g.updateFastLimit()
	g.state.Add(genOne) // admissions decided on the old capacity must retry
	g.capSeq.Add(1)
	for w := g.head; w != nil; {
		next := w.next
		if w.n > c {
			g.unlink(w)
			w.state = waiterTooBig
			w.ready <- struct{}{}
		}
		w = next
	}
	g.grantLocked()
	return nil
}

// TryAcquire takes one slot for work of the gate's first kind if one is
// free and nobody is queued ahead, else refuses at once with a
// *RejectedError (ReasonFull, or ReasonClosed after Close).
func (g *Gate) TryAcquire() (Permit, error) {
	// The common case is small enough to inline: one CAS admits a fast
	// permit and nothing else is counted (the state word implies the offer
	// and the admission). fastLimit is below both the capacity and the
	// peak (so the peak needs no update), and -1 on gates that time
	// permits or have an observer; anything else goes out of line.
	if s := g.state.Load(); s&queuedBit == 0 && int64(s&usedMask) < g.fastLimit.Load() && g.state.CompareAndSwap(s, s+1) {
		return Permit{ref: gateRef{g}, meta: metaFast | metaPlain | 1}, nil
	}
	return g.tryAcquire()
}

// tryAcquire is TryAcquire out of line.
func (g *Gate) tryAcquire() (Permit, error) {
	if s := g.state.Load(); s&queuedBit == 0 && int64(s&usedMask) < g.capacity.Load() && g.state.CompareAndSwap(s, s+1) {
		if used := int64(s&usedMask) + 1; used > g.peak.Load() {
			g.raisePeak(used)
		}
		return g.admitted(0, 1, 0, metaFast, 0, 0), nil
	}
	return g.TryAcquireFor(Request{})
}

// TryAcquireFor is TryAcquire for a kind and weight other than the default.
// An invalid request (see Request) returns an error wrapping
// ErrInvalidRequest and touches nothing.
func (g *Gate) TryAcquireFor(r Request) (Permit, error) {
	k, n, cl, err := g.check(r)
	if err != nil {
		return Permit{}, err
	}
	flags, reason := g.decideNow(k, n, cl)
	if reason != ReasonNone {
		return Permit{}, g.rejection(k, n, reason, 0)
	}
	return g.admitted(k, n, cl, flags, 0, 0), nil
}

// Acquire takes one slot for work of the gate's first kind, waiting in
// the gate's bounded queue if it has one (Config.MaxWaiters). The wait
// ends with a slot, or with a refusal when the queue is full (queue_full),
// MaxWait passes (wait_timeout), ctx ends (deadline or canceled: the error
// then also matches ctx's error with errors.Is), the capacity shrinks
// below the work's weight (full) or the gate closes (closed). A slot
// granted at the moment the caller gives up is handed on to the next
// waiter, never lost.
func (g *Gate) Acquire(ctx context.Context) (Permit, error) {
	return g.AcquireFor(ctx, Request{})
}

// AcquireFor is Acquire for a kind and weight other than the default. An
// invalid request (see Request) returns an error wrapping
// ErrInvalidRequest and touches nothing.
func (g *Gate) AcquireFor(ctx context.Context, r Request) (Permit, error) {
	k, n, cl, err := g.check(r)
	if err != nil {
		return Permit{}, err
	}
	if cl == 0 && g.contextClass.Load() {
		cl = ClassFrom(ctx)
	}
	if err := ctx.Err(); err != nil {
		return Permit{}, g.refuse(k, n, cl, ctxReason(err))
	}
	var at int64 // the clock as the deadline check read it, for the permit's start: one read, not two
	if g.deadlineCheck {
		if dl, ok := ctx.Deadline(); ok {
			var late bool
			if late, at = g.tooLate(dl, n); late {
				return Permit{}, g.refuse(k, n, cl, ReasonDeadline)
			}
		}
	}
	if g.maxWaiters == 0 {
		flags, reason := g.decideNow(k, n, cl)
		if reason != ReasonNone {
			return Permit{}, g.rejection(k, n, reason, 0)
		}
		return g.admitted(k, n, cl, flags, 0, at), nil
	}
	if flags, ok := g.tryTake(k, n, cl, false); ok {
		return g.admitted(k, n, cl, flags, 0, at), nil
	}
	return g.wait(ctx, k, n, cl)
}

// check validates a request before anything is touched.
func (g *Gate) check(r Request) (Kind, int64, Class, error) {
	n := r.Weight
	if n == 0 {
		n = 1
	}
	if n < 1 || n > MaxCapacity {
		return 0, 0, 0, fmt.Errorf("%w: gate %q: weight %d outside 1..%d", ErrInvalidRequest, g.name, r.Weight, MaxCapacity)
	}
	if int(r.Kind) >= len(g.kinds) {
		return 0, 0, 0, fmt.Errorf("%w: gate %q: no kind %d (it has %d kinds)", ErrInvalidRequest, g.name, r.Kind, len(g.kinds))
	}
	if r.Class >= numClasses {
		return 0, 0, 0, fmt.Errorf("%w: gate %q: no class %d", ErrInvalidRequest, g.name, r.Class)
	}
	return r.Kind, n, r.Class, nil
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
	g.capSeq.Add(1)
	g.capacity.Store(-1)
	g.updateFastLimit()
	g.state.Add(genOne)
	g.capSeq.Add(1)
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
		if g.InUse() == 0 && g.waiting() == 0 {
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

func (g *Gate) waiting() int64 {
	var n int64
	for i := range g.perKind {
		n += g.perKind[i].waiting.Load()
	}
	return n
}

// take adds n slots to the ones in use if they fit in the capacity, and,
// unless queued callers are allowed (the queue itself granting, or a
// caller that has just announced itself), only if nobody is queued. It
// returns the slots in use after taking. The word is read before the
// capacity: a SetCapacity after the read bumps the generation, so the CAS
// fails and the next round sees the new capacity.
func (g *Gate) take(n int64, pastQueue bool) (int64, bool) {
	for {
		s := g.state.Load()
		if s&queuedBit != 0 && !pastQueue {
			return 0, false
		}
		c := g.capacity.Load()
		used := int64(s&usedMask) + n
		if used > c {
			return 0, false
		}
		if g.state.CompareAndSwap(s, s+uint64(n)) {
			return used, true
		}
	}
}

// tryTake takes and counts k,n without queueing if the slots are free,
// and returns the permit flags to build it with. A fast permit (first
// kind, one slot, default class) is one CAS; any other is counted under
// acct.
func (g *Gate) tryTake(k Kind, n int64, cl Class, pastQueue bool) (uint64, bool) {
	var used int64
	var ok bool
	flags := uint64(0)
	if k == 0 && n == 1 && cl == 0 {
		used, ok = g.take(1, pastQueue)
		flags = metaFast
	} else {
		g.acct.RLock()
		if used, ok = g.take(n, pastQueue); ok {
			g.slowUsed.Add(n)
			g.perKind[k].admitted.Add(1)
			g.countClassAdmitted(cl, n)
		}
		g.acct.RUnlock()
	}
	if ok && used > g.peak.Load() {
		g.raisePeak(used)
	}
	return flags, ok
}

// decideNow decides a request that may not wait: it takes the slots if
// they are free and nobody is queued ahead, else it counts a rejection. The
// look at the slots and the count are one step as Stats sees it, so no
// snapshot can show the slots free and the rejection not yet counted.
func (g *Gate) decideNow(k Kind, n int64, cl Class) (flags uint64, r Reason) {
	fast := k == 0 && n == 1 && cl == 0
	if fast {
		if used, ok := g.take(1, false); ok {
			if used > g.peak.Load() {
				g.raisePeak(used)
			}
			return metaFast, ReasonNone
		}
	}
	for {
		seq := g.capSeq.Load()
		g.acct.RLock()
		if used, ok := g.take(n, false); ok {
			if fast {
				flags = metaFast
			} else {
				g.slowUsed.Add(n)
				g.perKind[k].admitted.Add(1)
				g.countClassAdmitted(cl, n)
			}
			g.acct.RUnlock()
			if used > g.peak.Load() {
				g.raisePeak(used)
			}
			return flags, ReasonNone
		}
		if seq&1 == 0 && g.capSeq.Load() == seq {
			break
		}
		// The capacity was changing while we looked. Its new value is
		// stored before the generation moves, and TryAcquire's fast path
		// admits on the old one until then: a refusal decided on the new
		// value could come before an admission it contradicts. Wait for
		// the change to finish (it holds mu throughout) and look again.
		g.acct.RUnlock()
		g.mu.Lock()
		//lint:ignore SA2001 the empty critical section waits for SetCapacity or Close to finish
		g.mu.Unlock()
	}
	r = g.fullReason()
	g.perKind[k].rejected[r].Add(1)
	g.countClassRejected(cl, r)
	g.acct.RUnlock()
	return 0, r
}

// fullReason is the refusal for work that found no free slot.
func (g *Gate) fullReason() Reason {
	if g.capacity.Load() < 0 {
		return ReasonClosed
	}
	return ReasonFull
}

func ctxReason(err error) Reason {
	if err == context.DeadlineExceeded {
		return ReasonDeadline
	}
	return ReasonCanceled
}

// admitted builds the permit for slots just taken and counted, and tells
// the observer. at is the gate's clock plus one (g.now()+1) if the caller
// has just read it, else 0: a timed permit then reads it.
func (g *Gate) admitted(k Kind, n int64, cl Class, flags uint64, wait time.Duration, at int64) Permit {
	if g.grantObs != nil {
		g.grantObs.ObserveGrant(g.InUse())
	} else if g.obs != nil {
		g.observeAdmitted(k, n, wait)
	}
	var start int64
	if g.timed && (g.sampleMask == 0 || rand.Uint32()&g.sampleMask == 0) { // every permit timed: no dice to roll
		start = at
		if start == 0 {
			start = g.now() + 1
		}
	} else if g.obs == nil {
		flags |= metaPlain
	}
	return Permit{ref: gateRef{g}, meta: permitMeta(n, k, cl) | flags, start: start}
}

// observeAdmitted is out of line to keep the admission path's frame small.
func (g *Gate) observeAdmitted(k Kind, n int64, wait time.Duration) {
	g.obs.ObserveAdmission(AdmissionEvent{
		Gate: g.name, Kind: g.kinds[k], Accepted: true, Weight: n,
		Inflight: g.InUse(), Capacity: g.setCap.Load(), Waiting: g.queued.Load(), Wait: wait,
	})
}

func (g *Gate) raisePeak(used int64) {
	for {
		p := g.peak.Load()
		if used <= p {
			return
		}
		if g.peak.CompareAndSwap(p, used) {
			g.updateFastLimit()
			return
		}
	}
}

// updateFastLimit recomputes the limit below which TryAcquire may admit
// with a bare CAS. Callers store a new capacity before calling it and bump
// the state word's generation after, so no CAS lands on a limit older
// than the capacity it was decided against.
func (g *Gate) updateFastLimit() {
	if !g.bare {
		g.fastLimit.Store(-1)
		return
	}
	g.limitMu.Lock()
	g.fastLimit.Store(min(g.capacity.Load(), g.peak.Load()))
	g.limitMu.Unlock()
}

// refuse counts the rejection of a caller that never queued and returns its
// error. Even a one-counter step goes under acct: only the fast path's
// single operation on the state word may run while Stats reads, so that
// a snapshot never shows a refusal without the admission that caused it.
func (g *Gate) refuse(k Kind, n int64, cl Class, r Reason) *RejectedError {
	g.acct.RLock()
	g.perKind[k].rejected[r].Add(1)
	g.countClassRejected(cl, r)
	g.acct.RUnlock()
	return g.rejection(k, n, r, 0)
}

// rejection builds (or reuses) the refusal for a rejection already counted.
func (g *Gate) rejection(k Kind, n int64, r Reason, wait time.Duration) *RejectedError {
	kc := &g.perKind[k]
	used, c := g.InUse(), g.setCap.Load()
	ra := g.retryAfter(r, c)
	e := kc.lastRejection[r].Load()
	if e == nil || e.inflight != used || e.capacity != c || e.retryAfter != ra {
		e = &RejectedError{gate: g.name, kind: g.kinds[k], reason: r, inflight: used, capacity: c, retryAfter: ra}
		kc.lastRejection[r].Store(e)
	}
	if g.obs != nil {
		g.obs.ObserveAdmission(AdmissionEvent{
			Gate: g.name, Kind: g.kinds[k], Reason: r, Weight: n,
			Inflight: used, Capacity: c, Waiting: g.queued.Load(), Wait: wait,
		})
	}
	return e
}

// retryAfter estimates when a refused caller might find a free slot: the
// backlog ahead of it (the queue, plus itself) times the recent hold time,
// spread over the slots, rounded up to whole seconds and kept within
// [1s, MaxRetryAfter]. The hold time is an exponentially weighted moving
// average of recent samples, so a slowdown shows within a few dozen
// completions however long the gate has run.
func (g *Gate) retryAfter(r Reason, c int64) time.Duration {
	est := time.Second
	if g.timed && r.Overload() {
		if hold := g.holdEWMA.Load(); hold > 0 {
			backlog := float64(g.queued.Load() + 1)
			secs := math.Ceil(float64(hold) * backlog / float64(max(c, 1)) / float64(time.Second))
			if secs >= g.maxRetryAfter.Seconds() {
				return g.maxRetryAfter
			}
			est = time.Duration(max(secs, 1)) * time.Second
		}
	}
	return min(est, g.maxRetryAfter)
}

// maxHoldNanos is where the summed hold time stops growing: the largest
// time.Duration.
const maxHoldNanos = 1<<63 - 1

// holdEWMAShift sets the weight of a new sample in the hold-time average:
// 1/8, so the average forgets a regime in a few dozen samples.
const holdEWMAShift = 3

// recordHold adds a sampled hold time to the totals and, unless the work
// was dropped, to the recent average.
func (g *Gate) recordHold(hold time.Duration, o Outcome) {
	// An integer sum is one atomic add; a float sum was a division and a
	// CAS loop. It saturates where Stats.HoldTime (a Duration) would.
	if g.holdNanos.Add(uint64(max(hold, 0))) > maxHoldNanos {
		g.holdNanos.Store(maxHoldNanos) // 2^63 ns more would be needed to wrap
	}
	g.holdSamples.Add(1)
	if o == OutcomeDropped {
		return
	}
	h := max(int64(hold), 1)
	for {
		old := g.holdEWMA.Load()
		nw := h
		if old > 0 {
			nw = old + (h-old)>>holdEWMAShift
		}
		if g.holdEWMA.CompareAndSwap(old, max(nw, 1)) {
			return
		}
	}
}

// releaseFastOK ends a fast permit with outcome ok: one CAS frees the slot
// and counts the completion in the state word.
func (g *Gate) releaseFastOK() {
	for {
		s := g.state.Load()
		if s&usedMask == 0 {
			g.overRelease(1)
		}
		if g.state.CompareAndSwap(s, s+doneOne-1) {
			if doneField(s)+1 >= g.foldAt {
				g.fold()
			}
			break
		}
	}
	if g.queued.Load() > 0 {
		g.grant()
	}
}

// fold moves foldAt fast completions out of the state word, so its field
// never overflows. Every release that leaves the field at or above foldAt
// tries; each successful CAS moves exactly foldAt, so nothing is counted
// twice, and doing it under acct keeps snapshots exact.
func (g *Gate) fold() {
	g.acct.RLock()
	for {
		s := g.state.Load()
		if doneField(s) < g.foldAt {
			break
		}
		if g.state.CompareAndSwap(s, s-g.foldAt<<doneShift) {
			g.folded.Add(g.foldAt)
			break
		}
	}
	g.acct.RUnlock()
}

// releaseSlow ends any permit but a fast one with outcome ok.
func (g *Gate) releaseSlow(k Kind, n int64, cl Class, o Outcome, fast bool) {
	g.acct.RLock()
	for {
		s := g.state.Load()
		if int64(s&usedMask) < n {
			g.acct.RUnlock()
			g.overRelease(n)
		}
		if g.state.CompareAndSwap(s, s-uint64(n)) {
			break
		}
	}
	if fast {
		g.fastFailed.Add(1)
	} else {
		g.slowUsed.Add(-n)
		if cl != 0 {
			g.perClass[cl].used.Add(-n)
		}
	}
	g.perKind[k].completed[o].Add(1)
	g.acct.RUnlock()
	if g.queued.Load() > 0 {
		g.grant()
	}
}

// ErrOverRelease is the value Done panics with when a release would free
// more slots than the gate has in use: a Permit was copied and both copies
// were ended. See Permit.
var ErrOverRelease = fmt.Errorf("admit: a permit released more slots than are held (was a Permit copied?)")

func (g *Gate) overRelease(n int64) {
	g.countMisuse()
	panic(fmt.Errorf("%w: gate %q, releasing %d with %d in use", ErrOverRelease, g.name, n, g.InUse()))
}

func (g *Gate) countMisuse() {
	g.acct.RLock()
	g.misuse.Add(1)
	g.acct.RUnlock()
}

// observeCompleted is out of line to keep the release path's frame small.
func (g *Gate) observeCompleted(k Kind, o Outcome, n int64, hold time.Duration) {
	g.obs.ObserveCompletion(CompletionEvent{Gate: g.name, Kind: g.kinds[k], Outcome: o, Weight: n, Hold: hold})
}

// atomicFloat is a float64 that many goroutines add to.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) Add(d float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (f *atomicFloat) Load() float64 { return math.Float64frombits(f.bits.Load()) }
