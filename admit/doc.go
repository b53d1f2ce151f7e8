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
// # Vocabulary
//
// These words mean one thing each, here and in every sluice package, its
// metrics, messages and docs:
//
//   - Gate, slot, permit: a gate guards one scarce resource with slots; a
//     Permit is the proof that a slot is held.
//   - Offered, admitted, rejected, completed: every attempt that reaches
//     a gate is offered; it is admitted (it got its slots), rejected
//     (always with a Reason), or still waiting; admitted work completes,
//     with an Outcome. Rejected is the counted outcome wherever something
//     is counted: Stats.Rejected, sluice_*_rejected_total, and the same
//     for quotas, breakers and pools, which reject with the same reasons.
//   - Refuse, refusal: the act, and the answer that carries a rejection
//     to its caller: a gate refuses an attempt (the attempt is counted
//     rejected) with a RejectedError, which the HTTP edge turns into a 503
//     or 429 and gRPC into RESOURCE_EXHAUSTED. A load driver counts the
//     refusals it receives.
//   - Policy: a resilience policy, a mechanism that decides about calls
//     (retry.Policy, a retry policy). Nothing else is called one: how a
//     queue is ordered and shed is its Queueing (and Discipline); what a
//     full pool, quota key table or stream buffer does with one more
//     arrival is its WhenFull; a quota's name, rate and burst as clients
//     see them are its Shape.
//   - Lease: a fleet quota's lease mode only (tokens taken from Redis in
//     batches). A fleet slot, like a gate's, is held by a permit
//     (redisquota.SlotPermit).
//
// # Where to put a gate
//
// At the point of cost, and nowhere else. A gate that guards disk reads
// must be entered right before the read, not when the request arrives: a
// request served from a cache, a HEAD, a 304 or a 404 costs nothing and
// must never wait for, or be refused by, the disk gate. A static server
// that took its "work limit" slot before looking in its cache refused cache
// hits with 503 as soon as concurrency passed the limit, and its throughput
// collapsed while the disk sat idle (docs/benchmarks.md has the figures). The
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
//     decision and per completion (GrantObserver: a cheaper one for
//     grants, for an observer that needs only the slots in use).
//   - Queue disciplines (Config.Queueing): FIFO (the zero value), LIFO
//     and CoDel-style controlled delay; priority classes (Request.Class,
//     Queueing.ClassShares, Queueing.ClassAging); deadline-aware admission;
//     and the oldest waiter's age (Gate.OldestWait, Stats.OldestWait).
//     See "Queues under pressure" below.
//
// Requests a gate cannot even consider (a weight outside 1..MaxCapacity, a
// Kind handle it does not have) return ErrInvalidRequest and touch
// nothing. Work heavier than the current capacity is refused at once
// (ReasonFull) rather than queued, since it could never fit.
//
// # Queues under pressure
//
// A queue absorbs bursts; under a sustained overload it only adds its
// length to every answer. The gate offers four tools against that.
//
// Disciplines. FIFO serves in arrival order. LIFO serves the newest
// waiter first: under a standing overload the callers still waiting for
// an answer are served, and the old ones run into MaxWait instead of
// being served after their clients gave up. CoDel (controlled delay, as
// Facebook described it in "Fail at Scale") is FIFO while the queue keeps
// emptying, a newcomer waiting at most CoDelInterval (100 ms); once the
// queue has not been empty for an interval, newcomers wait at most
// CoDelTarget (5 ms) and the queue is served newest first, until it
// drains. MaxWait still bounds every wait.
//
// Classes. A Request carries one of four classes (the SRE book's names):
// critical_plus, critical (the zero value and default), sheddable_plus
// and sheddable. Queued work is served by class, highest first; a full
// queue sheds the newest waiter of the lowest class below a newcomer
// (ReasonShed) instead of refusing the newcomer, and refuses a newcomer
// with ReasonShed when the queue is full of more important work. So under
// pressure the lower classes are refused first. Two rules keep that from
// starving anyone: ClassShares guarantees a class a minimum share of the
// slots (a class below it is served first and is never shed), and
// ClassAging (MaxWait/2 by default) lets a waiter queued that long be
// served as critical_plus when several classes are queued, so a stream of
// higher classes cannot overtake old work for ever. ParseClass maps
// unknown names to the default class, never to a better one.
//
// Deadlines. AcquireFor refuses at once, with ReasonDeadline, a caller
// whose context deadline is nearer than its expected wait plus the gate's
// recent hold time (the same moving average RetryAfter uses): its work
// could not finish in time, so it should not take a place in the queue.
// A waiter whose deadline passes while queued is never granted, even if
// its context's timer has not fired yet, and a grant that races with the
// end of its caller's context is handed on: expired work never starts.
// The check needs hold-time samples (no NoTiming) and can be turned off
// with NoDeadlineCheck. TryAcquire never looks at deadlines.
//
// Queue age. OldestWait is how long the oldest caller still queued has
// waited: the sign of a queue that is not moving, long before its length
// says so. It is in Stats, /state and metrics.
//
// None of this touches the fast path: one slot of the first kind and the
// default class, with nobody queued, is still one CAS. The queue's order
// is computed only when it holds another class or the discipline is not
// FIFO, by a walk over the (bounded) queue per grant.
//
// # Fairness
//
// Exactly what the gate promises about order (for a FIFO gate with one
// class; see above for the others, which change only the order in which
// queued waiters are considered):
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
// How that is checked: two linearizability checks (porcupine) run gates
// from several goroutines at once and verify that every history, Stats
// snapshots included, is explained by a sequential model (one without a
// queue; one with FIFO, LIFO and CoDel queues, classes, shares and
// weights, which leaves out queued age and the overtaking bound); a stress
// test samples Stats while the gate is hammered, classes and every
// discipline included, and fails on any counter that goes backwards; two
// property tests predict, step by step, which waiters are granted or
// refused (one for FIFO with weights, capacity changes and time-outs, one
// for classes, shares, shedding and LIFO, which also checks that no class
// below its share waits while a slot it fits is free); synctest tests pin
// down CoDel, aging and deadlines; and named mutants prove each of these
// tests fails when the rule it guards is broken.
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
// Hold time costs two monotonic clock reads per timed permit, which is
// most of what a timed permit costs: a read is a vDSO call of some 25 ns
// on a virtual machine, where a CAS is a few. So the clock is read no more
// than that: a deadline check reads it once and the permit it lets
// through starts from that reading, and the hold sums are integers, one
// atomic add each. By default a gate times one permit in eight (every
// permit when it has an Observer, as histograms and adaptive limits want
// every sample); the mean, and so RetryAfter, stays unbiased, and
// Stats.HoldSamples says how many were timed. Config.NoTiming turns timing off. Refusals reuse an identical,
// immutable *RejectedError instead of allocating one, so a refusal flood
// allocates nothing. A Permit is four words, returned in registers.
//
// Lock order: Gate.mu (the queue), then the counting lock; the counting
// lock is a leaf, and observers are never called with either held.
package admit
