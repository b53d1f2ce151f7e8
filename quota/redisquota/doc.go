// Package redisquota shares rate quotas and concurrency slots across a
// fleet of instances through Redis.
//
// # Usage
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1})
//	q, err := redisquota.New(redisquota.Config{
//		Name: "per-client", Rate: 100, Burst: 20, Client: client,
//		Instances: 10, // for the fail-open share
//	})
//	...
//	if _, err := q.Decide(ctx, apiKey, cost); err != nil { ... } // *admit.RejectedError, reason rate
//
//	db, err := redisquota.NewSlots(redisquota.SlotsConfig{Name: "orders-db", Capacity: 50, Client: client})
//	defer db.Close()
//	slot, err := db.TryAcquire(ctx) // a *SlotPermit, or *admit.RejectedError, reason full, when the fleet holds 50
//	if err != nil { ... }
//	defer slot.Done(admit.OutcomeOK)
//
// A *Quota is a quota.Limiter, so httpgate.Quota serves it exactly like a
// local quota.
//
// # Fleet quotas: GCRA on Redis's clock
//
// Each key is one Redis string holding a GCRA theoretical arrival time
// (TAT), in microseconds. A Lua script reads Redis's TIME, spends the
// tokens if the TAT allows and writes the new TAT with an expiry of the
// time it takes to refill: one round trip (EVALSHA) per decision, atomic
// on the server, no read-modify-write race between instances. Redis's
// clock decides, never an instance's: instances whose clocks disagree by
// an hour still share one bucket (State.ClockSkew reports the skew so it
// can be fixed, but it changes nothing). The refusal's RetryAfter is the
// GCRA's own answer: when the bucket will hold the requested cost.
//
// # Lease mode
//
// Exact mode costs a round trip per decision. Lease mode (Config.Mode)
// takes LeaseSize tokens (Burst/10 by default) at once from the same
// script and spends them locally, so a busy key costs a round trip per
// LeaseSize decisions. Refusals are remembered until the time Redis gave,
// so a client over its quota does not cost a round trip per request
// either. What it costs in accuracy:
//
//   - Over-admission. Redis never grants more than the bucket holds, so
//     what the fleet admits in any window W is at most
//     Burst + Rate*W + Instances*LeaseSize: the last term is tokens leased
//     before the window and spent inside it (an instance holds at most
//     one lease, at most LeaseSize tokens, per key). Exact mode has the
//     same bound without that term.
//   - Staleness. Leased tokens not spent within LeaseTTL (the time
//     LeaseSize tokens take to refill, by default) are dropped, so an
//     instance never spends tokens the fleet granted long ago.
//   - Unfairness. Tokens leased by an idle instance are not available to
//     the others until they expire: a lease's tokens are under-used, never
//     over-used.
//
// When the bucket is nearly empty, grants shrink to what it holds, so
// under saturation lease mode degrades to one round trip per admitted
// request (still never more than exact mode).
//
// The bound holds through a slow, stalled or flapping Redis too, for a
// fleet whose Instances is right. In lease mode each key's fallback share
// (below) belongs to its lease, and the two are kept from adding up:
// every admission made from the fleet also spends from the share (as far
// as it has tokens), so a share is empty after busy fleet decisions rather
// than full when Redis goes away; and what the share admits is owed to
// the shared bucket, so the next lease must cover that debt (up to Burst)
// before it covers a cost. A client whose share admitted it while Redis
// was away is therefore refused by Redis afterwards until its bucket has
// paid for those admissions.
//
// Decisions for one key never queue behind one another's round trips:
// one of them fetches the next lease, without holding the lease's lock;
// the others wait for that fetch, each at most until its own Timeout has
// passed since it arrived, and when it fails they all fall back at once.
// A decision takes at most Timeout plus a local decision, however many
// arrive together while Redis stalls.
//
// # When Redis is slow or down
//
// Every call has a deadline (Config.Timeout, 50 ms by default). A call
// that fails or times out is decided by Config.Fallback:
//
//   - FailOpen: a local bucket of this instance's share, Rate and Burst
//     divided by Config.Instances (a quota.Quota in exact mode, one bucket
//     per lease in lease mode). With Instances right, the fleet together
//     admits no more than the quota while Redis is away; with it too low,
//     up to Instances-times too much.
//   - FailClosed: refuse with reason breaker_open (503 at the edge).
//
// A circuit breaker (package breaker, with ConsecutiveFailures) opens
// after BreakerFailures consecutive failures: while open, decisions go
// straight to the fallback without dialling, so a dead Redis is not
// hammered and callers do not pay the timeout. After BreakerCooldown one
// probe is let through; success closes the breaker and fleet mode resumes
// by itself. A call whose caller left counts neither way. State and Stats
// report the mode (fleet or fallback) and the breaker's state; Breaker
// returns the breaker itself, which promsluice exports under the same
// sluice_breaker_* metrics as every other breaker (named after the quota,
// with ".redis" appended). A caller whose own context ends is refused with reason
// canceled or deadline and does not count against Redis.
//
// # Fleet slots
//
// Slots is a concurrency gate across instances: "at most 50 connections to
// the orders database", wherever they come from. Its slots are members of
// one Redis sorted set, scored by their expiry on Redis's clock. Acquiring
// runs a script that purges expired members, counts, and adds one if there
// is room. A goroutine renews this instance's members every TTL/3; a
// holder that crashes stops renewing, and its slots are purged within TTL
// by the next acquisition. Release (SlotPermit.Done) removes the member at
// once, exactly once: a second Done does nothing, and a member is never
// reused, so a late Done cannot free someone else's slot. Refusals are
// *admit.RejectedError: full when the fleet is at capacity, breaker_open
// when Redis cannot be reached (slots fail closed: an uncounted slot is
// what the gate exists to prevent), with the same breaker as quotas.
//
// A slot is held only while its entry is renewed. An instance that cannot
// reach Redis for longer than TTL loses its slots (Stats.Lost) even
// though its work may still run, so choose TTL well above the longest
// Redis outage you want to ride through, and well below how long you can
// tolerate a crashed holder's slots being missing.
//
// # Concurrency and goroutines
//
// Quota is safe for concurrent use and starts no goroutines. Slots starts
// one (renewal) and stops it in Close. Neither closes the Redis client.
package redisquota
