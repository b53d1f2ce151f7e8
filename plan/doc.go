// Package plan is capacity arithmetic for overload work: Little's law,
// backlog drain time, queue sizing, waiting time in front of c slots
// (M/M/c), retry amplification and fleet totals.
//
//	d, err := plan.Drain{Backlog: 120000, Offered: 900, Refused: 600, Completed: 500}.Solve()
//	// d.Accepted = 300/s, d.NetDrain = 200/s, d.Seconds = 600
//
//	r, err := plan.Retry{Attempts: 4, Layers: 3}.Solve()
//	// r.WorstCase = 64 attempts at the bottom layer per original request
//
// Each input type is a plain struct of figures whose zero value means "not
// given"; Solve validates it and returns a result, or an error that says
// which figure is wrong and why. Errors wrap ErrInvalidInput (a figure out
// of range: negative, NaN, infinite, too large), ErrMixedScope (a queue
// figure combined with a whole-system figure) or ErrNotAverage (a
// percentile where only an average is meaningful); callers tell them apart
// with errors.Is, and errors.As gives the *InputError with the field name.
//
// # Design
//
// The arithmetic is simple; the value is in refusing the combinations that
// look plausible and give wrong answers:
//
//   - Little's law (L = λW) holds for long-run averages of one scope. The
//     queue alone (Lq = λq·Wq) needs the time spent queued, not the total
//     time that includes the work itself; plugging a total time into the
//     queue's formula overstates the queue by the work's share. A p99 is not
//     an average, so the law says nothing about it. Both are refused.
//   - Drain time divides the backlog by the net drain rate, completions
//     minus what is still being accepted. Refusing part of the arrivals
//     frees nothing when the rest still uses every completion: the table
//     row "900 offered, 400 refused, 500 completed" never drains.
//   - Queue capacity from target wait × safe service rate is a starting
//     candidate, not an answer: bursts and slow items must still be tried
//     against it, and every queued item holds memory.
//   - Waiting time in front of c slots follows Erlang's C formula when
//     arrivals are random (Poisson) and service times spread
//     exponentially: the share that waits, the mean and p99 wait, and the
//     fewest slots that keep the p99 wait under a target. A load where the
//     slots are busy as often as not (a ≥ c) has no steady state, and
//     Wait says so rather than print figures. The recursion of Erlang's B
//     formula keeps it finite for any number of slots (factorials do not).
//   - Retries multiply per layer: 4 attempts at each of 3 layers is 4³ = 64
//     attempts at the bottom for one original request. A retry budget
//     (retries ≤ ratio × originals) caps each layer at 1 + ratio.
//   - Per-instance pools add up across a fleet: 50 connections × 10
//     instances is 500 at the shared database, whatever each instance
//     believes.
//
// Every result is computed in float64 from float64 inputs; the package
// holds no state, so everything in it is safe for concurrent use.
package plan
