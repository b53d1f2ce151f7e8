package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// WhenFull says what a saturated pool (every worker busy, queue full, no
// room for another worker) does with one more task. A closed pool refuses
// with admit.ReasonClosed whatever WhenFull says: shutdown is never absorbed
// silently, so callers can tell it from overload.
type WhenFull uint8

// What a saturated pool does (executors elsewhere call these rejection
// policies).
const (
	// Abort refuses: Go and Submit return a *admit.RejectedError with
	// Reason admit.ReasonQueueFull. The submitter decides what to do.
	Abort WhenFull = iota
	// CallerRuns runs the task on the submitter's goroutine before Go
	// returns. It slows a producer down to the pool's pace, but it also
	// blocks whatever that goroutine was serving (an event loop, a lock
	// holder), and the task runs outside the worker limit.
	CallerRuns
	// Discard drops the new task: Go returns nil, the task's Dropper (its
	// Future) hears DropDiscarded, and Stats count it as rejected with
	// reason queue_full.
	Discard
	// DiscardOldest drops the oldest queued task (DropEvicted) and queues
	// the new one. With nothing queued (Queue 0) it discards the new task.
	DiscardOldest
	numWhenFull
)

var whenFullNames = [numWhenFull]string{"abort", "caller_runs", "discard", "discard_oldest"}

// String returns the name, e.g. "caller_runs".
func (p WhenFull) String() string {
	if p < numWhenFull {
		return whenFullNames[p]
	}
	return "when_full(" + strconv.Itoa(int(p)) + ")"
}

// ErrNilTask is what Go and Submit return for a nil Task; nothing is
// counted.
var ErrNilTask = errors.New("pool: nil task")

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("pool: invalid config")

// Config configures a Pool. The zero value is a valid pool: GOMAXPROCS
// workers, no queue, Abort.
type Config struct {
	// Name labels the pool in errors, events and metrics. "" means "pool".
	Name string
	// Core is the number of workers kept even when idle. They start on
	// demand, one per submission, until there are Core of them. 0 means
	// runtime.GOMAXPROCS(0), capped at Max when Max is set; negative is an
	// error.
	Core int
	// Max is the most workers at once. Workers above Core start only when
	// the queue is full, and leave after IdleTimeout without work. 0 means
	// Core; below Core is an error.
	Max int
	// Queue is how many accepted tasks may wait for a worker. 0 means no
	// queue: a task is accepted only if a worker can take it now.
	// Negative means unbounded, which also means the pool never grows
	// past Core (the queue always has room) and never refuses for load:
	// the waiting moves into memory and latency. Prefer a bound.
	Queue int
	// IdleTimeout is how long a worker above Core waits for work before
	// it leaves. 0 means one minute; negative means it leaves as soon as
	// it finds no work.
	IdleTimeout time.Duration
	// WhenFull is what a saturated pool does with one more task (Abort by
	// default).
	WhenFull WhenFull
	// Observer, if not nil, hears every submission decision and every
	// task's end. With an Observer the pool also measures queue and run
	// times (two clock reads per task).
	Observer Observer
	// Logger, if not nil, receives one Error record per panicking task.
	// Nil is silent (panics are still counted).
	Logger *slog.Logger
}

// Pool is a bounded executor: at most Max workers, at most Queue waiting
// tasks, and an explicit WhenFull for the rest. Create it with New; the zero
// value is not usable. All methods are safe for concurrent use.
//
// A task is offered when Go or Submit is called, then either rejected
// (with a reason) or admitted; an admitted task is queued or running until
// it completes with an outcome (ok, error, canceled, panic, or dropped
// when it never ran). See Stats for the invariants.
type Pool struct {
	name        string
	core, max   int
	queueCap    int // -1: unbounded
	idleTimeout time.Duration
	whenFull    WhenFull
	obs         Observer
	log         *slog.Logger
	epoch       time.Time

	// done is closed once the pool is closed and every worker has left
	// and every task has ended.
	done chan struct{}

	mu          sync.Mutex // guards everything below; a leaf lock, never held while calling user code or observers
	closed      bool
	doneClosed  bool
	q           ring
	idle        []*worker // LIFO: the most recently idle worker is reused first, so the others can time out
	workers     int
	running     int
	peakWorkers int
	offered     uint64
	admitted    uint64
	rejected    admit.ReasonCounts
	completed   admit.OutcomeCounts
	dropped     [NumDropReasons]uint64
	callerRuns  uint64
	lastRefusal [admit.NumReasons]*admit.RejectedError
}

type worker struct {
	ch   chan item // capacity 1: a hand-off never blocks the submitter
	idle bool      // in p.idle; guarded by p.mu
}

// item is one task on its way through the pool. A zero item (no task)
// tells an idle worker to leave.
type item struct {
	ctx  context.Context
	task Task
	enq  time.Duration // since p.epoch, when queued; 0 when handed over directly
}

// New returns a pool configured by cfg, or an error wrapping
// ErrInvalidConfig. No worker starts before the first task.
func New(cfg Config) (*Pool, error) {
	if cfg.Core < 0 || cfg.Max < 0 {
		return nil, fmt.Errorf("%w: Core %d and Max %d must not be negative", ErrInvalidConfig, cfg.Core, cfg.Max)
	}
	if cfg.WhenFull >= numWhenFull {
		return nil, fmt.Errorf("%w: unknown WhenFull %d", ErrInvalidConfig, cfg.WhenFull)
	}
	core, maxw := cfg.Core, cfg.Max
	if core == 0 {
		core = runtime.GOMAXPROCS(0)
		if maxw > 0 {
			core = min(core, maxw)
		}
	}
	if maxw == 0 {
		maxw = core
	}
	if maxw < core {
		return nil, fmt.Errorf("%w: Max %d is below Core %d", ErrInvalidConfig, maxw, core)
	}
	p := &Pool{
		name:        cfg.Name,
		core:        core,
		max:         maxw,
		queueCap:    max(cfg.Queue, -1),
		idleTimeout: cfg.IdleTimeout,
		whenFull:    cfg.WhenFull,
		obs:         cfg.Observer,
		log:         cfg.Logger,
		epoch:       time.Now(),
		done:        make(chan struct{}),
	}
	if p.name == "" {
		p.name = "pool"
	}
	if p.idleTimeout == 0 {
		p.idleTimeout = time.Minute
	}
	return p, nil
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.name }

// Go submits t to run with ctx and returns without waiting for it. It
// never blocks, except under CallerRuns when the task runs on the caller.
//
// It returns nil when t was accepted, or, under Discard and
// DiscardOldest, dropped (t's Drop method, if it has one, has then been
// called). It returns a *admit.RejectedError when t was refused: reason
// queue_full under Abort, closed after Shutdown began (whatever WhenFull says), and
// canceled or deadline when ctx had already ended. errors.Is(err,
// admit.ErrClosed) tells shutdown from overload.
//
// A task whose ctx ends while it is queued never runs: it is dropped with
// DropExpired when a worker reaches it. Go does not allocate on its
// steady path (an idle worker or room in the queue) when t is already a
// heap value.
func (p *Pool) Go(ctx context.Context, t Task) error {
	if t == nil {
		return ErrNilTask
	}
	if err := ctx.Err(); err != nil {
		reason := admit.ReasonCanceled
		if errors.Is(err, context.DeadlineExceeded) {
			reason = admit.ReasonDeadline
		}
		p.mu.Lock()
		p.offered++
		return p.refuse(item{}, reason)
	}
	it := item{ctx: ctx, task: t}
	p.mu.Lock()
	p.offered++
	if p.closed {
		return p.refuse(it, admit.ReasonClosed)
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		w.idle = false
		p.admitted++
		p.running++
		p.mu.Unlock()
		w.ch <- it
		p.observeAccepted(false)
		return nil
	}
	if p.workers < p.core {
		p.startWorker(it)
		p.mu.Unlock()
		p.observeAccepted(false)
		return nil
	}
	if p.queueCap < 0 || p.q.n < p.queueCap {
		it.enq = time.Since(p.epoch)
		p.q.push(it)
		p.admitted++
		p.mu.Unlock()
		p.observeAccepted(false)
		return nil
	}
	if p.workers < p.max {
		p.startWorker(it)
		p.mu.Unlock()
		p.observeAccepted(false)
		return nil
	}
	return p.refuse(it, admit.ReasonQueueFull)
}

// Submit is Go with a Future: the returned Future completes exactly once,
// with t's result, a *PanicError, or a *DroppedError if t never runs.
// When Submit returns an error, t was refused and there is no Future.
// Submit allocates the Future.
func (p *Pool) Submit(ctx context.Context, t Task) (*Future, error) {
	if t == nil {
		return nil, ErrNilTask
	}
	f := &Future{task: t, done: make(chan struct{})}
	if err := p.Go(ctx, f); err != nil {
		return nil, err
	}
	return f, nil
}

// refuse applies WhenFull to it, a task that found the pool saturated
// (reason queue_full) or closed, or whose context had ended. It is called
// with p.mu held and unlocks it.
func (p *Pool) refuse(it item, reason admit.Reason) error {
	switch {
	case p.whenFull == CallerRuns && reason == admit.ReasonQueueFull:
		p.admitted++
		p.running++
		p.callerRuns++
		p.mu.Unlock()
		p.observeAccepted(true)
		o, d, run := p.execute(it)
		p.mu.Lock()
		p.running--
		p.count(o, d)
		p.maybeDone()
		p.mu.Unlock()
		p.observeDone(o, d, 0, run)
		return nil
	case p.whenFull == Discard && reason == admit.ReasonQueueFull,
		p.whenFull == DiscardOldest && reason == admit.ReasonQueueFull && p.q.n == 0:
		p.rejected[reason]++
		p.dropped[DropDiscarded]++
		ev := p.submitEvent(false, reason, false)
		p.mu.Unlock()
		ev.Drop = DropDiscarded
		if p.obs != nil {
			p.obs.ObserveSubmit(ev)
		}
		p.drop(it, DropDiscarded, nil)
		return nil
	case p.whenFull == DiscardOldest && reason == admit.ReasonQueueFull:
		old := p.q.pop()
		p.count(admit.OutcomeDropped, DropEvicted)
		it.enq = time.Since(p.epoch)
		p.q.push(it)
		p.admitted++
		p.mu.Unlock()
		p.drop(old, DropEvicted, nil)
		p.observeDone(admit.OutcomeDropped, DropEvicted, time.Since(p.epoch)-old.enq, span{})
		p.observeAccepted(false)
		return nil
	}
	p.rejected[reason]++
	// Refusals are immutable; reuse the last one while it says the same
	// thing, so refusing under a flood allocates nothing.
	err := p.lastRefusal[reason]
	if err == nil || err.Inflight() != int64(p.running) {
		err = admit.NewRejectedError(p.name, "task", reason, int64(p.running), int64(p.max), time.Second)
		p.lastRefusal[reason] = err
	}
	ev := p.submitEvent(false, reason, false)
	p.mu.Unlock()
	if p.obs != nil {
		p.obs.ObserveSubmit(ev)
	}
	return err
}

// startWorker starts a worker whose first task is it. Called with p.mu held.
func (p *Pool) startWorker(it item) {
	p.workers++
	p.peakWorkers = max(p.peakWorkers, p.workers)
	p.admitted++
	p.running++
	w := &worker{ch: make(chan item, 1)}
	go p.work(w, it)
}

// work runs tasks until the pool closes or the worker has been idle past
// the idle time-out while the pool has more than Core workers.
func (p *Pool) work(w *worker, it item) {
	left := false
	defer func() {
		if !left { // a task called runtime.Goexit and took this worker with it
			p.mu.Lock()
			if p.q.n > 0 { // a replacement, so the queue is not stranded
				next := p.q.pop()
				p.running++
				go p.work(&worker{ch: make(chan item, 1)}, next)
			} else {
				p.workers--
				p.maybeDone()
			}
			p.mu.Unlock()
		}
	}()
	var timer *time.Timer
	for {
		o, d, run := p.execute(it)
		wait := time.Duration(0)
		if it.enq > 0 && p.obs != nil {
			wait = run.start - it.enq
		}
		p.mu.Lock()
		p.running--
		p.count(o, d)
		if p.q.n > 0 {
			it = p.q.pop()
			p.running++
			p.mu.Unlock()
			p.observeDone(o, d, wait, run)
			continue
		}
		if p.closed {
			p.workers--
			p.maybeDone()
			p.mu.Unlock()
			p.observeDone(o, d, wait, run)
			left = true
			return
		}
		timed := p.workers > p.core
		p.idle = append(p.idle, w)
		w.idle = true
		p.mu.Unlock()
		p.observeDone(o, d, wait, run)
		var ok bool
		if it, ok = p.park(w, timed, &timer); !ok {
			left = true // park already counted the worker out
			return
		}
	}
}

// park waits, idle, for the next task. It reports false when the worker
// must leave: the pool closed, or it timed out while above Core.
func (p *Pool) park(w *worker, timed bool, timer **time.Timer) (item, bool) {
	for timed {
		if p.idleTimeout < 0 {
			// Leave at once, unless a submitter already chose this worker.
			p.mu.Lock()
			if w.idle && p.workers > p.core {
				p.removeIdle(w)
				p.mu.Unlock()
				return item{}, false
			}
			p.mu.Unlock()
			break
		}
		if *timer == nil {
			*timer = time.NewTimer(p.idleTimeout)
		} else {
			(*timer).Reset(p.idleTimeout)
		}
		select {
		case it := <-w.ch:
			(*timer).Stop()
			return it, it.task != nil
		case <-(*timer).C:
		}
		p.mu.Lock()
		switch {
		case !w.idle: // a task (or the order to leave) is on its way
			timed = false
		case p.workers > p.core:
			p.removeIdle(w)
			p.mu.Unlock()
			return item{}, false
		default: // others left first; this one is core now
			timed = false
		}
		p.mu.Unlock()
	}
	it := <-w.ch
	return it, it.task != nil
}

// removeIdle takes w out of the idle list for good. Called with p.mu held.
func (p *Pool) removeIdle(w *worker) {
	for i, x := range p.idle {
		if x == w {
			copy(p.idle[i:], p.idle[i+1:])
			p.idle[len(p.idle)-1] = nil
			p.idle = p.idle[:len(p.idle)-1]
			break
		}
	}
	w.idle = false
	p.workers--
	p.maybeDone()
}

// span is when a task started and how long it ran, both zero unless an
// observer wants them.
type span struct {
	start, took time.Duration
}

// execute runs it's task, or drops it if its context has ended, and
// reports how it ended. A panic is recovered here, so a worker survives
// it.
func (p *Pool) execute(it item) (admit.Outcome, DropReason, span) {
	if err := it.ctx.Err(); err != nil {
		p.drop(it, DropExpired, err)
		return admit.OutcomeDropped, DropExpired, span{}
	}
	returned := false
	defer func() {
		if !returned {
			p.goexited(it)
		}
	}()
	var run span
	if p.obs != nil {
		run.start = time.Since(p.epoch)
	}
	perr, err := call(it)
	if p.obs != nil {
		run.took = time.Since(p.epoch) - run.start
	}
	o := admit.OutcomeOK
	switch {
	case perr != nil:
		o = admit.OutcomePanic
		err = perr
		if p.log != nil {
			p.log.Error("pool: task panicked", "pool", p.name, "panic", fmt.Sprint(perr.Value), "stack", string(perr.Stack))
		}
	default:
		o = admit.OutcomeFor(err)
	}
	if f, ok := it.task.(*Future); ok {
		f.complete(err)
	}
	returned = true
	return o, DropNone, run
}

// errGoexit is the PanicError value for a task that called runtime.Goexit.
var errGoexit = errors.New("pool: task called runtime.Goexit")

// goexited does the bookkeeping of a task that ended its goroutine with
// runtime.Goexit (t.FailNow in a test helper does): no caller is left to
// do it. It counts as a panic.
func (p *Pool) goexited(it item) {
	p.mu.Lock()
	p.running--
	p.count(admit.OutcomePanic, DropNone)
	p.maybeDone()
	p.mu.Unlock()
	if f, ok := it.task.(*Future); ok {
		f.complete(&PanicError{Value: errGoexit})
	}
	p.observeDone(admit.OutcomePanic, DropNone, 0, span{})
}

// call runs it's task and recovers a panic into a *PanicError.
func call(it item) (perr *PanicError, err error) {
	defer func() {
		if v := recover(); v != nil {
			perr = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return nil, it.task.Run(it.ctx)
}

// drop tells it's task that it will never run. Never called with p.mu held.
func (p *Pool) drop(it item, reason DropReason, cause error) {
	if d, ok := it.task.(Dropper); ok {
		d.Drop(&DroppedError{Pool: p.name, Reason: reason, Cause: cause})
	}
}

// count records a completion. Called with p.mu held.
func (p *Pool) count(o admit.Outcome, d DropReason) {
	p.completed[o]++
	if d != DropNone {
		p.dropped[d]++
	}
}

// maybeDone closes p.done when a closed pool has nothing left. Called with
// p.mu held.
func (p *Pool) maybeDone() {
	if p.closed && !p.doneClosed && p.workers == 0 && p.running == 0 && p.q.n == 0 {
		p.doneClosed = true
		close(p.done)
	}
}

// Shutdown stops the pool gracefully: from now on every submission is
// refused with reason closed (errors.Is(err, admit.ErrClosed)), whatever
// WhenFull says; tasks already accepted, queued ones included, still run.
// Shutdown returns nil once every task has ended and every worker has
// left. If ctx ends first, the tasks still queued are dropped
// (DropClosed) and Shutdown returns ctx's error; running tasks are not
// interrupted (their own contexts are the way to stop them), and a later
// Shutdown waits for them again. Shutdown may be called more than once.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for _, w := range p.idle {
			w.idle = false
			w.ch <- item{} // never blocks: an idle worker's channel is empty
			p.workers--
		}
		clear(p.idle)
		p.idle = p.idle[:0]
	}
	p.maybeDone()
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	var left []item
	for p.q.n > 0 {
		it := p.q.pop()
		p.count(admit.OutcomeDropped, DropClosed)
		left = append(left, it)
	}
	p.maybeDone()
	p.mu.Unlock()
	now := time.Since(p.epoch)
	for _, it := range left {
		p.drop(it, DropClosed, nil)
		p.observeDone(admit.OutcomeDropped, DropClosed, now-it.enq, span{})
	}
	return ctx.Err()
}

// Done is closed when the pool has shut down completely: Shutdown was
// called, every task has ended and every worker has left.
func (p *Pool) Done() <-chan struct{} { return p.done }

// Closed reports whether Shutdown has been called.
func (p *Pool) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Pool) submitEvent(accepted bool, reason admit.Reason, callerRuns bool) SubmitEvent {
	return SubmitEvent{
		Pool:       p.name,
		Accepted:   accepted,
		Reason:     reason,
		CallerRuns: callerRuns,
		Workers:    p.workers,
		Running:    p.running,
		Queued:     p.q.n,
	}
}

// observeAccepted reports an acceptance, with the counts as of just after
// it (other submissions may have moved them since).
func (p *Pool) observeAccepted(callerRuns bool) {
	if p.obs == nil {
		return
	}
	p.mu.Lock()
	ev := p.submitEvent(true, admit.ReasonNone, callerRuns)
	p.mu.Unlock()
	p.obs.ObserveSubmit(ev)
}

func (p *Pool) observeDone(o admit.Outcome, d DropReason, wait time.Duration, run span) {
	if p.obs == nil {
		return
	}
	p.obs.ObserveDone(DoneEvent{Pool: p.name, Outcome: o, Drop: d, Wait: max(wait, 0), Run: run.took})
}
