// Package doctor explains what a running sluice server is doing from the
// outside: it reads the admin listener's /metrics and /state twice, an
// interval apart, and says in plain terms what the difference shows, with
// the figures behind each statement and the next thing to check.
//
//	d, err := doctor.Run(ctx, doctor.Config{Admin: "http://127.0.0.1:9090", Interval: 5 * time.Second})
//	if err != nil { ... }                 // ErrInvalidConfig, ErrUnreachable, ErrBadInput
//	d.WriteText(os.Stdout)                // gate rates, findings, goroutines
//	if d.Worst() == doctor.Critical { ... }
//
// Run is a convenience; the parts are usable alone: ParseMetrics and
// ParseState turn a scrape into a Reading, ParseGoroutines groups a
// goroutine dump, and Diagnose compares two Readings. Diagnose is a pure
// function, so recorded scrapes make exact tests.
//
// # What it looks for
//
// Each rule is one row of a diagnosis table: a symptom, what it usually
// means, and where to look next.
//
//   - arrivals_above_completions: offered/s more than 10 % above
//     completed/s. Info when refusals absorb the excess (the gate is
//     doing its job), warn when the backlog grows.
//   - queue_growing_at_capacity: the queue grew while every slot was
//     busy in both readings: arrivals exceed completions, or the work
//     slowed (the hold time is compared with its earlier mean).
//   - queue_growing_below_capacity: the queue grew while slots were free:
//     heavy permits that do not fit, a lowered capacity, a queue that
//     takes everything.
//   - oldest_waiter_stuck: the oldest waiter aged by (nearly) the whole
//     interval while work was still queued: a hotspot, starvation, one bad
//     item. Needs a gate that exports sluice_admission_oldest_wait_seconds.
//   - stalled: slots held in both readings and nothing completed: a hang,
//     a deadlock, a leak, or slow clients.
//   - slow_clients: a stall where the goroutine dump shows a response being
//     written to a slow reader for every held slot (gated streams keep
//     their slot until the client has them): slow clients, not a hang.
//   - refusals_concentrated: one gate, or one kind or class within a gate,
//     took at least 80 % of the refusals and at least 20 points more than
//     its share of the arrivals.
//   - retries_amplifying: a retrying client's attempts per original in the
//     interval reached 2, or grew by a quarter over its earlier ratio
//     (from a retry policy's sluice_retry_attempts_total and
//     sluice_retry_retries_total, as promsluice exports them: the
//     originals are the attempts less the retries).
//   - littles_law_mismatch: slots held (the inflight gauge at both
//     readings) more than twice what completions account for. The
//     completion rate times the mean hold over the interval is the mean
//     number of slots that completed work occupied (L = λW); slots beyond
//     it are held by work that does not complete: a leak, a hang, or a
//     missing completion counter.
//   - counter_missing: an admission family is missing, a gate in /state
//     is not in /metrics, or offered ≠ admitted + rejected + waiting (or
//     admitted ≠ completed + inflight) in a reading. Rules that need the
//     missing counter stay quiet.
//   - counter_reset, double_release, draining: a counter went backwards
//     (a restart), permits ended twice, the server is shutting down.
//   - goroutines_in_gate_queues, goroutines_on_locks: with a goroutine
//     dump, where goroutines wait: gate queues, responses to slow clients,
//     network reads and writes, locks, channels, sleep, syscalls.
//
// Thresholds are constants (MinEvents, ArrivalExcess, ...), coarse on
// purpose: a finding should be plain in the figures it prints.
//
// # Design
//
// doctor speaks HTTP and Prometheus text only; it never imports the gate
// packages, so it can read any service instrumented with promsluice, and
// /state is optional (Config.NoState). Metric families it does not know
// are ignored, so newer servers stay readable. The names it reads are
// spelled once, in internal/metricname, where promsluice takes them, and
// a scrape is read under internal/promtext's rule, the one `sluice load
// --metrics` reads by too. The goroutine dump parser
// is hand-written: it needs only each goroutine's wait state and function
// names from a small, stable text format. Measured against a general
// stack-trace parser on a 1,000-goroutine dump it was about 12 times faster
// with a seventh of the memory (docs/bench/doctor.md), and it adds no
// dependency.
//
// Everything here is safe for concurrent use: Run holds no state between
// calls, and Readings and Diagnoses are not modified after they are built.
package doctor
