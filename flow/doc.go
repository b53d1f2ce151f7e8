// Package flow is demand-driven streaming inside one process: a producer
// may send only what its consumer has asked for, and every stage between
// them says how it changes the asking.
//
//	s := flow.FromSeq(ctx, readings)  // nothing is produced yet
//	s.Request(2)                      // the producer may emit 2 values
//	v, err := s.Recv(ctx)             // take one
//	s.Request(3)                      // 3 more
//	s.Cancel()                        // stop the producer, release what it holds
//
// or, with an iterator that keeps a window of demand ahead of the loop:
//
//	for v, err := range flow.Map(s, 4, 8, enrich).All(ctx, 16) { ... }
//
// Experimental: nothing else in sluice uses flow yet, and no benchmark
// holds it to a target, so its API may still change until a server or
// adapter is built on it.
//
// # Why demand
//
// A goroutine that reads from a fast source and hands each item to a
// slower stage through an unbuffered channel is bounded by accident; put
// a buffered channel, a slice or a goroutine per item there and the
// backlog lives in memory, invisible until the process runs out of it.
// Demand makes the bound explicit and end-to-end: the consumer says "n
// more", the stage above turns that into what it needs from its own
// source, and nothing anywhere holds more than was asked for.
//
// # The contract
//
//   - Request(n) adds n to the demand; it accumulates (Request(2) then
//     Request(3) allows 5). n must be positive: Request(0) is an error
//     (ErrInvalidDemand) and changes nothing. Unbounded removes the limit.
//   - The producer never emits more than was requested (Stats.Emitted <=
//     Stats.Requested at every moment). Emit blocks until there is demand;
//     FromSeq does not even compute a value nobody asked for.
//   - A stream ends once, one way: completed (Recv returns io.EOF after the
//     emitted values), failed (Recv returns the error after the emitted
//     values) or canceled (Recv returns ErrCanceled; values not taken are
//     released). Ending takes no demand. A later Cancel or error changes
//     nothing.
//   - Cancel cancels the producer's context, so it returns and releases its
//     source; operators cancel their upstream in turn. Done says when the
//     producer has returned. Canceling does not undo work already done
//     elsewhere (a sent request, a committed transaction).
//
// # Operators, and what they do to demand
//
//   - Buffer(up, n) groups values by n. Demand for k groups becomes
//     demand for k*n values upstream: two groups of four cost eight values,
//     and memory should be budgeted in those.
//   - Overflow(up, capacity, whenFull) is for a source that must not be
//     slowed (telemetry, a socket to drain): it asks up for everything and
//     keeps at most capacity values that downstream has not asked for. The
//     whenFull says which data is lost when that is full: OverflowFail stops
//     the source and fails the stream after the buffered values; DropOldest
//     keeps the newest (right for "latest reading wins"); DropLatest keeps
//     what is buffered. Choose by what the business can afford to lose; a
//     payment and a temperature need different answers.
//   - Map(up, concurrency, prefetch, f) calls f on at most concurrency
//     values at once, never on more than downstream asked for, and keeps
//     prefetch values requested from up so workers do not wait on it.
//     Results come in completion order. Neither number is a rate limit.
//
// # Consumers of brokers
//
// A broker consumer that acknowledges a message on receipt and then puts
// it on a local queue has told the broker the work is done when it has
// not started: the broker's prefetch limit no longer bounds anything, and
// a crash loses the queue. Consume keeps at most MaxUnacked values
// delivered and unacknowledged, acknowledges each only after its work
// returned (NACK on error), and asks for the next one only then.
//
// # Design notes
//
// Each stage is one goroutine (Map adds its workers) feeding a stream's
// outbox, a queue guarded by a mutex that never holds more than the
// outstanding demand (Overflow: its capacity). Waiters (producers waiting
// for demand, consumers waiting for values) wait on a channel that is
// closed and replaced on every change, so they can also watch a context.
// Map's workers reserve a unit of demand before they take a value, which
// is how it never computes a result nobody asked for. It is hand-written
// rather than built on a reactive library: the best known one for Go,
// RxGo, bounds its stages with channel buffers and a block-or-drop
// strategy but has no request(n) demand, no terminal contract like the
// one above and no contexts in its producers, and the core here is small.
//
// Lock order: each stream's mu is a leaf; operators never hold one
// stream's lock while taking another's.
package flow
