// Package admit is sluice's slot model: a Gate guards one scarce resource
// with an adjustable number of slots, and a Permit is the proof that a slot
// is held.
//
// # Usage
//
//	db, err := admit.New(admit.Config{
//		Name:       "db",
//		Capacity:   8,                      // 8 queries at once
//		MaxWaiters: 16,                     // 16 more may wait...
//		MaxWait:    100 * time.Millisecond, // ...for 100ms at most
//	})
//
//	// in the handler, after the cache lookup missed:
//	p, err := db.Acquire(ctx)
//	if err != nil {
//		return err // a *admit.RejectedError: 503, Retry-After: rej.RetryAfterSeconds()
//	}
//	rows, err := query(ctx)
//	p.Done(admit.OutcomeFor(err))
//
// TryAcquire never waits. Acquire waits in the gate's bounded queue when it
// has one. Both use the gate's first kind and one slot; TryAcquireFor and
// AcquireFor take a Request for other kinds (counted apart) and weights
// (work that costs several slots). Package httpgate does the same around
// net/http handlers, and package promsluice exports a gate's Stats to
// Prometheus.
//
// # Where to put a gate
//
// At the point of cost, and nowhere else. A gate that guards disk reads
// must be entered right before the read, not when the request arrives: a
// request served from a cache, a HEAD, a 304 or a 404 costs nothing and
// must never wait for, or be refused by, the disk gate. A static server
// that took its "work limit" slot before looking in its cache refused cache
// hits with 503 as soon as concurrency passed the limit, collapsing from
// 44k to 4k requests/s at 200 connections while the disk sat idle. The
// fix is not a bigger limit; it is taking the slot where the disk is used,
// remembering that it was taken, and releasing only what was taken. The
// Permit is that memory: code that never acquired holds the zero Permit,
// whose Done does nothing.
//
// # The parts
//
//   - Gate: named, with a capacity in slots that SetCapacity may change at
//     run time (adaptive limits plug in there). Shrinking never revokes
//     held permits; it stops admissions until enough are done, and refuses
//     at once the queued callers whose weight no longer fits.
//   - Permit.Done(outcome) releases exactly once. A second Done on the
//     same Permit is a counted no-op (Stats.Misuse). Pass a *Permit, never
//     a copy: see Permit for what a copy does. OutcomeFor maps an error to
//     an outcome; OutcomeDropped ends work that produced no meaningful
//     latency sample.
//   - RejectedError: gate, kind, reason, inflight and capacity at refusal,
//     and a suggested RetryAfter. errors.Is(err, ErrRejected) holds for all
//     refusals; errors.Is(err, ErrClosed) only for shutdown, so shutdown is
//     told apart from overload; refusals caused by the caller's context
//     match context.Canceled or context.DeadlineExceeded.
//   - Kinds: a gate is told its bounded set of kinds up front. Kind(name)
//     panics on a name the gate does not have (a typo fails the first test
//     that runs it); LookupKind reports instead, for names from input.
//   - Stats: an atomic snapshot of every counter; Observer: a hook per
//     decision and per completion.
//
// Requests a gate cannot even consider (a weight outside 1..MaxCapacity, a
// Kind handle it does not have) return ErrInvalidRequest and touch
// nothing. Work heavier than the current capacity is refused at once
// (ReasonFull) rather than queued, since it could never fit.
//
// # Fairness
//
// Exactly what the gate promises about order:
//
//   - A caller that does not queue (TryAcquire, or Acquire finding the
//     queue empty) is admitted only if its slots are free and nobody is
//     queued at that instant. It never takes slots ahead of a queued waiter.
//   - Queued waiters are granted in arrival order, with one exception for
//     weighted work: when the oldest waiter that does not fit is blocked,
//     later waiters that do fit may go first, but only MaxOvertakes times
//     in all; after that, nobody behind it is granted until it fits, so
//     neither small nor big work starves. With MaxOvertakes negative the
//     order is strict.
//   - A waiter leaves the queue, refused, when its MaxWait passes, its
//     context ends, the gate closes, or a shrink leaves it unable to fit.
//     A slot granted at the very moment a waiter gives up is handed back
//     and on to the next waiter, never lost.
//
// # Invariants
//
// For every gate, and for every kind of a gate, every snapshot satisfies
//
//	offered  = admitted + rejected + waiting
//	admitted = completed + inflight
//
// Every counter is monotonic and never wraps. A permit releases its slots
// exactly once; a second Done on it frees nothing; a release of more slots
// than are in use (a copied Permit ended twice) panics with
// ErrOverRelease instead of corrupting the count; and once all work has
// ended inflight = 0 and waiting = 0.
//
// How that is checked: a linearizability check (porcupine) runs gates from
// several goroutines at once and verifies that every history, Stats
// snapshots included, is explained by a sequential model; a stress test
// samples Stats while the gate is hammered and fails on any counter that
// goes backwards; a property test predicts, step by step, which waiters are
// granted or refused; and named mutants prove each of these tests fails
// when the rule it guards is broken.
//
// # RetryAfter
//
// A gate's refusal suggests when to try again: the backlog ahead of the
// caller (the queue, plus itself) times the recent hold time, spread over
// the slots, rounded up to whole seconds and kept within [1s,
// Config.MaxRetryAfter]. "Recent" is an exponentially weighted average of
// sampled hold times that gives each new sample a weight of 1/8, so a
// slowdown shows within a few dozen completions however long the gate has
// run; dropped work does not feed it. Without timing it is one second.
//
// # Cost, and how the counting is laid out
//
// The common case, one slot of the first kind on a gate with no one
// queued, is one compare-and-swap to admit and one to release. A 64-bit
// state word holds the slots in use, a flag for "someone is queued", the
// ok completions of such fast permits, and a generation that SetCapacity
// and Close bump: an admission decided on a stale capacity or queue state
// fails its CAS and looks again.
//
// Everything else (another kind, several slots, queueing, an outcome other
// than ok, refusals) updates plain per-kind counters in a group that holds
// a read lock; Stats takes that lock exclusively, so a snapshot never sees
// half of a step and the fast path never waits for Stats. The counts of
// fast permits are read off the state word in the same snapshot: admitted
// = completed ok + still held + ended otherwise. This layout is checked by
// the linearizability test above; its cost against x/sync/semaphore and
// failsafe-go's bulkhead is in docs/benchmarks.md.
//
// Hold time costs two monotonic clock reads per timed permit. By default a
// gate times one permit in eight (every permit when it has an Observer, as
// histograms and adaptive limits want every sample); the mean, and so
// RetryAfter, stays unbiased, and Stats.HoldSamples says how many were
// timed. Config.NoTiming turns timing off. Refusals reuse an identical,
// immutable *RejectedError instead of allocating one, so a refusal flood
// allocates nothing. A Permit is four words, returned in registers.
//
// Lock order: Gate.mu (the queue), then the counting lock; the counting
// lock is a leaf, and observers are never called with either held.
package admit
