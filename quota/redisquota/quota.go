package redisquota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/quota"
)

// Defaults used for zero Config fields.
const (
	DefaultPrefix          = "sluice:quota:"
	DefaultTimeout         = 50 * time.Millisecond
	DefaultBreakerFailures = 3
	DefaultBreakerCooldown = time.Second
)

// ErrInvalidConfig is wrapped by every error New and NewSlots return.
var ErrInvalidConfig = errors.New("redisquota: invalid config")

// Mode says how a fleet quota spends the shared bucket.
type Mode uint8

const (
	// Exact (the zero value) asks Redis on every decision: one round
	// trip, never more admitted than the shared bucket allows.
	Exact Mode = iota
	// Lease takes LeaseSize tokens at a time and spends them locally
	// until they run out or LeaseTTL passes: one round trip per
	// LeaseSize decisions, at the cost of the bound in the package doc.
	Lease
)

// String returns "exact" or "lease".
func (m Mode) String() string {
	if m == Lease {
		return "lease"
	}
	return "exact"
}

// Fallback says how a fleet quota decides while Redis is slow or down.
type Fallback uint8

const (
	// FailOpen (the zero value) decides with a local quota of this
	// instance's share: Rate and Burst divided by Config.Instances.
	FailOpen Fallback = iota
	// FailClosed refuses with reason breaker_open (an overload refusal,
	// 503 at the HTTP edge): nothing is admitted that the fleet did not
	// count.
	FailClosed
)

// String returns "open" or "closed".
func (f Fallback) String() string {
	if f == FailClosed {
		return "closed"
	}
	return "open"
}

// Config configures a fleet Quota. Client is required; every other zero
// field has a default.
type Config struct {
	// Name, Rate, Burst and MaxKeys mean what they mean in quota.Config;
	// Rate and Burst are the fleet's totals per key.
	Name    string
	Rate    float64
	Burst   int
	MaxKeys int
	// Client reaches the Redis that holds the buckets. The Quota never
	// closes it.
	Client redis.UniversalClient
	// Prefix is put before "<name>:<key>" to make Redis keys. Empty means
	// DefaultPrefix.
	Prefix string
	// Mode is Exact or Lease.
	Mode Mode
	// LeaseSize is how many tokens Lease mode takes at once (fewer when
	// the bucket holds fewer). Zero means max(1, Burst/10); it must not
	// exceed Burst. Ignored in Exact mode.
	LeaseSize int
	// LeaseTTL is how long leased tokens may be spent; left-overs are
	// dropped. Zero means the time LeaseSize tokens take to refill,
	// LeaseSize/Rate, at least 10 ms. Negative is invalid.
	LeaseTTL time.Duration
	// Timeout bounds each Redis call; when it passes the decision is made
	// by Fallback. Zero means DefaultTimeout (50 ms); negative is invalid.
	Timeout time.Duration
	// Fallback decides while Redis is unreachable.
	Fallback Fallback
	// Instances is how many instances share the quota, for FailOpen's
	// share. Zero means 1 (the whole quota: safe only for one instance);
	// negative is invalid.
	Instances int
	// BreakerFailures consecutive failed calls open the breaker; while
	// open no call is made for BreakerCooldown, then one probe decides
	// whether to close it. Zero means the defaults; negative is invalid.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Now is the instance's clock, used for lease expiry and to measure
	// skew. Redis's clock (TIME) decides the shared bucket. Nil means
	// time.Now.
	Now func() time.Time
	// Logger receives a warning when the breaker opens and an info record
	// when it closes. Nil means silent.
	Logger *slog.Logger
}

// Quota is a per-key rate quota shared by every instance that uses the
// same Redis, Prefix and Name. It implements quota.Limiter and is safe for
// concurrent use. It starts no goroutines.
type Quota struct {
	policy    quota.Shape
	client    redis.UniversalClient
	prefix    string
	mode      Mode
	leaseSize int
	leaseTTL  time.Duration
	timeout   time.Duration
	fallback  Fallback
	local     *quota.Quota // the FailOpen share; nil with FailClosed
	breaker   *storeBreaker
	now       func() time.Time
	logger    *slog.Logger
	argT      string // the script's T and tau, formatted once
	argTau    string
	leases    *lru.Cache[string, *lease] // Lease mode only
	instances int

	fleetAllowed, fleetLimited, storeErrors, fallbacks, rejectedStore atomic.Uint64
	shareAllowed, shareLimited                                        atomic.Uint64 // Lease mode's fallback decisions
	leaseCalls                                                        atomic.Uint64
	inFallback                                                        atomic.Bool
	skewMicros                                                        atomic.Int64
}

// lease is Lease mode's state for one key. mu guards every field and is
// never held across a round trip.
type lease struct {
	mu      sync.Mutex
	tokens  int
	expires time.Time
	// emptyUntil is when the shared bucket, as Redis last said, can
	// grant again: until then refusals are decided here, without a round
	// trip, so a client over its quota does not cost Redis a call per
	// request.
	emptyUntil time.Time
	emptyCost  int // the smallest cost refused until emptyUntil
	// fetch is the round trip in flight for this key, nil when none.
	// Decisions that need tokens wait for its outcome, each within its
	// own Timeout, rather than call Redis again one after another.
	fetch *leaseFetch
	// share is this instance's share of the key's bucket (Rate and Burst
	// divided by Instances), which decides while Redis cannot (FailOpen;
	// nil with FailClosed). Fleet admissions spend from it too, and what
	// it admits is owed to the shared bucket, so going back and forth
	// between Redis and the share never gives a client both buckets.
	share *rate.Limiter
	// owed is what the share admitted since Redis last granted (at most
	// Burst): the next lease must cover it before it covers a cost.
	owed int
}

// leaseFetch is one lease round trip; err is set before done is closed.
type leaseFetch struct {
	done chan struct{}
	err  error
}

// New returns a fleet Quota for cfg, or an error wrapping
// ErrInvalidConfig.
func New(cfg Config) (*Quota, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client is nil", ErrInvalidConfig)
	}
	// The local quota validates and defaults Name, Rate, Burst, MaxKeys.
	whole, err := quota.New(quota.Config{Name: cfg.Name, Rate: cfg.Rate, Burst: cfg.Burst, MaxKeys: cfg.MaxKeys})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	p := whole.Shape()
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Instances < 0 || cfg.Timeout < 0 || cfg.LeaseTTL < 0 || cfg.BreakerFailures < 0 || cfg.BreakerCooldown < 0 || cfg.LeaseSize < 0 {
		return nil, fmt.Errorf("%w: Instances, Timeout, LeaseSize, LeaseTTL and the breaker settings must not be negative", ErrInvalidConfig)
	}
	if cfg.Mode > Lease || cfg.Fallback > FailClosed {
		return nil, fmt.Errorf("%w: unknown Mode or Fallback", ErrInvalidConfig)
	}
	cfg.Instances = max(cfg.Instances, 1)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.LeaseSize == 0 {
		cfg.LeaseSize = max(1, p.Burst/10)
	}
	if cfg.LeaseSize > p.Burst {
		return nil, fmt.Errorf("%w: LeaseSize %d exceeds Burst %d", ErrInvalidConfig, cfg.LeaseSize, p.Burst)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = max(10*time.Millisecond, time.Duration(float64(cfg.LeaseSize)/p.Rate*float64(time.Second)))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	T := 1e6 / p.Rate
	q := &Quota{
		policy: p, client: cfg.Client, prefix: cfg.Prefix + p.Name + ":",
		mode: cfg.Mode, leaseSize: cfg.LeaseSize, leaseTTL: cfg.LeaseTTL,
		timeout: cfg.Timeout, fallback: cfg.Fallback, now: cfg.Now, logger: cfg.Logger, instances: cfg.Instances,
		argT:   strconv.FormatFloat(T, 'f', -1, 64),
		argTau: strconv.FormatFloat(T*float64(p.Burst), 'f', -1, 64),
	}
	if cfg.Fallback == FailOpen {
		// Each instance may admit its share of the fleet's quota on its
		// own: together no more than the whole, as long as Instances is
		// right.
		q.local, err = quota.New(quota.Config{
			Name:    p.Name,
			Rate:    cfg.Rate / float64(cfg.Instances),
			Burst:   max(1, p.Burst/cfg.Instances),
			MaxKeys: cfg.MaxKeys,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: fallback share: %v", ErrInvalidConfig, err)
		}
	}
	if cfg.Mode == Lease {
		size := cfg.MaxKeys
		if size == 0 {
			size = quota.DefaultMaxKeys
		}
		q.leases, _ = lru.New[string, *lease](size)
	}
	q.breaker = newBreaker(p.Name, cfg.BreakerFailures, cfg.BreakerCooldown, cfg.Logger)
	return q, nil
}

// Breaker returns the breaker that keeps a dead Redis from being called,
// for metrics: it is a breaker like any other (package breaker), named
// after the quota with ".redis" appended. Its refusals are not the
// quota's: while it is open the quota decides by its Fallback.
func (q *Quota) Breaker() *breaker.Breaker { return q.breaker.Breaker }

// Shape returns the fleet-wide quota's name, rate and burst.
func (q *Quota) Shape() quota.Shape { return q.policy }

// Allow spends one token of key's shared bucket; see Decide.
func (q *Quota) Allow(ctx context.Context, key string) error {
	_, err := q.Decide(ctx, key, 1)
	return err
}

// Decide spends cost tokens (cost < 1 counts as 1) of key's fleet-wide
// bucket, or refuses with a *admit.RejectedError: reason rate with
// RetryAfter from Redis's GCRA state, reason breaker_open when Redis is
// unreachable and Fallback is FailClosed, reason canceled or deadline
// when ctx ended first. It returns within Config.Timeout plus a local
// decision: a slow or dead Redis falls back, it never hangs the caller.
func (q *Quota) Decide(ctx context.Context, key string, cost int) (quota.Decision, error) {
	cost = max(cost, 1)
	if cost > q.policy.Burst {
		return quota.Decision{}, fmt.Errorf("%w: quota %q: cost %d, burst %d", quota.ErrCostOverBurst, q.policy.Name, cost, q.policy.Burst)
	}
	if q.mode == Lease {
		return q.decideLease(ctx, key, cost)
	}
	r, err := q.call(ctx, key, cost, cost)
	if err != nil {
		return q.decideFallback(ctx, key, cost, err)
	}
	return q.result(r, cost)
}

type reply struct {
	granted   int
	retry     time.Duration
	remaining int
	reset     time.Duration
}

// call runs the GCRA script through the breaker within the timeout.
func (q *Quota) call(ctx context.Context, key string, minTokens, maxTokens int) (reply, error) {
	return q.callUntil(ctx, time.Now().Add(q.timeout), key, minTokens, maxTokens)
}

// callUntil is call with the deadline of the decision it serves: a call
// that runs out of it counts against Redis, one whose caller left does
// not.
func (q *Quota) callUntil(ctx context.Context, deadline time.Time, key string, minTokens, maxTokens int) (reply, error) {
	c, err := q.breaker.Allow()
	if err != nil {
		return reply{}, err // open, or half-open with its probe in flight
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	vals, err := gcraScript.Run(cctx, q.client, []string{q.prefix + key},
		q.argT, q.argTau, minTokens, maxTokens, q.now().UnixMicro()).Int64Slice()
	cancel()
	if err == nil && len(vals) != 5 {
		err = fmt.Errorf("redisquota: script returned %d values, want 5", len(vals))
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, redis.Nil) {
			// The caller left: not Redis's fault, so not the breaker's.
			q.breaker.done(c, breaker.Ignored)
			return reply{}, ctx.Err()
		}
		q.breaker.done(c, breaker.Failure)
		q.storeErrors.Add(1)
		return reply{}, err
	}
	q.breaker.done(c, breaker.Success)
	q.inFallback.Store(false)
	q.skewMicros.Store(vals[4])
	return reply{
		granted: int(vals[0]), retry: time.Duration(vals[1]) * time.Microsecond,
		remaining: int(vals[2]), reset: time.Duration(vals[3]) * time.Microsecond,
	}, nil
}

func (q *Quota) result(r reply, cost int) (quota.Decision, error) {
	d := quota.Decision{Remaining: r.remaining, Reset: r.reset}
	if r.granted == 0 {
		q.fleetLimited.Add(1)
		return d, admit.NewRejectedError(q.policy.Name, "", admit.ReasonRate,
			int64(q.policy.Burst-r.remaining), int64(q.policy.Burst), r.retry)
	}
	q.fleetAllowed.Add(1)
	return d, nil
}

// decideLease spends from this instance's lease for key, taking a new
// lease from Redis when the old one is spent or expired. It returns within
// Timeout of its call plus a local decision, however many decisions for
// the key arrive together: one of them fetches, the others wait for that
// fetch (never longer than their own Timeout) and share its outcome, so a
// slow Redis is waited for once per Timeout, not once per request.
func (q *Quota) decideLease(ctx context.Context, key string, cost int) (quota.Decision, error) {
	l := q.leaseFor(key)
	deadline := time.Now().Add(q.timeout)
	for {
		l.mu.Lock()
		now := q.now()
		if !now.Before(l.expires) {
			l.tokens = 0 // left-overs past the TTL are dropped: the bound
		}
		if l.tokens >= cost {
			l.tokens -= cost
			left := l.tokens
			l.spendShare(now, cost)
			l.mu.Unlock()
			q.fleetAllowed.Add(1)
			return quota.Decision{Remaining: left}, nil
		}
		if now.Before(l.emptyUntil) && cost >= l.emptyCost {
			wait := l.emptyUntil.Sub(now)
			l.mu.Unlock()
			q.fleetLimited.Add(1)
			return quota.Decision{Reset: wait}, admit.NewRejectedError(q.policy.Name, "", admit.ReasonRate,
				int64(q.policy.Burst), int64(q.policy.Burst), wait)
		}
		if f := l.fetch; f != nil {
			l.mu.Unlock()
			timer := time.NewTimer(time.Until(deadline))
			select {
			case <-f.done:
				timer.Stop()
				if f.err != nil {
					return q.decideShare(ctx, l, key, cost, f.err)
				}
				continue // tokens arrived, or a refusal to remember: look again
			case <-timer.C:
				return q.decideShare(ctx, l, key, cost, context.DeadlineExceeded)
			case <-ctx.Done():
				timer.Stop()
				return q.decideShare(ctx, l, key, cost, ctx.Err())
			}
		}
		if !time.Now().Before(deadline) {
			// Out of time after waiting for others' fetches: a call now
			// could only time out, and would count against Redis.
			l.mu.Unlock()
			return q.decideShare(ctx, l, key, cost, context.DeadlineExceeded)
		}
		// Fetch: take what is left of the old lease and ask for the rest,
		// plus what the share admitted while Redis could not be asked:
		// that is paid first, so nothing the share admitted is admitted
		// again from the shared bucket.
		have := l.tokens
		owed := min(l.owed, q.policy.Burst-(cost-have))
		l.tokens = 0
		f := &leaseFetch{done: make(chan struct{})}
		l.fetch = f
		l.mu.Unlock()

		q.leaseCalls.Add(1)
		r, err := q.callUntil(ctx, deadline, key, cost-have+owed, max(q.leaseSize, cost)-have+owed)

		l.mu.Lock()
		l.fetch, f.err = nil, err
		close(f.done)
		if err != nil || r.granted == 0 {
			l.tokens += have
			if err == nil {
				// Remember the refusal for this cost or more until Redis
				// said the bucket refills.
				l.emptyUntil, l.emptyCost = now.Add(r.retry), cost
			}
			l.mu.Unlock()
			if err != nil {
				return q.decideShare(ctx, l, key, cost, err)
			}
			return q.result(r, cost)
		}
		l.owed -= owed // waiters that fell back meanwhile owe the rest
		l.tokens = have + r.granted - cost - owed
		l.expires = now.Add(q.leaseTTL)
		l.spendShare(now, cost)
		left := l.tokens
		l.mu.Unlock()
		q.fleetAllowed.Add(1)
		return quota.Decision{Remaining: r.remaining + left, Reset: r.reset}, nil
	}
}

// leaseFor returns key's lease, creating it.
func (q *Quota) leaseFor(key string) *lease {
	if l, ok := q.leases.Get(key); ok {
		return l
	}
	fresh := new(lease)
	if q.fallback == FailOpen {
		fresh.share = rate.NewLimiter(rate.Limit(q.policy.Rate/float64(q.instances)), max(1, q.policy.Burst/q.instances))
	}
	// PeekOrAdd is atomic: two goroutines that miss together end up with
	// the same lease.
	if prev, found, _ := q.leases.PeekOrAdd(key, fresh); found {
		return prev
	}
	return fresh
}

// spendShare charges a fleet admission to the share, as far as it has
// tokens (it never goes into debt): the share then holds only what the
// fleet has not spent here lately, so a fallback after busy fleet
// decisions does not start from a full bucket. Called with l.mu held.
func (l *lease) spendShare(now time.Time, cost int) {
	if l.share != nil {
		l.share.AllowN(now, cost)
	}
}

// decideShare is Lease mode's fallback: err says why Redis did not
// decide. The caller's own end is a refusal (canceled or deadline);
// otherwise FailClosed refuses and FailOpen decides with the key's share,
// owing what it admits to the shared bucket.
func (q *Quota) decideShare(ctx context.Context, l *lease, key string, cost int, err error) (quota.Decision, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return q.decideFallback(ctx, key, cost, ctxErr) // the caller's own end
	}
	if l.share == nil {
		return q.decideFallback(ctx, key, cost, err)
	}
	q.inFallback.Store(true)
	q.fallbacks.Add(1)
	l.mu.Lock()
	now := q.now()
	ok := l.share.AllowN(now, cost)
	if ok {
		l.owed = min(l.owed+cost, q.policy.Burst)
	}
	tokens := l.share.TokensAt(now)
	l.mu.Unlock()
	share := max(1, q.policy.Burst/q.instances)
	if ok {
		q.shareAllowed.Add(1)
		return quota.Decision{Remaining: max(int(tokens), 0)}, nil
	}
	q.shareLimited.Add(1)
	wait := time.Duration((float64(cost) - tokens) / float64(l.share.Limit()) * float64(time.Second))
	return quota.Decision{}, admit.NewRejectedError(q.policy.Name, "", admit.ReasonRate,
		int64(share)-int64(max(tokens, 0)), int64(share), wait)
}

func (q *Quota) decideFallback(ctx context.Context, key string, cost int, err error) (quota.Decision, error) {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		reason := admit.ReasonCanceled
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			reason = admit.ReasonDeadline
		}
		return quota.Decision{}, admit.NewRejectedError(q.policy.Name, "", reason, 0, 0, time.Second)
	}
	q.inFallback.Store(true)
	q.fallbacks.Add(1)
	if q.local == nil {
		q.rejectedStore.Add(1)
		return quota.Decision{}, admit.NewRejectedError(q.policy.Name, "", admit.ReasonBreakerOpen, 0, int64(q.policy.Burst), time.Second)
	}
	return q.local.Decide(ctx, key, cost)
}

// State is a fleet quota's condition, for /state.
type State struct {
	Quota    string  `json:"quota"`
	Mode     string  `json:"mode"`     // "fleet" or "fallback"
	Spend    string  `json:"spend"`    // "exact" or "lease"
	Fallback string  `json:"fallback"` // "open" or "closed"
	Breaker  string  `json:"breaker"`  // "closed", "half_open" or "open"
	Rate     float64 `json:"rate"`
	Burst    int     `json:"burst"`
	// ClockSkew is how far Redis's clock was ahead of this instance's at
	// the last call. It does not affect decisions (Redis's clock decides);
	// it is reported so a skewed host can be found.
	ClockSkew time.Duration `json:"clock_skew_ns"`
}

// State returns the quota's condition.
func (q *Quota) State() State {
	mode := quota.ModeFleet
	if q.inFallback.Load() || q.breaker.State() != breaker.Closed {
		mode = quota.ModeFallback
	}
	return State{
		Quota: q.policy.Name, Mode: mode, Spend: q.mode.String(), Fallback: q.fallback.String(),
		Breaker: q.breaker.State().String(), Rate: q.policy.Rate, Burst: q.policy.Burst,
		ClockSkew: time.Duration(q.skewMicros.Load()) * time.Microsecond,
	}
}

// Stats returns the quota's counters: fleet decisions plus those of the
// fallback share. Keys counts the lease table (Lease mode) or the
// fallback table.
func (q *Quota) Stats() quota.Stats {
	st := quota.Stats{
		Quota: q.policy.Name, Mode: q.State().Mode,
		Allowed: q.fleetAllowed.Load(), Limited: q.fleetLimited.Load(),
		RejectedStore: q.rejectedStore.Load(), FallbackDecisions: q.fallbacks.Load(),
		StoreErrors: q.storeErrors.Load(), Breaker: q.breaker.State().String(),
	}
	st.Allowed += q.shareAllowed.Load()
	st.Limited += q.shareLimited.Load()
	if q.local != nil {
		ls := q.local.Stats()
		st.Allowed += ls.Allowed
		st.Limited += ls.Limited
		st.RejectedFull = ls.RejectedFull
		st.Keys, st.MaxKeys = ls.Keys, ls.MaxKeys
		st.EvictedIdle, st.EvictedLRU = ls.EvictedIdle, ls.EvictedLRU
		st.WhenFull = ls.WhenFull
	}
	if q.leases != nil {
		st.Keys = q.leases.Len()
	}
	return st
}

// LeaseCalls returns how many round trips Lease mode has made; with
// Stats().Allowed it gives the decisions per round trip.
func (q *Quota) LeaseCalls() uint64 { return q.leaseCalls.Load() }

// storeBreaker is the breaker that keeps a dead Redis from being called,
// with the quota's own log lines for its state changes (the breaker's
// would say less: not what the quota does meanwhile).
type storeBreaker struct {
	*breaker.Breaker
	cooldown time.Duration
	logger   *slog.Logger
	open     atomic.Bool // last logged as open
}

// newBreaker returns the store breaker for the quota or slots called
// name: failures consecutive failures (0: DefaultBreakerFailures) open
// it for cooldown (0: DefaultBreakerCooldown), then one probe decides.
func newBreaker(name string, failures int, cooldown time.Duration, logger *slog.Logger) *storeBreaker {
	if failures == 0 {
		failures = DefaultBreakerFailures
	}
	if cooldown == 0 {
		cooldown = DefaultBreakerCooldown
	}
	b, err := breaker.New(breaker.Config{
		Name:                name + ".redis",
		ConsecutiveFailures: failures,
		FailureRatio:        -1, // only failures in a row open it
		OpenFor:             cooldown,
		Probes:              1,
	})
	if err != nil {
		panic(err) // the settings were checked by New and NewSlots
	}
	return &storeBreaker{Breaker: b, cooldown: cooldown, logger: logger}
}

// done ends c with r and logs a change between open and closed.
func (b *storeBreaker) done(c breaker.Call, r breaker.Result) {
	c.Done(r)
	if b.logger == nil || r == breaker.Ignored {
		return
	}
	switch st := b.State(); {
	case st == breaker.Open && b.open.CompareAndSwap(false, true):
		b.logger.Warn("Redis unreachable; breaker open, deciding without it", "name", b.Name(), "cooldown", b.cooldown)
	case st == breaker.Closed && b.open.CompareAndSwap(true, false):
		b.logger.Info("Redis reachable again; breaker closed", "name", b.Name())
	}
}
