package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// verdict is one descriptor's decision.
type verdict struct {
	over bool
	// remaining is what is left of the limit after this hit (0 when
	// over); reset is how long until the window ends (fixed window) or
	// the bucket is full again (GCRA); retry, when over, how long until
	// the hit could pass.
	remaining uint64
	reset     time.Duration
	retry     time.Duration
}

// counter decides hits of one rule, for any number of keys. hit returns
// an error only when ctx ended first; a store failure is decided by the
// rule's fail policy.
type counter interface {
	hit(ctx context.Context, key string, hits uint64) (verdict, error)
	stats() quota.Stats
	// fleet is the store's condition, nil for an in-process counter.
	fleet() *FleetState
}

// FleetState is a fleet counter's condition, for /state.
type FleetState struct {
	Mode     string `json:"mode"`  // "fleet" or "fallback"
	Spend    string `json:"spend"` // "exact" or "lease"
	Fail     string `json:"fail"`  // "open" or "closed"
	Breaker  string `json:"breaker"`
	Instance int    `json:"instances"`
}

// gcraCounter decides with a quota.Limiter: a local quota.Quota or a
// redisquota.Quota.
type gcraCounter struct {
	lim   quota.Limiter
	burst int
	read  func() quota.Stats
	state func() *FleetState
	// refill is how long an empty bucket takes to fill: the answer for a
	// hit larger than the bucket, which can never pass.
	refill time.Duration
}

func (c *gcraCounter) hit(ctx context.Context, key string, hits uint64) (verdict, error) {
	// GCRA spends at least one token: a check (hits 0) is charged as a
	// hit (see the package doc).
	cost := max(hits, 1)
	if cost > uint64(c.burst) {
		return verdict{over: true, reset: c.refill, retry: c.refill}, nil
	}
	d, err := c.lim.Decide(ctx, key, int(cost))
	if err == nil {
		return verdict{remaining: uint64(max(d.Remaining, 0)), reset: d.Reset}, nil
	}
	var re *admit.RejectedError
	if errors.As(err, &re) {
		switch re.Reason() {
		case admit.ReasonCanceled, admit.ReasonDeadline:
			if ctx.Err() != nil {
				return verdict{}, ctx.Err()
			}
		case admit.ReasonRate:
			return verdict{over: true, reset: max(d.Reset, re.RetryAfter()), retry: re.RetryAfter()}, nil
		}
		// breaker_open: the store is down and the rule fails closed.
		return verdict{over: true, reset: time.Second, retry: time.Second}, nil
	}
	if errors.Is(err, quota.ErrCostOverBurst) {
		return verdict{over: true, reset: c.refill, retry: c.refill}, nil
	}
	return verdict{}, err
}

func (c *gcraCounter) stats() quota.Stats { return c.read() }
func (c *gcraCounter) fleet() *FleetState {
	if c.state == nil {
		return nil
	}
	return c.state()
}

// zeroCounter is a rule of zero requests per unit: every hit is over.
type zeroCounter struct {
	unit    time.Duration
	now     func() time.Time
	limited atomic.Uint64
}

func (c *zeroCounter) hit(context.Context, string, uint64) (verdict, error) {
	c.limited.Add(1)
	left := windowLeft(c.now(), c.unit)
	return verdict{over: true, reset: left, retry: left}, nil
}
func (c *zeroCounter) stats() quota.Stats {
	return quota.Stats{Mode: quota.ModeLocal, Limited: c.limited.Load()}
}
func (c *zeroCounter) fleet() *FleetState { return nil }

// windowLeft is how long until the fixed window of length w that holds
// now ends, windows aligned to the Unix epoch as the reference server
// aligns them.
func windowLeft(now time.Time, w time.Duration) time.Duration {
	ns := now.UnixNano()
	return w - time.Duration(ns%int64(w))
}

// fixedLocal counts hits in epoch-aligned fixed windows in this process,
// one entry per key in a bounded LRU table.
type fixedLocal struct {
	limit   uint64
	window  time.Duration
	now     func() time.Time
	entries *lru.Cache[string, *fixedEntry]
	max     int

	allowed, limited atomic.Uint64
}

type fixedEntry struct {
	mu    sync.Mutex
	start int64 // window start, Unix nanoseconds
	n     uint64
}

func newFixedLocal(limit uint64, window time.Duration, maxKeys int, now func() time.Time) *fixedLocal {
	c, _ := lru.New[string, *fixedEntry](maxKeys)
	return &fixedLocal{limit: limit, window: window, now: now, entries: c, max: maxKeys}
}

func (c *fixedLocal) hit(_ context.Context, key string, hits uint64) (verdict, error) {
	e, ok := c.entries.Get(key)
	if !ok {
		fresh := new(fixedEntry)
		if prev, found, _ := c.entries.PeekOrAdd(key, fresh); found {
			e = prev
		} else {
			e = fresh
		}
	}
	now := c.now().UnixNano()
	w := int64(c.window)
	start := now - now%w
	e.mu.Lock()
	if e.start != start {
		e.start, e.n = start, 0
	}
	e.n = satAdd(e.n, hits)
	after := e.n
	e.mu.Unlock()
	return c.judge(after, time.Duration(start+w-now)), nil
}

// judge turns a window's count after the hit into a verdict, as the
// reference server does: over when the count passed the limit.
func (c *fixedLocal) judge(after uint64, left time.Duration) verdict {
	if after > c.limit {
		c.limited.Add(1)
		return verdict{over: true, reset: left, retry: left}
	}
	c.allowed.Add(1)
	return verdict{remaining: c.limit - after, reset: left}
}

func (c *fixedLocal) stats() quota.Stats {
	return quota.Stats{
		Mode: quota.ModeLocal, Allowed: c.allowed.Load(), Limited: c.limited.Load(),
		Keys: c.entries.Len(), MaxKeys: c.max, WhenFull: quota.EvictLRU.String(),
	}
}
func (c *fixedLocal) fleet() *FleetState { return nil }

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// fixedScript counts hits in the fixed window of Redis's clock that holds
// now, in one round trip, on one key (so it runs unchanged on Redis
// Cluster): a hash of the window's start and its count. A hit in a new
// window starts the count again; the key expires when its window ends.
//
//	KEYS[1]  the counter
//	ARGV[1]  window length in microseconds
//	ARGV[2]  hits to add (0: read only)
//
// It returns {count after the hit, microseconds until the window ends}.
var fixedScript = redis.NewScript(`
local w = tonumber(ARGV[1])
local hits = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local start = now - (now % w)
local cur = redis.call('HMGET', KEYS[1], 's', 'n')
local n = 0
if tonumber(cur[1]) == start then n = tonumber(cur[2]) end
n = n + hits
if hits > 0 then
  redis.call('HSET', KEYS[1], 's', string.format('%.0f', start), 'n', string.format('%.0f', n))
  redis.call('PEXPIREAT', KEYS[1], math.ceil((start + w) / 1000) + 1000)
end
return {n, start + w - now}
`)

// fixedRedis counts fixed windows in Redis, shared by every instance,
// with a deadline per call, a breaker, and a fail policy.
type fixedRedis struct {
	client   redis.UniversalClient
	prefix   string
	windowUs string
	timeout  time.Duration
	br       *breaker.Breaker
	share    *fixedLocal // FailOpen: this instance's share; nil with FailClosed
	judge    *fixedLocal // counts the fleet decisions (its table stays empty)
	fail     FailPolicy
	inst     int

	storeErrors, fallbacks, refusedStore atomic.Uint64
	inFallback                           atomic.Bool
}

func (c *fixedRedis) hit(ctx context.Context, key string, hits uint64) (verdict, error) {
	call, err := c.br.Allow()
	if err != nil {
		return c.fallback(ctx, key, hits)
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	vals, err := fixedScript.Run(cctx, c.client, []string{c.prefix + key}, c.windowUs, hits).Int64Slice()
	cancel()
	if err == nil && len(vals) != 2 {
		err = fmt.Errorf("ratelimit: fixed window script returned %d values, want 2", len(vals))
	}
	if err != nil {
		if ctx.Err() != nil {
			call.Done(breaker.Ignored) // the caller left: not Redis's fault
			return verdict{}, ctx.Err()
		}
		call.Done(breaker.Failure)
		c.storeErrors.Add(1)
		return c.fallback(ctx, key, hits)
	}
	call.Done(breaker.Success)
	c.inFallback.Store(false)
	return c.judge.judge(uint64(max(vals[0], 0)), time.Duration(vals[1])*time.Microsecond), nil
}

func (c *fixedRedis) fallback(ctx context.Context, key string, hits uint64) (verdict, error) {
	c.inFallback.Store(true)
	c.fallbacks.Add(1)
	if c.share == nil {
		c.refusedStore.Add(1)
		return verdict{over: true, reset: time.Second, retry: time.Second}, nil
	}
	return c.share.hit(ctx, key, hits)
}

func (c *fixedRedis) mode() string {
	if c.inFallback.Load() || c.br.State() != breaker.Closed {
		return quota.ModeFallback
	}
	return quota.ModeFleet
}

func (c *fixedRedis) stats() quota.Stats {
	st := c.judge.stats()
	st.Mode = c.mode()
	st.FallbackDecisions = c.fallbacks.Load()
	st.StoreErrors = c.storeErrors.Load()
	st.RejectedStore = c.refusedStore.Load()
	st.Breaker = c.br.State().String()
	st.Keys, st.MaxKeys = 0, 0
	if c.share != nil {
		ls := c.share.stats()
		st.Allowed += ls.Allowed
		st.Limited += ls.Limited
		st.Keys, st.MaxKeys = ls.Keys, ls.MaxKeys
	}
	return st
}

func (c *fixedRedis) fleet() *FleetState {
	return &FleetState{Mode: c.mode(), Spend: "exact", Fail: c.fail.String(), Breaker: c.br.State().String(), Instance: c.inst}
}

// redisquotaFleet is a redisquota.Quota's condition as a FleetState.
func redisquotaFleet(q *redisquota.Quota, inst int) func() *FleetState {
	return func() *FleetState {
		s := q.State()
		return &FleetState{Mode: s.Mode, Spend: s.Spend, Fail: s.Fallback, Breaker: s.Breaker, Instance: inst}
	}
}
