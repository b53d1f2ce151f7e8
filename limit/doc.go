// Package limit moves an admission gate's capacity with the server: when
// latency rises, fewer slots; when it holds, more. It plugs into package
// admit as an Observer and drives Gate.SetCapacity.
//
// # Usage
//
//	gate, adaptive, err := limit.NewGate(
//		admit.Config{Name: "upstream", Capacity: 32, MaxWaiters: 64},
//		&limit.Config{
//			Law: &limit.Vegas{},      // or &limit.AIMD{}, &limit.Gradient2{} (the default)
//			Min: 4, Max: 256,
//			SLO: 200 * time.Millisecond, // the ceiling: see "Guardrails"
//		})
//	...
//	st := adaptive.State() // for /state: limit, latency, baseline, decision, why, ramp
//
// NewGate is the one way to build a gate with an adaptive limit: it
// creates the Adaptive, makes it the gate's Observer beside the one in
// admit.Config (metrics, say), builds the gate, gives a queue without its
// own wait limit the SLO's share (QueueWaitFor: the queue's wait and the
// hold share the SLO), and attaches the Adaptive, which from then on sets
// the gate's capacity and reads its queue. With a nil *Config it builds a
// fixed gate, so code configured either way makes one call. For a gate
// built elsewhere, pass an Adaptive from New as its Observer and Attach
// it. promsluice.Metrics exports the controller's state with the rest.
//
// # How it decides
//
// Every completion that produced a latency sample (CompletionEvent.Sample:
// dropped work never does) goes into the current window: a fixed-size
// log-linear histogram counted with atomics, so the sample path takes no
// lock and does not allocate; the clock, dearer than all the rest, is read
// on one completion in eight. Once a window is over (Config.
// Window, 100 ms by default, extended until it has Config.MinSamples) the
// goroutine whose completion closed it judges it: the window's measure is
// a quantile of its hold times (the 90th percentile by default), or a
// Signal such as SchedLatency. The Law proposes the next limit from the
// current one and the window; the guardrails below adjust it; the result
// is rounded and set on the gate. So the capacity changes at most once per
// window, and nothing runs in the background.
//
// # Laws
//
// The three laws are re-derived from their public descriptions: Netflix's
// concurrency-limits (github.com/Netflix/concurrency-limits, README and
// the AIMD, Vegas and Gradient2 limits) and failsafe-go's adaptive limiter
// (failsafe-go.dev, adaptive limiter docs). No code was copied.
//
//   - AIMD: one slot more per healthy window, ×0.9 after a window slower
//     than a threshold. Simple and predictable; it saw-tooths by its
//     backoff around the knee.
//   - Vegas: estimates the queue the limit builds, limit × (1 − baseline /
//     latency), and keeps it between two bounds that grow with log10 of
//     the limit. The baseline is a windowed minimum, not the original's
//     periodic reset to the current latency (which adopts a loaded latency
//     as the new normal).
//   - Gradient2: compares the window with a long-term latency; the ratio,
//     clamped to [0.5, 1], scales the limit, plus √limit of headroom while
//     latency holds, blended 20% a window. Unlike the original, headroom
//     is not added while the gradient is below 1, and the long-term latency
//     is a windowed minimum rather than an average of recent samples: the
//     average follows a sustained modest overload up until queueing looks
//     normal, which is what let the original drift.
//
// Every law's baseline (the latency of an unloaded backend) is the lowest
// window measure of the last one to two periods of 100 windows: a working
// limit keeps touching the backend's knee, where latency is unloaded, so
// the baseline stays true, and a backend that got slower for good is
// accepted within two periods.
//
// A Law keeps its own state (a baseline) and is called under the
// Adaptive's lock; each Adaptive needs its own.
//
// # Guardrails
//
// These are the failures users of adaptive limiters report, and the answer
// to each:
//
//   - Bounds: the limit stays within Config.Min..Max.
//   - Drift during a long incident. When every request is slow for long
//     enough, a learned baseline follows latency up until slow looks
//     normal, and the limit climbs back while the backend is still sick
//     (failsafe-go issue #127, Netflix concurrency-limits issue #137 where
//     a constant timeout latency grows the limit to its maximum, Envoy pull
//     request #11579 where each minimum-latency measurement started higher
//     than the last under sustained load). Config.SLO anchors the limit,
//     and it is the latency a caller sees: the wait in the gate's queue
//     plus the hold. The hold's budget is the SLO less the queue's wait
//     (the age of the gate's oldest queued request as a window closes,
//     once two windows in a row have seen it), never less than half the
//     SLO. A window whose
//     measure is above the budget is an overload: the limit shrinks by
//     Config.Backoff whatever the law proposes, and no law learns from it.
//     A window whose 99th percentile alone is above the budget brings the
//     limit down by Backoff too, and it does not grow, so the admitted
//     tail converges under the SLO. The law aims its measure at 70% of the
//     budget (no baseline may rise above that divided by the law's
//     tolerance), so at equilibrium the tail has room. The queue's own wait
//     is the queue's business: QueueWaitFor (a quarter of the SLO) is the
//     wait limit to give the gate when nothing else sets one.
//   - A backend that got slower is not a queue. A queue the limit builds
//     shrinks as the limit shrinks, and the mean hold time with it; when
//     the limit has fallen by a quarter and the mean has not, the law's
//     baseline is re-anchored at the window's measure, so the limit stops
//     falling below the backend's concurrency (and its throughput) within
//     a second or two instead of one to two baseline periods. With an SLO
//     only: the re-anchored baseline is capped like any other.
//   - Growth nobody tested: while the most slots used in a window is below
//     half the limit (Config.AppLimited), the limit does not grow, so a
//     quiet night does not leave a huge limit for the morning's burst.
//   - One slow request: the measure is a quantile, so the slowest tenth of
//     a window, one slow request included, cannot move it; Gradient2 also
//     blends each step.
//
// # Recovery ramp
//
// An overload episode starts when a window is above the SLO, or when the
// limit falls below half its recent high (Ramp.Trigger). When the law stops
// cutting and latency is under the SLO, the episode is over, and capacity
// does not jump back: it climbs from where the episode left it to the
// pre-episode level in Ramp.Steps equal steps. Each step is held for
// Ramp.Hold (five windows) so its effect is visible, then judged against
// the step below: completions per second rose, so grow one step;
// completions flat or latency rising a little, so pause; completions fell,
// latency doubled against the start of the ramp, or the age of the gate's
// oldest queued request doubled, so step back one level. A window
// above the SLO aborts the ramp and starts a new episode, whose ramp then
// aims no higher than the level below the one that overloaded; a window
// whose 99th percentile alone is above the budget steps the ramp back one
// level at once. The ramp's level,
// last decision and why are in State().Ramp, in promsluice's metrics and
// in the log (Info).
//
// # The runtime's own signal
//
// SchedLatency reads the Go runtime's scheduling latency
// (runtime/metrics /sched/latencies:seconds): how long runnable goroutines
// waited for a CPU. A CPU-bound service sees it rise before its request
// latency explodes, so with Config.Signal set to it and an SLO of a few
// milliseconds the gate sheds while there is still CPU to serve what it
// admitted.
//
// # Concurrency
//
// An Adaptive is called from every goroutine that ends a permit.
// Adaptive.mu guards the window and the controller; ObserveAdmission only
// touches an atomic. Lock order: Adaptive.mu, then the gate's own lock
// (SetCapacity, OldestWait); the gate never calls an observer with its
// lock held. The
// `…At(now)` methods are seams for tests and simulations; with the default
// clock, testing/synctest drives everything in virtual time.
//
// Everything here is hand-written because it is the product's core: the
// peers are either other languages (Netflix's Java library, Envoy's C++
// filter) or a whole-policy Go library (failsafe-go) whose limiter owns
// its own permits, while here the limit must drive an existing admit.Gate.
package limit
