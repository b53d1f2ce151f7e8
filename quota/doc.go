// Package quota limits how fast each client may spend: per-key rate quotas
// ("100 requests per second, bursts of 20, per API key") with weighted
// costs, in one process. Package quota/redisquota shares the same quotas
// across a fleet through Redis.
//
// # Usage
//
//	q, err := quota.New(quota.Config{Name: "per-client", Rate: 100, Burst: 20})
//	...
//	if err := q.AllowN(apiKey, cost); err != nil {
//		var re *admit.RejectedError
//		if errors.As(err, &re) && re.Reason() == admit.ReasonRate {
//			// 429; come back after re.RetryAfter()
//		}
//		return err
//	}
//
// At the HTTP edge, httpgate.Quota does this for a handler and answers
// refusals with 429, Retry-After and the RateLimit headers; promsluice
// exports the counters.
//
// # What a quota is, and what it is not
//
// A quota bounds a client's rate: tokens per second, with a bucket of
// Burst tokens so an idle client may spend a little at once. It protects
// fairness between clients and a contract with each of them. It does not
// protect the server from overload: a thousand clients each within their
// quota can still exceed what the server can do at once. That is a gate's
// job (package admit), and the two are used together: the quota first (a
// cheap 429 for the greedy client), the gate at the point of cost (a 503
// when the server is full).
//
// # Parts
//
// Each key has a token bucket: a golang.org/x/time/rate Limiter. Buckets
// live in a bounded key table: up to 64 shards, each a
// hashicorp/golang-lru simplelru list under its own mutex, so one key's
// decision takes one short critical section (lookup, move to front,
// spend) and different keys rarely share a lock. The table never holds
// more than MaxKeys keys:
//
//   - A key unused for IdleTimeout may be dropped. By default IdleTimeout
//     is the bucket's refill time, after which a bucket is full again and
//     indistinguishable from a new one, so dropping it forgives nothing.
//     Idle keys are dropped lazily, from the least recently used end, as
//     new keys arrive (two at most per new key, so the cost stays O(1)), or
//     all at once by Sweep.
//   - A new key that finds the table full is handled by Config.WhenFull:
//     EvictLRU (the default) drops the least recently used key of its
//     shard, which then comes back with a full bucket; RefuseNew refuses
//     the newcomer with reason full (an overload answer, 503) and keeps
//     every known client's bucket. Both are counted (Stats.EvictedLRU,
//     Stats.RejectedFull) and exported as metrics. Eviction is LRU per
//     shard, which approximates global LRU for large tables; tables of up
//     to 1024 keys have one shard and are exact.
//
// A refusal is a *admit.RejectedError with reason rate, so code that
// already handles gate refusals handles quotas. Its RetryAfter is the
// bucket's own refill time for the requested cost: (cost - tokens)/Rate,
// not a constant, so a client told to come back then is admitted then. A
// cost larger than Burst could never be admitted; it returns
// ErrCostOverBurst, a configuration error, not a refusal.
//
// # Why golang.org/x/time/rate and golang-lru
//
// rate.Limiter is the standard token bucket, correct under concurrency,
// with AllowN/TokensAt seams that take the time as an argument (so tests
// and the table share one clock reading per decision). Measured on the
// project's shared 2-core VM (docs/bench/quota.md), a decision for a known
// key costs about the same as a bare Limiter.AllowN on one key, within the
// run's noise, and allocates nothing; the key table is the only addition.
// A hand-written bucket would save the Limiter's own mutex (held inside the
// shard's) but not the clock read that dominates, so it is not worth owning.
// The table uses simplelru (not golang-lru's locked Cache) because the
// shard lock must cover the lookup and the eviction decision together; an
// earlier version with a hand-written sampled LRU was no faster on a hit
// and slower on a miss.
//
// # Concurrency
//
// A Quota is safe for concurrent use. Lock order: a shard's mutex, then
// the key's Limiter's (inside rate). Observers are called without the
// shard's lock, except for evictions.
package quota
