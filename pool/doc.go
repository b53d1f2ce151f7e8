// Package pool is a bounded executor: a fixed budget of worker
// goroutines, a bounded queue in front of them, and an explicit answer for
// the task that fits in neither.
//
//	p, err := pool.New(pool.Config{Name: "thumbnails", Core: 4, Max: 8, Queue: 64})
//	...
//	err = p.Go(ctx, pool.Func(func(ctx context.Context) error {
//		return resize(ctx, img)
//	}))
//	var rej *admit.RejectedError
//	if errors.As(err, &rej) {
//		// rej.Reason() is queue_full (overload: 503, retry later) or
//		// closed (shutdown: go elsewhere); errors.Is(err, admit.ErrClosed)
//		// tells them apart.
//	}
//	...
//	p.Shutdown(ctx) // refuse new work, finish what was accepted
//
// # Why bound it
//
// "go f()" per request is an unbounded executor: under overload the
// goroutines pile up, each holding memory, a connection, a lock, and the
// process gets slower for everyone until it falls over. A pool turns that
// into numbers someone chose: at most Max tasks run, at most Queue wait,
// and the rest get an answer now instead of a place in a line that only
// grows. An unbounded queue (Queue < 0) moves the waiting into memory and
// latency instead, and has a trap: the pool only grows past Core when the
// queue is full, so with an unbounded queue it never does; with Core 1 and
// one slow task, eight more tasks sit queued behind one worker while Max
// says four. The tests show both shapes.
//
// # How a task is placed
//
// In order: an idle worker takes it; else, with fewer than Core workers, a
// new worker starts with it; else, with room in the queue, it waits there;
// else, with fewer than Max workers, an extra worker starts with it; else
// WhenFull decides. Workers above Core leave after IdleTimeout without
// work. So with Core 1, Max 2, Queue 1 and tasks that never finish, the
// first task starts the core worker, the second waits in the queue, the
// third starts the extra worker, and the fourth meets WhenFull.
//
// # When full: whose problem the extra task becomes
//
// Config.WhenFull says (what executors elsewhere call a rejection policy):
//
//   - Abort (the default): the submitter's. Go returns a
//     *admit.RejectedError with reason queue_full, the same error type a
//     gate returns, so an HTTP edge maps it to 503 the same way.
//   - CallerRuns: the submitter's goroutine runs the task, which paces a
//     producer that submits in a loop. It also blocks whatever else that
//     goroutine does and runs the task outside the worker bound.
//   - Discard: nobody's; the task is dropped. Its Future completes with a
//     *DroppedError (and a task that implements Dropper is told), so nobody
//     waits for ever on a task that will never run.
//   - DiscardOldest: the oldest queued task's; it is dropped the same way
//     and the new one takes its place. Right for "latest value wins" work.
//
// A closed pool refuses every submission with reason closed, whatever
// WhenFull says: shutdown is never absorbed silently or run on the caller, so it
// is always told apart from overload.
//
// # Contexts and expiry
//
// Every submission carries a context. A context that has already ended is
// refused (reason canceled or deadline); one that ends while the task is
// queued makes the task expire: a worker that reaches it drops it
// (DropExpired) instead of running work whose caller has gone. The task's
// Run receives the same context.
//
// # Panics
//
// A panicking task is recovered on its worker, which survives; the panic
// is counted (outcome panic), logged if Config.Logger is set, and
// returned by the task's Future as a *PanicError.
//
// # Counting
//
// Stats and Observer have admit's shape: offered, admitted, rejected by
// reason, completed by outcome, plus workers, running, queued and the age
// of the oldest queued task. Every counter moves under the pool's one lock,
// so a snapshot always satisfies
//
//	Offered  = Admitted + Rejected.Total()
//	Admitted = Completed.Total() + Queued + Running
//
// and every accepted task ends exactly once: it runs, or it is dropped and
// told. Package promsluice exports the counters to Prometheus.
//
// # Cost
//
// Go on the steady path (an idle worker, or room in the queue) takes the
// lock once, hands the task over on a one-slot channel, and allocates
// nothing when the task is already a heap value: a pointer to a struct
// that implements Task, or a Func. Submit adds one allocation, the
// Future. Idle workers wait on their own channel in a LIFO list, so the
// most recently active worker (warm caches) is reused first and the
// others can time out. The clock is read only for queued tasks and, with
// an Observer, around each run. The scheduling is hand-written rather
// than taken from a goroutine-pool library (ants, conc) because none of
// them has this contract: a bounded queue with reasons, caller-runs and
// discard-oldest, per-task contexts that expire in the queue, and
// completion that is never lost; docs/bench/pool.md compares the cost.
//
// Lock order: Pool.mu is a leaf; user code (tasks, Drop, observers) is
// never called with it held.
package pool
