package httpgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/admit"
)

// Defaults used for zero Config fields.
const (
	// DefaultDeadlineHeader is the request header that carries a client's
	// time budget (see ParseDeadline for its forms).
	DefaultDeadlineHeader = "Request-Timeout"
	// DefaultMaxDeadline bounds a deadline taken from the header.
	DefaultMaxDeadline = 30 * time.Second
	// DefaultMinDeadline is the least time a client's header can leave a
	// handler: a budget below it is raised to it.
	DefaultMinDeadline = 100 * time.Millisecond
)

// ErrNoHolder is returned by Acquire when the context does not come from
// a request served through Lazy or Guard: nobody would release the slot,
// so none is taken.
var ErrNoHolder = errors.New("httpgate: Acquire outside a Lazy or Guard handler")

// ErrHandlerDone is returned by Acquire when the handler the context
// belongs to has already returned (a goroutine it started outlived it):
// the holder has released everything and takes nothing new.
var ErrHandlerDone = errors.New("httpgate: Acquire after the handler returned")

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("httpgate: invalid config")

// A RefusalFunc writes the answer to a request that could not get a slot.
// err is what Acquire returned: usually a *admit.RejectedError, or
// ErrNoHolder / ErrHandlerDone for misuse. It must not read the request
// body. WriteRefusal is the default.
type RefusalFunc func(w http.ResponseWriter, r *http.Request, err error)

// Config configures a Middleware. The zero Config is valid: refusals
// written by WriteRefusal, no logging, and no deadline header read by
// Guard or Lazy (Deadline reads Request-Timeout, bounded to 100 ms..30 s).
//
// What zero and negative mean, field by field:
//
//	field           zero                          negative
//	HeaderDeadline  Guard and Lazy ignore the     -
//	                header (Deadline reads it)
//	DeadlineHeader  "Request-Timeout"             -
//	MinDeadline     DefaultMinDeadline (100ms)    no floor
//	MaxDeadline     DefaultMaxDeadline (30s)      header ignored everywhere
//	Refusal         WriteRefusal                  -
//	Logger          silent                        -
type Config struct {
	// HeaderDeadline makes Guard and Lazy turn the deadline header into
	// the request context's deadline. False (the zero value) means they
	// never read it: a handler's context is the client's connection and
	// nothing else. Deadline always reads it; using it is the opt-in.
	HeaderDeadline bool

	// DeadlineHeader names the request header that carries the client's
	// time budget ("2", "0.5", "2s", "500ms": see ParseDeadline). Empty
	// means DefaultDeadlineHeader. It must be a valid header field name.
	DeadlineHeader string

	// MinDeadline is the floor under a budget taken from the header: a
	// client may ask for less, and gets MinDeadline, so no client can
	// cut a handler's work shorter than the service allows. Zero means
	// DefaultMinDeadline; negative means no floor. It must not exceed
	// MaxDeadline.
	MinDeadline time.Duration

	// MaxDeadline bounds the budget taken from the header; larger values
	// are lowered to it. Zero means DefaultMaxDeadline; negative means the
	// header is ignored and never sets a deadline.
	MaxDeadline time.Duration

	// Refusal writes refusals for Guard and for Refuse. Nil means
	// WriteRefusal.
	Refusal RefusalFunc

	// Logger receives debug records for malformed deadline headers and
	// for slots released by a panicking handler. Nil means silent.
	Logger *slog.Logger
}

// A Middleware installs per-request holders (Lazy) and gates handlers
// (Guard). It is immutable after New and safe for concurrent use.
type Middleware struct {
	// holders recycles holders that were used only for a refusal (they
	// never reached a context, so nothing else can see them). Holders of
	// admitted requests are left to the GC: a goroutine the handler
	// started may still hold the context that points at them.
	holders sync.Pool

	header      string
	lazyHeader  bool // Guard and Lazy read the header too
	minDeadline time.Duration
	maxDeadline time.Duration
	refusal     RefusalFunc
	logger      *slog.Logger
}

// New returns a Middleware for cfg, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Middleware, error) {
	m := &Middleware{
		header:      cfg.DeadlineHeader,
		lazyHeader:  cfg.HeaderDeadline,
		minDeadline: cfg.MinDeadline,
		maxDeadline: cfg.MaxDeadline,
		refusal:     cfg.Refusal,
		logger:      cfg.Logger,
	}
	if m.header == "" {
		m.header = DefaultDeadlineHeader
	}
	if !httpguts.ValidHeaderFieldName(m.header) {
		return nil, fmt.Errorf("%w: DeadlineHeader %q is not a valid header field name", ErrInvalidConfig, m.header)
	}
	m.header = http.CanonicalHeaderKey(m.header)
	if m.maxDeadline == 0 {
		m.maxDeadline = DefaultMaxDeadline
	}
	switch {
	case m.minDeadline == 0:
		m.minDeadline = DefaultMinDeadline
	case m.minDeadline < 0:
		m.minDeadline = 0
	}
	if m.maxDeadline > 0 && m.minDeadline > m.maxDeadline {
		return nil, fmt.Errorf("%w: MinDeadline %v above MaxDeadline %v", ErrInvalidConfig, m.minDeadline, m.maxDeadline)
	}
	if m.refusal == nil {
		m.refusal = WriteRefusal
	}
	m.holders.New = func() any { return new(holder) }
	return m, nil
}

// Lazy returns a handler that serves next with a holder in the request's
// context, so next can take slots with Acquire at the point of cost. Every
// slot taken is released once when next returns; see the package
// documentation for the outcome recorded. Only with Config.HeaderDeadline
// does it read the deadline header: then a valid one becomes the request
// context's deadline, kept within [MinDeadline, MaxDeadline], and a
// malformed one is answered 400 without running next.
func (m *Middleware) Lazy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next, nil, admit.Request{})
	})
}

// Deadline returns a handler that only applies the deadline header (see
// Config.DeadlineHeader; using Deadline is the opt-in, whatever
// Config.HeaderDeadline says) to the request's context, kept within
// [MinDeadline, MaxDeadline], before serving next: no
// holder, so next must not call Acquire. It is for handlers that take and
// release their slots themselves (package static does, around each disk
// read). A request without the header passes through untouched, at no
// cost; a malformed header is answered with 400 like Lazy does.
func (m *Middleware) Deadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel, ok := m.withDeadline(w, r, true)
		if !ok {
			return
		}
		if cancel == nil {
			next.ServeHTTP(w, r)
			return
		}
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// withDeadline applies the deadline header to r's context. cancel is nil
// when there was no header to apply; ok is false when the header was
// malformed and a 400 has been written.
func (m *Middleware) withDeadline(w http.ResponseWriter, r *http.Request, read bool) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	ctx = r.Context()
	if !read || m.maxDeadline <= 0 {
		return ctx, nil, true
	}
	vals := r.Header[m.header]
	if len(vals) == 0 {
		return ctx, nil, true
	}
	d, err := parseDeadlineValues(vals)
	if err != nil {
		m.log(ctx, "malformed deadline header", slog.String("header", m.header), slog.Any("err", err))
		writeBadDeadline(w, m.header, err)
		return nil, nil, false
	}
	ctx, cancel = context.WithTimeout(ctx, min(max(d, m.minDeadline), m.maxDeadline))
	return ctx, cancel, true
}

// Guard returns a handler that takes one slot from g before serving next,
// for work whose cost is the whole request. A refusal is written with the
// Middleware's RefusalFunc and next does not run. Guard reads the deadline
// header only with Config.HeaderDeadline (see Lazy); without it, a request
// waits in g's queue for at most g's MaxWait, or until its client leaves. Like Lazy, it installs a
// holder, so next may take more slots with Acquire; all are released when
// next returns.
func (m *Middleware) Guard(g *admit.Gate, next http.Handler) http.Handler {
	return m.GuardFor(g, admit.Request{}, next)
}

// GuardFor is Guard for work of another kind or weight than one slot of
// g's first kind: a scan may cost more slots than a point read. It panics
// if req is invalid for g (a kind g does not have, a weight outside
// 1..admit.MaxCapacity), since that is a wiring mistake.
func (m *Middleware) GuardFor(g *admit.Gate, req admit.Request, next http.Handler) http.Handler {
	if g == nil {
		panic("httpgate: Guard with a nil gate")
	}
	if g.KindName(req.Kind) == "" || req.Weight < 0 || req.Weight > admit.MaxCapacity {
		panic(fmt.Sprintf("httpgate: GuardFor(%q, %+v): invalid request for this gate", g.Name(), req))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next, g, req)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, g *admit.Gate, req admit.Request) {
	ctx, cancel, ok := m.withDeadline(w, r, m.lazyHeader)
	if !ok {
		return
	}
	if cancel != nil {
		defer cancel()
	}
	var h *holder
	if g != nil {
		// Decide before building the request's context: a refusal is
		// written without it, so refusing stays about as cheap as the
		// cheapest answer. A holder that saw only a refusal never
		// escaped, so it goes back to the pool.
		h = m.holders.Get().(*holder)
		e := h.next()
		var err error
		if e.p, err = g.AcquireFor(ctx, req); err != nil {
			*h = holder{}
			m.holders.Put(h)
			m.refusal(w, r, err)
			return
		}
		h.mw, h.w.rw = m, w
	} else {
		h = &holder{mw: m, w: statusWriter{rw: w}}
	}
	m.run(w, r, next, ctx, h)
}

// An Admission is the slots a front end took for a request before it
// built the *http.Request (sluice's HTTP/1.1 engine decides on its fast
// path, then hands the request over): TryAdmit takes the first gate's
// slot, TryAcquire more. Hand it to ServeAdmitted, which serves the
// request as Guard does once it has admitted, or end it with Release.
// The zero Admission holds nothing.
type Admission struct{ h *holder }

// TryAdmit takes a slot of g for req without waiting. On a refusal it
// returns the gate's error and holds nothing.
func (m *Middleware) TryAdmit(g *admit.Gate, req admit.Request) (Admission, error) {
	h := m.holders.Get().(*holder)
	e := h.next()
	var err error
	if e.p, err = g.TryAcquireFor(req); err != nil {
		*h = holder{}
		m.holders.Put(h)
		return Admission{}, err
	}
	h.mw = m
	return Admission{h}, nil
}

// TryAcquire takes one more slot, of g, into a without waiting; on a
// refusal a keeps what it held.
func (a Admission) TryAcquire(g *admit.Gate, req admit.Request) error {
	e := a.h.next()
	var err error
	e.p, err = g.TryAcquireFor(req)
	return err
}

// Release ends every slot a holds with outcome o, for an admission that
// is not served after all. Later calls (and ServeAdmitted) do nothing
// more: the holder is done.
func (a Admission) Release(o admit.Outcome) {
	if a.h != nil {
		a.h.finish(o)
	}
}

// ServeAdmitted serves next for a request admitted by a (which it takes
// over): a holder owns a's permits, so next may take more with Acquire
// and set the outcome with SetOutcome, and every permit is released once
// when next returns, panics included, with the answer's outcome, as under
// Guard. A malformed deadline header is answered 400 as Guard answers it,
// and a's permits end dropped.
func (m *Middleware) ServeAdmitted(w http.ResponseWriter, r *http.Request, next http.Handler, a Admission) {
	ctx, cancel, ok := m.withDeadline(w, r, m.lazyHeader)
	if !ok {
		a.Release(admit.OutcomeDropped)
		return
	}
	if cancel != nil {
		defer cancel()
	}
	h := a.h
	if h == nil {
		h = &holder{}
	}
	h.mw, h.w.rw = m, w
	m.run(w, r, next, ctx, h)
}

// run serves next under holder h (installed in ctx) and releases what it
// holds when next returns.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, ctx context.Context, h *holder) {
	ctx = context.WithValue(ctx, holderKey{}, h)
	r = r.WithContext(ctx)

	returned := false
	defer func() {
		if !returned {
			// A panic (or Goexit) is unwinding through here. Release
			// without recovering, so the panic reaches net/http with its
			// original stack.
			if n := h.finish(admit.OutcomePanic); n > 0 {
				m.log(ctx, "handler panicked holding slots; released", slog.Int("permits", n))
			}
		}
	}()
	next.ServeHTTP(&h.w, r)
	returned = true
	h.finish(h.normalOutcome(ctx))
}

func (m *Middleware) log(ctx context.Context, msg string, args ...any) {
	if m.logger != nil {
		m.logger.Log(ctx, slog.LevelDebug, msg, args...)
	}
}

type holderKey struct{}

// inlinePermits is how many permits a holder keeps without allocating:
// enough for a handler that takes a disk slot and an upstream slot.
const inlinePermits = 2

// A holder is the per-request record of the slots a handler took.
type holder struct {
	mw *Middleware
	w  statusWriter

	mu         sync.Mutex // guards the fields below; held briefly, never across a wait
	inline     [inlinePermits]Permit
	more       []*Permit
	n          int // entries handed out
	done       bool
	outcome    admit.Outcome
	outcomeSet bool
}

// A Permit is a slot a handler took with Acquire (or the one Guard took
// for it). The request's holder ends it when the handler returns; the
// handler may end it earlier with Done, from any goroutine, for a slot
// needed only for part of the handler: the first Done releases, and later
// ones (the holder's included) do nothing. Unlike an admit.Permit it may
// be ended from several goroutines at once, as it has two owners; like
// one, it must not be copied: keep the pointer Acquire returned.
type Permit struct {
	mu sync.Mutex // guards p; taken by every method, never across a wait
	p  admit.Permit
	// filling: an Acquire is under way outside the holder's lock and owns
	// p; finish leaves such a permit to that Acquire, which releases it
	// itself if it arrives too late. Guarded by the holder's mu.
	filling bool
}

// Done releases the permit's slots, if they are still held, and records
// how the work ended.
func (p *Permit) Done(o admit.Outcome) { p.end(o) }

// end is Done, reporting whether it released anything.
func (p *Permit) end(o admit.Outcome) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.p.Held() {
		return false
	}
	p.p.Done(o)
	return true
}

// Held reports whether the permit still holds its slots.
func (p *Permit) Held() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Held()
}

// Gate returns the gate the permit came from.
func (p *Permit) Gate() *admit.Gate { return p.p.Gate() }

// Kind returns the permit's kind label.
func (p *Permit) Kind() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Kind()
}

// Weight returns the number of slots the permit holds or held.
func (p *Permit) Weight() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Weight()
}

// next returns storage for one more permit. Storage is never reused: a
// permit pointer handed to the handler keeps meaning the same permit, so
// a stale Done on it cannot end a newer one.
func (h *holder) next() *Permit {
	i := h.n
	h.n++
	if i < inlinePermits {
		return &h.inline[i]
	}
	e := new(Permit)
	h.more = append(h.more, e)
	return e
}

// each calls f for every permit handed out. h.mu must be held.
func (h *holder) each(f func(*Permit)) {
	for i := range min(h.n, inlinePermits) {
		f(&h.inline[i])
	}
	for _, e := range h.more {
		f(e)
	}
}

func (h *holder) acquire(ctx context.Context, g *admit.Gate, req admit.Request) (*Permit, error) {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return nil, ErrHandlerDone
	}
	e := h.next()
	e.filling = true
	h.mu.Unlock()

	// Wait outside the lock; the permit is ours while filling.
	var err error
	e.p, err = g.AcquireFor(ctx, req)

	h.mu.Lock()
	e.filling = false
	late := h.done
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if late {
		// The handler returned while we waited: nobody else would
		// release this slot, and the work it was for is gone.
		e.Done(admit.OutcomeDropped)
		return nil, ErrHandlerDone
	}
	return e, nil
}

// finish marks the holder done and releases every permit still held with
// outcome o, or with the outcome the handler set. It returns how many
// permits it released.
func (h *holder) finish(o admit.Outcome) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if h.outcomeSet {
		o = h.outcome
	}
	n := 0
	h.each(func(e *Permit) {
		if !e.filling && e.end(o) {
			n++
		}
	})
	return n
}

// normalOutcome is the outcome of a handler that returned normally.
func (h *holder) normalOutcome(ctx context.Context) admit.Outcome {
	switch {
	case ctx.Err() != nil:
		return admit.OutcomeCanceled
	case h.w.status >= 500:
		return admit.OutcomeError
	}
	return admit.OutcomeOK
}

// Acquire takes a slot from g for the request that ctx belongs to (a
// request served through Lazy or Guard), waiting in g's queue if it has
// one, and records it so that it is released when the handler returns.
//
// The returned permit is owned by the request's holder, which ends it when
// the handler returns. The handler may end it earlier with Done, from any
// goroutine (see Permit). Keep the pointer; never copy the Permit it
// points to.
//
// On refusal it returns the gate's *admit.RejectedError; answer it with
// Refuse. It returns ErrNoHolder, taking nothing, when ctx has no holder,
// and ErrHandlerDone when the handler has already returned.
func Acquire(ctx context.Context, g *admit.Gate) (*Permit, error) {
	return AcquireFor(ctx, g, admit.Request{})
}

// AcquireFor is Acquire for work of another kind or weight than one slot
// of g's first kind.
func AcquireFor(ctx context.Context, g *admit.Gate, req admit.Request) (*Permit, error) {
	h, _ := ctx.Value(holderKey{}).(*holder)
	if h == nil {
		return nil, ErrNoHolder
	}
	return h.acquire(ctx, g, req)
}

// SetOutcome records how the request's admitted work ended, overriding
// the outcome the holder would infer (see the package documentation). A
// handler that aborts on purpose with panic(http.ErrAbortHandler) can call
// it first, so the abort is not counted as a panic. It does nothing when
// ctx has no holder.
func SetOutcome(ctx context.Context, o admit.Outcome) {
	if h, _ := ctx.Value(holderKey{}).(*holder); h != nil {
		h.mu.Lock()
		h.outcome, h.outcomeSet = o, true
		h.mu.Unlock()
	}
}

// Held reports how many slots the request that ctx belongs to holds now.
func Held(ctx context.Context) int {
	h, _ := ctx.Value(holderKey{}).(*holder)
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	h.each(func(e *Permit) {
		if !e.filling && e.Held() {
			n++
		}
	})
	return n
}

// Refuse answers r with the refusal for err, using the RefusalFunc of the
// Middleware that serves r (WriteRefusal outside one). Handlers that take
// slots lazily call it when Acquire fails.
func Refuse(w http.ResponseWriter, r *http.Request, err error) {
	if h, _ := r.Context().Value(holderKey{}).(*holder); h != nil {
		h.mw.refusal(w, r, err)
		return
	}
	WriteRefusal(w, r, err)
}
