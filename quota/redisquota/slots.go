package redisquota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/breaker"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota"
)

// Defaults for zero SlotsConfig fields.
const (
	DefaultSlotTTL = 10 * time.Second
	// DefaultSlotPrefix is put before the gate's name to make the Redis
	// key of its sorted set of entries.
	DefaultSlotPrefix = "sluice:slots:"
)

// acquireScript takes one slot if fewer than capacity unexpired entries
// exist. Entries are members of a sorted set scored by their expiry in
// milliseconds of Redis's clock; expired ones are purged first, which is
// how a crashed holder's slots come back.
//
//	KEYS[1] the set; ARGV[1] capacity; ARGV[2] TTL ms; ARGV[3] member
//
// It returns {1, held} or {0, held}.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[1]) then return {0, n} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return {1, n + 1}
`)

// renewScript pushes the expiry of the given members (those still
// present) to now + TTL and returns how many it renewed.
//
//	KEYS[1] the set; ARGV[1] TTL ms; ARGV[2..] members
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  n = n + redis.call('ZADD', KEYS[1], 'XX', 'CH', exp, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return n
`)

// SlotsConfig configures fleet Slots. Client is required; every other
// zero field has a default.
type SlotsConfig struct {
	// Name is the gate's name: refusals, metrics, and the Redis key. Empty
	// means "slots"; see quota.CheckName.
	Name string
	// Capacity is the number of slots the whole fleet shares. Zero or
	// negative is invalid.
	Capacity int64
	Client   redis.UniversalClient
	// Prefix is put before Name to make the Redis key. Empty means
	// DefaultSlotPrefix.
	Prefix string
	// TTL is an entry's lifetime without renewal: a holder that dies
	// without releasing gives its slots back within TTL. Held entries are
	// renewed every TTL/3. Zero means DefaultSlotTTL; it must be at least
	// 30 ms.
	TTL time.Duration
	// Timeout bounds each Redis call. Zero means DefaultTimeout; negative
	// is invalid.
	Timeout time.Duration
	// BreakerFailures consecutive failed acquisitions open a breaker:
	// for BreakerCooldown acquisitions are refused (breaker_open) without
	// calling Redis, then one probe decides. Zero means the defaults of
	// Config; negative is invalid.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Logger receives warnings about failed renewals and releases. Nil
	// means silent.
	Logger *slog.Logger
}

// Slots is a concurrency gate whose slots live in Redis as entries of a
// sorted set, each with an expiry, so many instances share one capacity
// (50 connections to one database across 10 instances). It follows
// admit's contract: TryAcquire returns a *SlotPermit that must be released
// exactly once with Done, or a *admit.RejectedError (reason full when
// every slot is taken, breaker_open when Redis cannot be reached: fail
// closed, since an uncounted slot is exactly what the gate exists to
// prevent; after BreakerFailures such failures a breaker refuses without
// calling Redis until a probe succeeds). A goroutine renews the entries
// of the slots this instance holds; Close stops it. Safe for concurrent
// use.
type Slots struct {
	name     string
	key      string
	capacity int64
	client   redis.UniversalClient
	ttl      time.Duration
	timeout  time.Duration
	logger   *slog.Logger
	idPrefix string
	seq      atomic.Uint64
	breaker  *storeBreaker

	mu     sync.Mutex
	held   map[string]struct{} // members of slots not yet released
	closed bool

	stop chan struct{}
	done chan struct{}

	admitted, lost atomic.Uint64
	rejected       [admit.NumReasons]atomic.Uint64
	completed      [admit.NumOutcomes]atomic.Uint64
}

// NewSlots returns fleet Slots for cfg and starts its renewal goroutine,
// or returns an error wrapping ErrInvalidConfig.
func NewSlots(cfg SlotsConfig) (*Slots, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client is nil", ErrInvalidConfig)
	}
	if cfg.Name == "" {
		cfg.Name = "slots"
	}
	if err := quota.CheckName(cfg.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if cfg.Capacity <= 0 {
		return nil, fmt.Errorf("%w: Capacity %d must be at least 1", ErrInvalidConfig, cfg.Capacity)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultSlotTTL
	}
	if cfg.TTL < 30*time.Millisecond {
		return nil, fmt.Errorf("%w: TTL %v must be at least 30ms", ErrInvalidConfig, cfg.TTL)
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: Timeout %v must not be negative", ErrInvalidConfig, cfg.Timeout)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultSlotPrefix
	}
	if cfg.BreakerFailures < 0 || cfg.BreakerCooldown < 0 {
		return nil, fmt.Errorf("%w: breaker settings must not be negative", ErrInvalidConfig)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Slots{
		name: cfg.Name, key: cfg.Prefix + cfg.Name, capacity: cfg.Capacity, client: cfg.Client,
		ttl: cfg.TTL, timeout: cfg.Timeout, logger: cfg.Logger,
		idPrefix: hex.EncodeToString(id[:]) + ":",
		held:     make(map[string]struct{}),
		stop:     make(chan struct{}), done: make(chan struct{}),
		breaker: newBreaker(cfg.Name, cfg.BreakerFailures, cfg.BreakerCooldown, cfg.Logger),
	}
	go s.renewLoop()
	return s, nil
}

// Name returns the gate's name.
func (s *Slots) Name() string { return s.name }

// Breaker returns the breaker that keeps a dead Redis from being called
// (named after the slots with ".redis" appended), for metrics. While it
// is open, acquisitions are refused with breaker_open.
func (s *Slots) Breaker() *breaker.Breaker { return s.breaker.Breaker }

// Capacity returns the fleet-wide number of slots.
func (s *Slots) Capacity() int64 { return s.capacity }

// A SlotPermit is the proof that one fleet slot is held. Release it exactly
// once with Done; later calls do nothing. A SlotPermit must not be copied.
type SlotPermit struct {
	s      *Slots
	member string
	done   atomic.Bool
}

// TryAcquire takes one slot if the fleet has one free now.
func (s *Slots) TryAcquire(ctx context.Context) (*SlotPermit, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, s.refuse(admit.ReasonClosed, 0)
	}
	member := s.idPrefix + strconv.FormatUint(s.seq.Add(1), 36)
	// Record the member before asking, so a renewal racing the grant
	// keeps it alive; forget it if refused.
	s.mu.Lock()
	s.held[member] = struct{}{}
	s.mu.Unlock()
	var vals []int64
	c, err := s.breaker.Allow()
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		vals, err = acquireScript.Run(cctx, s.client, []string{s.key}, s.capacity, s.ttl.Milliseconds(), member).Int64Slice()
		cancel()
		// A full gate is an answer, and a caller that left is not
		// Redis's fault: only other errors count against the breaker.
		switch {
		case err == nil:
			s.breaker.done(c, breaker.Success)
		case ctx.Err() != nil:
			s.breaker.done(c, breaker.Ignored)
		default:
			s.breaker.done(c, breaker.Failure)
		}
	}
	if err != nil || len(vals) != 2 || vals[0] != 1 {
		s.forget(member)
		switch {
		case err == nil && len(vals) == 2:
			return nil, s.refuse(admit.ReasonFull, vals[1])
		case ctx.Err() != nil:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, s.refuse(admit.ReasonDeadline, 0)
			}
			return nil, s.refuse(admit.ReasonCanceled, 0)
		default:
			// The script may have run before the reply was lost; the
			// member is no longer renewed, so such an entry expires
			// within TTL. Calling Redis again here would double the
			// refusal's latency while Redis is failing.
			return nil, s.refuse(admit.ReasonBreakerOpen, 0)
		}
	}
	s.admitted.Add(1)
	return &SlotPermit{s: s, member: member}, nil
}

func (s *Slots) refuse(r admit.Reason, inflight int64) *admit.RejectedError {
	s.rejected[r].Add(1)
	retry := time.Second
	if r == admit.ReasonBreakerOpen {
		retry = s.ttl
	}
	return admit.NewRejectedError(s.name, "", r, inflight, s.capacity, retry)
}

func (s *Slots) forget(member string) {
	s.mu.Lock()
	delete(s.held, member)
	s.mu.Unlock()
}

// release removes member's entry from Redis; if that fails the entry
// expires within TTL, since it is no longer renewed.
func (s *Slots) release(member string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if err := s.client.ZRem(ctx, s.key, member).Err(); err != nil && s.logger != nil {
		s.logger.Warn("slots: release failed; the slot returns when its entry expires", "gate", s.name, "ttl", s.ttl, "err", err)
	}
}

// Done releases the slot and records how the work ended. Only the first
// call releases; later calls do nothing and report false.
func (l *SlotPermit) Done(o admit.Outcome) bool {
	if l == nil || !l.done.CompareAndSwap(false, true) {
		return false
	}
	l.s.forget(l.member)
	l.s.release(l.member)
	if int(o) < admit.NumOutcomes {
		l.s.completed[o].Add(1)
	}
	return true
}

func (s *Slots) renewLoop() {
	defer close(s.done)
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.renew()
		}
	}
}

func (s *Slots) renew() {
	s.mu.Lock()
	args := make([]any, 0, len(s.held)+1)
	args = append(args, s.ttl.Milliseconds())
	for m := range s.held {
		args = append(args, m)
	}
	s.mu.Unlock()
	if len(args) == 1 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	// ZADD ... CH counts changed scores: each renewed entry counts once.
	n, err := renewScript.Run(ctx, s.client, []string{s.key}, args...).Int64()
	if err != nil {
		if s.logger != nil {
			s.logger.Warn("slots: renewal failed; held slots expire if it keeps failing", "gate", s.name, "err", err)
		}
		return
	}
	if missing := int64(len(args)-1) - n; missing > 0 {
		// Entries that expired before we renewed them (a pause longer
		// than TTL): the fleet may already have given the slots away.
		s.lost.Add(uint64(missing))
		if s.logger != nil {
			s.logger.Warn("slots: entries expired before renewal", "gate", s.name, "lost", missing)
		}
	}
}

// Close stops renewals and refuses new acquisitions with reason closed.
// Entries still held stay valid until they expire, within TTL; release
// them with Done before Close to return them at once. Close is
// idempotent.
func (s *Slots) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}

// SlotsStats is this instance's view of a fleet gate.
type SlotsStats struct {
	Gate      string            `json:"gate"`
	Capacity  int64             `json:"capacity"`
	Admitted  uint64            `json:"admitted"`
	Rejected  map[string]uint64 `json:"rejected"`
	Completed map[string]uint64 `json:"completed"`
	// Held is the number of entries this instance holds now; Lost counts
	// entries that expired before they were renewed.
	Held int    `json:"held"`
	Lost uint64 `json:"lost"`
	// Breaker is "closed", "half_open" or "open".
	Breaker string `json:"breaker"`
}

// Stats returns this instance's counters.
func (s *Slots) Stats() SlotsStats {
	st := SlotsStats{Gate: s.name, Capacity: s.capacity, Admitted: s.admitted.Load(), Lost: s.lost.Load(),
		Rejected: map[string]uint64{}, Completed: map[string]uint64{}, Breaker: s.breaker.State().String()}
	for r := admit.Reason(1); int(r) < admit.NumReasons; r++ {
		st.Rejected[r.String()] = s.rejected[r].Load()
	}
	for o := admit.Outcome(0); int(o) < admit.NumOutcomes; o++ {
		st.Completed[o.String()] = s.completed[o].Load()
	}
	s.mu.Lock()
	st.Held = len(s.held)
	s.mu.Unlock()
	return st
}

// InUse asks Redis how many unexpired entries the fleet holds now.
func (s *Slots) InUse(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return s.client.ZCount(ctx, s.key, "("+strconv.FormatInt(t.UnixMilli(), 10), "+inf").Result()
}
