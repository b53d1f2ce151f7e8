package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/breaker"
)

// NoRetryHeader is the signal "overloaded, do not retry". A server (or a
// sluice transport that has given up) sets it on a refusal so that no
// caller above retries it: when every layer of a call chain retries, a
// failure at the bottom is multiplied by the attempt count at every layer
// (three layers of four attempts send 64 to the bottom). With the signal,
// only the layer nearest the failure retries, within its budget, and every
// layer above passes the refusal up at once. Servers that relay an
// upstream's answer must relay this header with it.
const NoRetryHeader = "Sluice-No-Retry"

// ErrThrottled is returned when adaptive throttling refused the first
// attempt locally: the upstream has been refusing most requests, so this
// one was not sent.
var ErrThrottled = errors.New("retry: throttled locally (upstream refusing most requests)")

// ErrDeadline is returned when the caller's remaining deadline, less the
// safety margin, left no time to start the first attempt. It also matches
// context.DeadlineExceeded.
var ErrDeadline = fmt.Errorf("retry: no time left for an attempt: %w", context.DeadlineExceeded)

// Config configures a Policy. The zero Config is a valid default: 3
// attempts, 25 ms–1 s full-jitter backoff, a private 10 % budget, K = 2
// throttling, Request-Timeout propagation with a 5 ms margin, no breaker.
type Config struct {
	// Name labels the policy's metrics and logs (bounded: one per upstream
	// or client). Empty means "default".
	Name string
	// MaxAttempts is the most attempts per request, the first included. 0
	// means 3; 1 means never retry; negative is an error.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry; it doubles
	// per retry up to MaxDelay. 0 means 25 ms and 1 s; negative is an error.
	BaseDelay, MaxDelay time.Duration
	// Budget caps retries across requests. Share one *Budget between the
	// policies of one process to cap them together. Nil means a new
	// default Budget owned by this policy.
	Budget *Budget
	// Throttle refuses attempts locally while the upstream refuses most of
	// them. Nil means a new default Throttle owned by this policy, unless
	// NoThrottle is set.
	Throttle   *Throttle
	NoThrottle bool
	// Breaker, when set, is asked before every attempt and told its result.
	// Use one breaker per upstream: a Policy whose calls go to several
	// hosts should use Breakers instead.
	Breaker *breaker.Breaker
	// Breakers, when set, gives every upstream its own breaker from the
	// group: Transport keys it by the request's URL.Host, grpcsluice by
	// the connection's target, DoUpstream by its argument. A failing host
	// then opens only its own breaker. Setting both Breaker and Breakers
	// is an error.
	Breakers *breaker.Group
	// DeadlineHeader is the request header that carries the remaining
	// deadline to the upstream, in decimal seconds. Empty means
	// "Request-Timeout" (what sluice servers read); "-" means none.
	DeadlineHeader string
	// DeadlineMargin is taken off the remaining deadline before it is sent,
	// and an attempt is not started unless more than it is left: it pays
	// for the network and for the caller's own work on the answer. 0 means
	// 5 ms; negative means none.
	DeadlineMargin time.Duration
	// ServiceTime is how long the upstream is expected to take once it
	// accepts. A Retry-After wait is honoured only if the remaining
	// deadline covers the wait plus this. 0 means 50 ms; negative means 0.
	ServiceTime time.Duration
	// MaxRetryAfter is the longest Retry-After wait honoured when the
	// caller has no deadline. 0 means 5 s; negative means never wait for
	// Retry-After without a deadline.
	MaxRetryAfter time.Duration
	// IdempotencyKeyHeader names the header that makes a request with a
	// non-idempotent method (POST, PATCH) retryable; the header is sent
	// unchanged on every attempt, so the upstream can tell a retry from a
	// new operation. Empty means "Idempotency-Key".
	IdempotencyKeyHeader string
	// Observer receives every event (see Event). Nil means none; Stats
	// counts events either way.
	Observer Observer
	// Logger receives a Debug event when a request is given up. Nil is
	// silent.
	Logger *slog.Logger
	// Now and Rand are the clock and the jitter source (a uniform draw in
	// [0, 1)), shared with the default Budget and Throttle; nil means
	// time.Now (which testing/synctest fakes) and math/rand/v2. Both must
	// be safe for concurrent use. Sleep waits d or until ctx ends; nil
	// means a timer.
	Now   func() time.Time
	Rand  func() float64
	Sleep func(ctx context.Context, d time.Duration) error
}

// Policy decides attempts, retries and waits for calls to one upstream
// (or one client's calls). Transport applies it to HTTP; grpcsluice to
// gRPC; Do to anything else. Create one with New; the zero Policy is not
// usable. Safe for concurrent use.
type Policy struct {
	name                       string
	maxAttempts                int
	base, maxDelay             time.Duration
	budget                     *Budget
	throttle                   *Throttle
	breaker                    *breaker.Breaker
	breakers                   *breaker.Group
	deadlineHeader             string
	margin, serviceTime, maxRA time.Duration
	idemKey                    string
	obs                        Observer
	log                        *slog.Logger
	now                        func() time.Time
	rand                       func() float64
	sleep                      func(context.Context, time.Duration) error

	events [numEvents]atomic.Uint64
}

// New returns a Policy, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Policy, error) {
	if cfg.MaxAttempts < 0 || cfg.BaseDelay < 0 || cfg.MaxDelay < 0 {
		return nil, fmt.Errorf("%w: MaxAttempts %d BaseDelay %v MaxDelay %v", ErrInvalidConfig, cfg.MaxAttempts, cfg.BaseDelay, cfg.MaxDelay)
	}
	if cfg.Breaker != nil && cfg.Breakers != nil {
		return nil, fmt.Errorf("%w: both Breaker and Breakers set", ErrInvalidConfig)
	}
	p := &Policy{
		name:           orDefault(cfg.Name, "default"),
		maxAttempts:    orDefault(cfg.MaxAttempts, 3),
		base:           orDefault(cfg.BaseDelay, 25*time.Millisecond),
		maxDelay:       orDefault(cfg.MaxDelay, time.Second),
		budget:         cfg.Budget,
		throttle:       cfg.Throttle,
		breaker:        cfg.Breaker,
		breakers:       cfg.Breakers,
		deadlineHeader: orDefault(cfg.DeadlineHeader, "Request-Timeout"),
		margin:         max(orDefault(cfg.DeadlineMargin, 5*time.Millisecond), 0),
		serviceTime:    max(orDefault(cfg.ServiceTime, 50*time.Millisecond), 0),
		maxRA:          orDefault(cfg.MaxRetryAfter, 5*time.Second),
		idemKey:        orDefault(cfg.IdempotencyKeyHeader, "Idempotency-Key"),
		obs:            cfg.Observer,
		log:            cfg.Logger,
		now:            cfg.Now,
		rand:           cfg.Rand,
		sleep:          cfg.Sleep,
	}
	if p.deadlineHeader == "-" {
		p.deadlineHeader = ""
	}
	// Header maps are looked up and written by canonical key.
	p.deadlineHeader = http.CanonicalHeaderKey(p.deadlineHeader)
	p.idemKey = http.CanonicalHeaderKey(p.idemKey)
	if p.now == nil {
		p.now = time.Now
	}
	if p.rand == nil {
		p.rand = rand.Float64
	}
	if p.sleep == nil {
		p.sleep = sleepCtx
	}
	if p.budget == nil {
		p.budget, _ = NewBudget(BudgetConfig{Now: cfg.Now})
	}
	if p.throttle == nil && !cfg.NoThrottle {
		p.throttle, _ = NewThrottle(ThrottleConfig{Now: cfg.Now, Rand: cfg.Rand})
	}
	return p, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Name returns the policy's name.
func (p *Policy) Name() string { return p.name }

// Budget returns the policy's retry budget.
func (p *Policy) Budget() *Budget { return p.budget }

// Stats returns how many times each Event happened since New.
func (p *Policy) Stats() [NumEvents]uint64 {
	var s [NumEvents]uint64
	for i := range s {
		s[i] = p.events[i].Load()
	}
	return s
}

func (p *Policy) emit(e Event) {
	p.events[e].Add(1)
	if p.obs != nil {
		p.obs.ObserveRetry(p.name, e)
	}
}

// Outcome is what one attempt told the policy; the adapter (HTTP, gRPC)
// classifies its protocol's answer into one.
type Outcome struct {
	// Accepted: the upstream took the request (any answer but an overload
	// refusal or a failure to reach it). Adaptive throttling counts it.
	Accepted bool
	// Retryable: a new attempt could succeed (an overload refusal, a
	// connection failure) and the request was not processed, or it is safe
	// to process it twice.
	Retryable bool
	// NoRetry: the upstream said "overloaded, do not retry".
	NoRetry bool
	// NotProcessed: the upstream refused before doing any of the work (an
	// admission refusal), so repeating the request is safe even when it is
	// not idempotent.
	NotProcessed bool
	// RetryAfter is the upstream's wait hint, if HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Breaker is the result reported to the breaker.
	Breaker breaker.Result
	// Done: the caller's context ended; stop without reporting anything.
	Done bool
}

// Stop says why Do stopped.
type Stop uint8

// The reasons Do stops.
const (
	StopFinal      Stop = iota // the last attempt's answer is final (success, or not retryable)
	StopNotSafe                // retryable, but the request may not be repeated
	StopAttempts               // MaxAttempts reached
	StopNoRetry                // the upstream said do not retry
	StopBudget                 // the retry budget is spent
	StopRetryAfter             // Retry-After not covered by the deadline (or above MaxRetryAfter)
	StopDeadline               // no time left for another attempt
	StopThrottled              // adaptive throttling refused the next attempt
	StopBreaker                // the breaker refused the next attempt
	StopCanceled               // the caller's context ended
)

// GaveUp reports whether Do stopped on a failed attempt it would
// otherwise have retried (so the caller should pass the failure up with
// the no-retry signal).
func (s Stop) GaveUp() bool { return s != StopFinal && s != StopCanceled }

// Timeout is what an attempt may tell the upstream about its deadline.
type Timeout struct {
	// Left is the remaining deadline less the margin; valid if Set.
	Left time.Duration
	Set  bool
}

// Do runs attempt under the policy: before every attempt it checks the
// deadline, the throttle and the breaker; after a retryable outcome it
// decides whether to retry (attempt count, idempotency via safe, no-retry
// signal, Retry-After against the deadline, budget) and waits the backoff.
// attempt receives the attempt number (1 first) and the timeout to
// propagate.
//
// The error is non-nil only when Do stops before any attempt was made
// (ErrDeadline, ErrThrottled, the breaker's *admit.RejectedError) or when
// ctx ends during a wait (ctx.Err()); otherwise the caller holds the last
// attempt's answer and Stop says why it is final.
//
// With Config.Breakers, Do uses the group's breaker for the key "";
// DoUpstream names the upstream.
func (p *Policy) Do(ctx context.Context, safe bool, attempt func(n int, t Timeout) Outcome) (Stop, error) {
	return p.do(ctx, p.breakerFor(""), safe, attempt)
}

// DoUpstream is Do for a call to upstream (a host, a gRPC target): with
// Config.Breakers it asks and tells that upstream's breaker; otherwise it
// is Do.
func (p *Policy) DoUpstream(ctx context.Context, upstream string, safe bool, attempt func(n int, t Timeout) Outcome) (Stop, error) {
	return p.do(ctx, p.breakerFor(upstream), safe, attempt)
}

// breakerFor returns the breaker for calls to upstream, or nil.
func (p *Policy) breakerFor(upstream string) *breaker.Breaker {
	if p.breakers != nil {
		return p.breakers.Get(upstream)
	}
	return p.breaker
}

func (p *Policy) do(ctx context.Context, br *breaker.Breaker, safe bool, attempt func(n int, t Timeout) Outcome) (Stop, error) {
	// The clock is read once before and once after each attempt and the
	// reading shared by budget, throttle and breaker: a time.Now costs up
	// to 100 ns on some virtual machines.
	now := p.now()
	p.budget.requestAt(now)
	for n := 1; ; n++ {
		if n > 1 {
			now = p.now()
		}
		var t Timeout
		if dl, ok := ctx.Deadline(); ok {
			t.Left, t.Set = dl.Sub(now)-p.margin, true
			if t.Left <= 0 {
				p.emit(EventDeadlineExpired)
				if n == 1 {
					return StopDeadline, ErrDeadline
				}
				return StopDeadline, nil
			}
		}
		if p.throttle != nil && !p.throttle.allowAt(now) {
			p.emit(EventThrottled)
			if n == 1 {
				return StopThrottled, ErrThrottled
			}
			return StopThrottled, nil
		}
		var call breaker.Call
		if br != nil {
			c, err := br.AllowAt(now)
			if err != nil {
				p.emit(EventBreakerOpen)
				if n == 1 {
					return StopBreaker, err
				}
				return StopBreaker, nil
			}
			call = c
		}
		p.emit(EventAttempt)
		o := attempt(n, t)
		end := p.now()
		if o.Done {
			call.DoneAt(breaker.Ignored, end)
			return StopCanceled, nil
		}
		call.DoneAt(o.Breaker, end)
		if p.throttle != nil {
			p.throttle.answeredAt(end, o.Accepted)
		}
		if !o.Retryable {
			return StopFinal, nil
		}
		stop, wait := p.decide(ctx, n, safe, o)
		if stop != StopFinal {
			p.giveUp(ctx, stop, n)
			return stop, nil
		}
		p.emit(EventRetry)
		if err := p.sleep(ctx, wait); err != nil {
			return StopCanceled, err
		}
	}
}

// decide returns StopFinal and the wait when a retry should follow the
// retryable attempt n, else why not.
func (p *Policy) decide(ctx context.Context, n int, safe bool, o Outcome) (Stop, time.Duration) {
	if o.NoRetry {
		p.emit(EventNoRetrySignal)
		return StopNoRetry, 0
	}
	if !safe && !o.NotProcessed {
		return StopNotSafe, 0
	}
	if n >= p.maxAttempts {
		return StopAttempts, 0
	}
	wait := Backoff(n, p.base, p.maxDelay, p.rand())
	dl, hasDeadline := ctx.Deadline()
	if o.HasRetryAfter {
		if hasDeadline {
			if left := dl.Sub(p.now()) - p.margin; left < o.RetryAfter+p.serviceTime {
				p.emit(EventRetryAfterRefused)
				return StopRetryAfter, 0
			}
		} else if p.maxRA < 0 || o.RetryAfter > p.maxRA {
			p.emit(EventRetryAfterRefused)
			return StopRetryAfter, 0
		}
		wait = max(wait, o.RetryAfter)
	} else if hasDeadline && dl.Sub(p.now())-p.margin <= wait {
		p.emit(EventDeadlineExpired)
		return StopDeadline, 0
	}
	if !p.budget.tryRetryAt(p.now()) {
		p.emit(EventBudgetExhausted)
		return StopBudget, 0
	}
	if o.HasRetryAfter {
		p.emit(EventRetryAfterHonored)
	}
	return StopFinal, wait
}

var stopNames = [...]string{"final", "not_safe", "attempts", "no_retry", "budget", "retry_after", "deadline", "throttled", "breaker", "canceled"}

// String returns the stop's label, e.g. "budget".
func (s Stop) String() string {
	if int(s) < len(stopNames) {
		return stopNames[s]
	}
	return "stop(?)"
}

func (p *Policy) giveUp(ctx context.Context, s Stop, attempts int) {
	if p.log != nil {
		p.log.LogAttrs(ctx, slog.LevelDebug, "retry: giving up",
			slog.String("policy", p.name), slog.String("stop", s.String()), slog.Int("attempts", attempts))
	}
}
