// Package load is sluice's load driver: it puts a known load on any HTTP
// server and measures what happened without flattering it. It speaks HTTP
// and Prometheus text only and imports no other sluice package, so it
// measures sluice and anything else alike.
//
// # Goals
//
//   - Open loop that stays open. Arrivals follow a fixed timetable (a
//     Shape: constant, linear ramp, stepped) computed before the run; the
//     pacer never waits on a response. A slow server therefore shows up as
//     waiting, not as a quietly lower offered load (coordinated omission).
//   - Bounded everything. A fixed pool of workers takes arrivals from a
//     bounded queue; an arrival that finds the queue full is a drop: never
//     sent, counted at its scheduled time, reported apart from anything the
//     server did. Memory is constant: HDR histograms, per-second timelines.
//   - Every request accounted for, exactly:
//     scheduled = sent + dropped, and
//     sent = ok + refused + http_error + transport_error + unfinished.
//   - Blame placed correctly. A refusal (503/429) carries the gate and reason
//     from a sluice envelope; with a metrics URL each refusal is matched to
//     an admission rejection the server counted. A window whose failures are
//     the driver's own (its schedule lag, its CPU, drops while the server
//     answered within budget) is driver-limited and its verdict INVALID,
//     never FAIL.
//
// # Parts
//
//   - Config (config.go): one step's settings, their defaults and bounds;
//     the engine (engine.go) runs a step's windows, tally.go holds a
//     window's striped counters while it runs.
//   - Shape (shape.go): arrival i is due at At(i), the time at which the
//     integral of the rate reaches i (uniform arrivals). Poisson arrivals
//     (pacer.go, timetable) map a seeded unit-rate Poisson process through
//     the same integral, so ramps and steps keep their rate at every
//     moment and a seed names the whole timetable.
//   - The pacer (pacer.go): sleeps to each due time (for sparse timetables
//     a Go timer, then nanosleep for the last 2 ms, since Go timers below a
//     millisecond wake up to a millisecond late on Linux, and a Go timer
//     throughout where package syscall has no nanosleep, macOS among them;
//     for dense ones a Go timer alone, which batches arrivals and costs far
//     less), hands every due arrival to the queue without blocking, and
//     records its own lag (hand-off − due) in the window's schedule-lag
//     histogram.
//   - Workers (worker.go): each owns prepared requests and a body
//     buffer and records four timestamps per request — scheduled, sent,
//     first byte, done — into one of a few lock-striped tallies of the
//     window. For plain http:// targets a worker speaks HTTP/1.1 itself
//     (h1.go): one keep-alive connection per host, the request serialised
//     once, the response parsed in place — no goroutines and no allocations
//     per request, much cheaper than net/http's transport (docs/bench/load.md
//     has the figures). https,
//     HTTP/2 and custom transports go through net/http (no redirects, no
//     cookie jar).
//   - Windows (window.go): a run is Windows windows of equal shape. Each is
//     scraped (metrics) before and after, and the next starts only when all
//     of the previous one's requests have finished (the drain), so each
//     window is judged on its own. A drain that outlasts DrainTimeout aborts
//     the run; what was in flight counts as unfinished. Each window keeps a
//     per-second timeline (seclat.go: coarse per-second percentiles) and,
//     when stepped or ramped, one row per step (phases).
//   - Closed loop: Concurrency workers, each sending when the previous
//     answer arrives; scheduled == sent, so response time equals request
//     time — which is exactly why closed loops hide stalls.
//   - Reports (report.go, file.go, verify.go, merge.go, release.go): the
//     JSON document "sluice/load-report/v1" (schema/load-report-v1.json),
//     written atomically; histograms are embedded as exact HdrHistogram
//     snapshots so reports from several driver machines merge exactly
//     (Merge). ParseReport refuses a report whose classes do not reconcile
//     or whose stored summaries disagree with its histograms and counts.
//   - Verdicts (profile.go): a Profile has named Cases (QPS floor, response
//     p99 budget, refusal and error rate limits, zero drops); Judge returns
//     PASS, FAIL with every reason, or INVALID.
//   - Server books (scrape.go): with a metrics URL, each window records the
//     server's rejections (attributing refusals to gates, connection-level
//     ones to "connections"), each gate's balance and occupancy, and its CPU.
//     The names it reads are promsluice's, spelled once in
//     internal/metricname, and a scrape is read under internal/promtext's
//     rule, the one doctor reads by too: a family of another type, or a
//     NaN, infinite or negative sample in a family read, fails the scrape.
//   - Bounds (limits.go): every size a Config can ask for has an upper
//     bound derived from the memory it costs. Config.Check and CheckSteps
//     apply them, and every refusal is a *FieldError naming the setting
//     as Go spells it, which a CLI maps to its flag.
//   - What reads reports and profiles (select.go, file.go, profile.go):
//     Report.Totals adds up a selection of windows for capacity
//     arithmetic; Case.ApplyTo fills a run's LoadSettings from a profile
//     case where the caller set nothing; Profile.CaseFor picks the case a
//     report is judged by; Check and Rejudge give the one verdict every
//     command prints; ReadReport and ReadProfile read bounded files.
//   - Drawing reports for people is package render; writing files
//     atomically is internal/atomicfile.
//
// # What the latencies mean
//
// ScheduleWait is sent − scheduled (pacer lag plus queueing in the driver),
// RequestTime is done − sent (connection wait, network, server, reading
// the body), ResponseTime is done − scheduled: what a user arriving on the
// timetable would have seen. The report never adds percentiles together;
// merged percentiles come from merged histograms.
//
// # Usage sketch
//
//	shape, _ := load.Constant(1200, time.Minute)
//	r, err := load.Run(ctx, "load", load.Meta{}, []load.Config{{
//		Targets: []load.Target{{URL: "http://127.0.0.1:8080/list"}},
//		Shape:   shape, Windows: 3, Workers: 48, P99Budget: 100 * time.Millisecond,
//		MetricsURL: "http://127.0.0.1:9090/metrics",
//	}})
//	// r.Steps[0].Windows[i].Counts, .Latency, .Metrics, .Driver
//	err = load.WriteReport("report.json", r)
//
// Config is not shared between goroutines; Run and RunStep are safe to
// call concurrently with different configs. Nothing here keeps package-level
// state.
package load
