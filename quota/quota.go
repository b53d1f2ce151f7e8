package quota

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/admit"
)

// Defaults used for zero Config fields.
const (
	// DefaultRate is the rate of a Config whose Rate is zero: 10 tokens
	// per second.
	DefaultRate = 10
	// DefaultMaxKeys bounds the key table of a Config whose MaxKeys is
	// zero.
	DefaultMaxKeys = 100_000
	// MaxNameLen is the longest quota name: names are metric labels and
	// go into every refusal body.
	MaxNameLen = 64
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("quota: invalid config")

// ErrCostOverBurst is returned (not a refusal: a programming or
// configuration error) when one decision asks for more tokens than the
// bucket can ever hold, so no amount of waiting would admit it.
var ErrCostOverBurst = errors.New("quota: cost larger than the burst")

// WhenFull says what happens to a new key when the key table is full and
// no idle key can be evicted.
type WhenFull uint8

const (
	// EvictLRU (the zero value) evicts the least recently used key it
	// samples, so the new key gets a fresh bucket. A flood of new keys
	// cannot grow memory, but it can push out a quiet client's
	// half-spent bucket, which that client then gets back full.
	EvictLRU WhenFull = iota
	// RefuseNew refuses the new key with reason full (an overload
	// refusal, 503 at the HTTP edge) until a key goes idle. Known keys
	// keep their buckets; unknown clients wait.
	RefuseNew
)

// String returns "evict_lru" or "refuse_new".
func (p WhenFull) String() string {
	if p == RefuseNew {
		return "refuse_new"
	}
	return "evict_lru"
}

// Config configures a Quota. The zero Config is valid: a quota named
// "quota" of 10 tokens per second with a burst of 10, at most 100 000 keys,
// idle keys evicted once their bucket has refilled, LRU eviction when full.
type Config struct {
	// Name labels the quota in refusals, metrics and /state: at most 64
	// bytes of [A-Za-z0-9_.-]. Empty means "quota".
	Name string
	// Rate is the sustained rate per key, in tokens per second. Zero
	// means DefaultRate; negative, NaN and +Inf are invalid.
	Rate float64
	// Burst is the bucket size: the most tokens one key can spend at
	// once after being idle. Zero means max(1, ceil(Rate)); negative is
	// invalid.
	Burst int
	// MaxKeys bounds the key table. Zero means DefaultMaxKeys; negative
	// is invalid (there is no unbounded table).
	MaxKeys int
	// IdleTimeout is how long a key may go unused before its entry may be
	// evicted. Zero means the bucket's refill time, Burst/Rate (at least
	// one second): after that a bucket is full again, the same as a new
	// one, so evicting it forgives nothing. Negative means keys are
	// evicted only when the table is full.
	IdleTimeout time.Duration
	// WhenFull is what a new key meets when the table is full.
	WhenFull WhenFull
	// Observer receives one event per decision and per eviction. Nil
	// means none.
	Observer Observer
}

// Shape is a quota as its clients see it: its name, rate and burst (what
// the RateLimit-Policy header announces at the HTTP edge).
type Shape struct {
	Name  string
	Rate  float64 // tokens per second
	Burst int     // bucket size in tokens
}

// RefillTime is how long an empty bucket takes to fill up again.
func (p Shape) RefillTime() time.Duration {
	return durationOf(float64(p.Burst) / p.Rate)
}

// Decision describes an admitted request for rate-limit response headers.
type Decision struct {
	// Remaining is the number of whole tokens left in the key's bucket
	// after the decision.
	Remaining int
	// Reset is how long until the bucket is full again.
	Reset time.Duration
}

// Limiter is what the HTTP middleware and the fleet packages decide with:
// a local *Quota or a fleet quota. Decide spends cost tokens of key's
// bucket or refuses with a *admit.RejectedError (reason rate, RetryAfter
// from the bucket's refill time for cost); other errors (ErrCostOverBurst)
// are not refusals. Implementations are safe for concurrent use.
type Limiter interface {
	Shape() Shape
	Decide(ctx context.Context, key string, cost int) (Decision, error)
}

// A Quota keeps one token bucket per key in a bounded table. It is safe for
// concurrent use. The zero Quota is not usable; call New.
type Quota struct {
	name        string
	limit       rate.Limit
	burst       int
	idleTimeout time.Duration // < 0: never idle-evicted
	whenFull    WhenFull
	maxKeys     int
	observer    Observer
	epoch       time.Time // lastUsed values are nanoseconds since epoch
	seed        maphash.Seed
	shardMask   uint64
	shards      []shard
	fullErr     *admit.RejectedError
}

type shard struct {
	mu  sync.Mutex
	max int
	// Guarded by mu:
	lru     *simplelru.LRU[string, *entry] // most recently used first
	allowed uint64
	limited uint64
	full    uint64   // new keys refused because the table was full
	idle    uint64   // keys evicted for idleness
	evicted uint64   // keys evicted to make room
	_       [64]byte // keep neighbouring shards' locks on separate cache lines
}

type entry struct {
	lim      *rate.Limiter
	lastUsed int64 // nanoseconds since Quota.epoch; guarded by the shard's mu
}

// New returns a Quota for cfg, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Quota, error) {
	if cfg.Name == "" {
		cfg.Name = "quota"
	}
	if err := CheckName(cfg.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	switch {
	case cfg.Rate == 0:
		cfg.Rate = DefaultRate
	case cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0):
		return nil, fmt.Errorf("%w: Rate %v must be a finite number above zero", ErrInvalidConfig, cfg.Rate)
	}
	switch {
	case cfg.Burst == 0:
		cfg.Burst = max(1, int(math.Ceil(cfg.Rate)))
	case cfg.Burst < 0:
		return nil, fmt.Errorf("%w: Burst %d must be 0 (derived) or more", ErrInvalidConfig, cfg.Burst)
	}
	switch {
	case cfg.MaxKeys == 0:
		cfg.MaxKeys = DefaultMaxKeys
	case cfg.MaxKeys < 0:
		return nil, fmt.Errorf("%w: MaxKeys %d must be 0 (default) or more", ErrInvalidConfig, cfg.MaxKeys)
	}
	if cfg.WhenFull > RefuseNew {
		return nil, fmt.Errorf("%w: WhenFull %d: want EvictLRU or RefuseNew", ErrInvalidConfig, cfg.WhenFull)
	}
	p := Shape{Rate: cfg.Rate, Burst: cfg.Burst}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = max(time.Second, p.RefillTime())
	}
	q := &Quota{
		name:        cfg.Name,
		limit:       rate.Limit(cfg.Rate),
		burst:       cfg.Burst,
		idleTimeout: cfg.IdleTimeout,
		whenFull:    cfg.WhenFull,
		maxKeys:     cfg.MaxKeys,
		observer:    cfg.Observer,
		epoch:       time.Now(),
		seed:        maphash.MakeSeed(),
	}
	// One shard per 1024 keys, at most 64: small tables stay one exact
	// shard; big ones spread their lock over many.
	n := 1
	for n < 64 && n*1024 < cfg.MaxKeys {
		n *= 2
	}
	q.shardMask = uint64(n - 1)
	q.shards = make([]shard, n)
	for i := range q.shards {
		// Shard bounds add up to exactly MaxKeys.
		per := cfg.MaxKeys / n
		if i < cfg.MaxKeys%n {
			per++
		}
		// The LRU's own capacity is never reached: lookup makes room
		// first, so every eviction is counted and follows WhenFull.
		q.shards[i].lru, _ = simplelru.NewLRU[string, *entry](per+1, nil)
		q.shards[i].max = per
	}
	q.fullErr = admit.NewRejectedError(q.name, "", admit.ReasonFull, int64(cfg.MaxKeys), int64(cfg.MaxKeys), time.Second)
	return q, nil
}

// CheckName reports whether name can name a quota: 1 to 64 bytes of
// letters, digits, '_', '-' and '.'.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("name %q: want 1 to %d characters", name, MaxNameLen)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("name %q: only letters, digits, '_', '-' and '.' are allowed", name)
		}
	}
	return nil
}

// Name returns the quota's name.
func (q *Quota) Name() string { return q.name }

// Shape returns the quota's name, rate and burst.
func (q *Quota) Shape() Shape { return Shape{Name: q.name, Rate: float64(q.limit), Burst: q.burst} }

// MaxKeys returns the key table's bound.
func (q *Quota) MaxKeys() int { return q.maxKeys }

// Allow spends one token of key's bucket now; see AllowNAt.
func (q *Quota) Allow(key string) error { return q.AllowNAt(key, 1, time.Now()) }

// AllowN spends cost tokens of key's bucket now; see AllowNAt.
func (q *Quota) AllowN(key string, cost int) error { return q.AllowNAt(key, cost, time.Now()) }

// AllowNAt spends cost tokens (cost < 1 counts as 1) of key's bucket at
// time now, or refuses. A refusal is a *admit.RejectedError with reason
// rate whose RetryAfter is when the bucket will hold cost tokens, or reason
// full when the key is new, the table is full and WhenFull is RefuseNew.
// A cost above the burst returns ErrCostOverBurst. A now earlier than the
// key's last decision is read as that decision's time: a bucket's time
// never goes back. For a known key that is admitted it allocates nothing.
func (q *Quota) AllowNAt(key string, cost int, now time.Time) error {
	_, err := q.decide(key, cost, now, false)
	return err
}

// Decide is AllowN with the bucket's state after the decision, for
// rate-limit response headers. ctx is unused: a local decision never
// waits.
func (q *Quota) Decide(_ context.Context, key string, cost int) (Decision, error) {
	return q.decide(key, cost, time.Now(), true)
}

// DecideAt is Decide at time now.
func (q *Quota) DecideAt(key string, cost int, now time.Time) (Decision, error) {
	return q.decide(key, cost, now, true)
}

func (q *Quota) decide(key string, cost int, now time.Time, wantState bool) (Decision, error) {
	cost = max(cost, 1)
	if cost > q.burst {
		return Decision{}, fmt.Errorf("%w: quota %q: cost %d, burst %d", ErrCostOverBurst, q.name, cost, q.burst)
	}
	s := &q.shards[maphash.String(q.seed, key)&q.shardMask]
	// One critical section per decision: the shard's lock covers the
	// lookup, the bucket and the counters.
	s.mu.Lock()
	e := q.lookup(s, key, now)
	if e == nil {
		s.full++
		s.mu.Unlock()
		q.observe(Event{Quota: q.name, Cost: cost, Reason: admit.ReasonFull})
		return Decision{}, q.fullErr
	}
	// Decisions on one key must see time move forward: Allow reads the
	// clock before it waits for the lock, so a decision can arrive with an
	// earlier time than the one before it, and x/time/rate would move its
	// bucket back to that time and credit the same interval again.
	if last := q.epoch.Add(time.Duration(e.lastUsed)); now.Before(last) {
		now = last
	}
	if e.lim.AllowN(now, cost) {
		s.allowed++
		var tokens float64
		if wantState {
			tokens = e.lim.TokensAt(now)
		}
		s.mu.Unlock()
		if q.observer != nil {
			q.observer.ObserveQuota(Event{Quota: q.name, Cost: cost, Allowed: true})
		}
		if !wantState {
			return Decision{}, nil
		}
		return Decision{Remaining: max(int(tokens), 0), Reset: q.resetFrom(tokens)}, nil
	}
	s.limited++
	tokens := e.lim.TokensAt(now)
	s.mu.Unlock()
	wait := durationOf((float64(cost) - tokens) / float64(q.limit))
	re := admit.NewRejectedError(q.name, "", admit.ReasonRate, int64(q.burst)-int64(max(tokens, 0)), int64(q.burst), wait)
	q.observe(Event{Quota: q.name, Cost: cost, Reason: admit.ReasonRate, RetryAfter: wait})
	return Decision{Remaining: max(int(tokens), 0), Reset: q.resetFrom(tokens)}, re
}

func (q *Quota) resetFrom(tokens float64) time.Duration {
	return durationOf((float64(q.burst) - tokens) / float64(q.limit))
}

func (q *Quota) observe(ev Event) {
	if q.observer != nil {
		q.observer.ObserveQuota(ev)
	}
}

// durationOf converts seconds to a Duration, rounding up to the next
// nanosecond so a wait is never reported shorter than it is.
func durationOf(sec float64) time.Duration {
	if sec <= 0 {
		return 0
	}
	if sec > float64(math.MaxInt64)/1e9 {
		return math.MaxInt64
	}
	return time.Duration(math.Ceil(sec * 1e9))
}

// lookup returns key's entry, creating it (and making room) if needed
// (s.mu held). It returns nil when the table is full and WhenFull is
// RefuseNew.
func (q *Quota) lookup(s *shard, key string, now time.Time) *entry {
	ns := int64(now.Sub(q.epoch))
	if e, ok := s.lru.Get(key); ok { // Get moves key to the front
		e.lastUsed = max(e.lastUsed, ns)
		return e
	}
	q.evictIdle(s, ns, 2)
	if s.lru.Len() >= s.max {
		if q.whenFull == RefuseNew {
			return nil
		}
		s.lru.RemoveOldest()
		s.evicted++
		q.observe(Event{Quota: q.name, Evicted: EvictedLRU})
	}
	e := &entry{lim: rate.NewLimiter(q.limit, q.burst), lastUsed: ns}
	s.lru.Add(key, e)
	return e
}

// evictIdle drops up to n keys idle for IdleTimeout from the old end of
// s (s.mu held). Called with a small n on every new key, it keeps the
// table near the set of active keys at O(1) cost per decision.
func (q *Quota) evictIdle(s *shard, ns int64, n int) int {
	if q.idleTimeout < 0 {
		return 0
	}
	done := 0
	for ; done < n; done++ {
		_, e, ok := s.lru.GetOldest()
		if !ok || ns-e.lastUsed < int64(q.idleTimeout) {
			break
		}
		s.lru.RemoveOldest()
		s.idle++
		q.observe(Event{Quota: q.name, Evicted: EvictedIdle})
	}
	return done
}

// Sweep evicts every key idle for IdleTimeout at time now and returns how
// many it evicted. Decisions evict idle keys lazily as new keys arrive;
// Sweep is for callers that want memory back sooner (a ticker) and for
// tests.
func (q *Quota) Sweep(now time.Time) int {
	ns := int64(now.Sub(q.epoch))
	n := 0
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		n += q.evictIdle(s, ns, math.MaxInt)
		s.mu.Unlock()
	}
	return n
}

// Len returns the number of keys in the table.
func (q *Quota) Len() int {
	n := 0
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		n += s.lru.Len()
		s.mu.Unlock()
	}
	return n
}

// Stats returns the quota's counters, read shard by shard: under load each
// shard's figures are consistent, the sum is not one instant's snapshot.
func (q *Quota) Stats() Stats {
	st := Stats{Quota: q.name, Mode: ModeLocal, MaxKeys: q.maxKeys, WhenFull: q.whenFull.String()}
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		st.Allowed += s.allowed
		st.Limited += s.limited
		st.RejectedFull += s.full
		st.EvictedIdle += s.idle
		st.EvictedLRU += s.evicted
		st.Keys += s.lru.Len()
		s.mu.Unlock()
	}
	return st
}
