// Package admit is sluice's slot model: a Gate guards one scarce resource
// with a fixed (adjustable) number of slots, and a Permit is the proof that
// a slot is held.
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
//     held permits; it only stops admissions until enough are done.
//   - TryAcquire: a slot now, or a *RejectedError now. Never waits.
//   - Acquire(ctx): may wait in a bounded FIFO queue (Config.MaxWaiters,
//     Config.MaxWait). A waiter whose context ends or whose wait times out
//     leaves the queue at once and is refused with the matching reason; a
//     slot granted at the moment a waiter gives up is handed on, never lost.
//   - Weighted work (AcquireN, TryAcquireN) takes n slots. A big waiter at
//     the head that does not fit may be overtaken by smaller ones behind it,
//     at most Config.MaxOvertakes times; then freed slots are held back for
//     it. Neither small nor big work starves. Work bigger than the capacity
//     is refused at once instead of blocking the queue.
//   - Permit.Done(outcome) releases exactly once. A second Done is a counted
//     no-op (Stats.Misuse). OutcomeDropped ends work that produced no
//     meaningful latency sample; observers skip its hold time.
//   - RejectedError: gate, kind, reason, inflight and capacity at refusal,
//     and a suggested RetryAfter. errors.Is(err, ErrRejected) holds for all
//     refusals; errors.Is(err, ErrClosed) only for shutdown, so shutdown is
//     told apart from overload.
//   - Kinds: a gate is told its bounded set of kinds up front; unknown kinds
//     are counted as "other", never as a new label.
//   - Stats: a snapshot of every counter; Observer: a hook per decision and
//     per completion (package promsluice turns both into metrics).
//
// # Invariants
//
// For every gate, and for every kind of a gate, a snapshot taken while no
// call is inside the gate satisfies
//
//	offered  = admitted + rejected + waiting
//	admitted = completed + inflight
//
// a permit releases its slots exactly once, a second release never frees a
// slot someone else holds, and once all work has ended inflight = 0 and
// waiting = 0. The tests check these against an independent model under
// random interleavings, and a mutant check proves the tests notice when any
// of them is broken.
//
// # Cost, and how the counting is laid out
//
// Admission and release are one atomic read-modify-write each. The slots
// in use (low 20 bits) and the completion count (high 44 bits, with a wrap
// counter) share one 64-bit word, so Done frees the slot and counts the
// completion in a single add. Admitted and offered are not counted
// separately: they follow from the invariants (admitted = completed +
// inflight, offered = admitted + rejected + waiting), which is why the
// invariants hold by construction inside the gate and the tests check the
// gate against a model instead. Per-kind counts are kept for every kind but
// the first, whose counts are the gate's totals minus the others', so a
// one-kind gate pays nothing for kinds. Refusals reuse an identical, immutable
// *RejectedError instead of allocating one, so a refusal flood allocates
// nothing. A Permit is four words at most (its weight, kind and done flag
// share one), so it is returned in registers. Hold time costs two clock
// reads per permit; Config.NoTiming
// turns them off for gates whose work is shorter than a clock read is
// worth. The queue is a mutex-guarded intrusive list touched only when the
// gate is full: the fast path never takes the lock.
//
// Lock order: Gate.mu is a leaf; observers are never called with it held.
//
// # Usage
//
//	disk, err := admit.New(admit.Config{Name: "disk", Capacity: 16, Kinds: []string{"read", "stream"}})
//	...
//	read := disk.Kind("read")
//
//	// in the handler, after the cache lookup missed:
//	p, err := disk.TryAcquire(read)
//	if err != nil {
//		var rej *admit.RejectedError
//		errors.As(err, &rej) // 503, Retry-After: rej.RetryAfterSeconds()
//		return err
//	}
//	defer p.Done(admit.OutcomeOK)
//	data, err := os.ReadFile(name)
package admit
