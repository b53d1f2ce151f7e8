// Package demo is `sluice demo`: the whole idea of sluice shown in one run
// that needs nothing installed and takes under a minute.
//
//	res, err := demo.Run(ctx, demo.Config{})   // the zero Config is the demo
//	demo.WriteTable(os.Stdout, res)             // the comparison
//	fmt.Println(demo.Summary(res))              // two sentences from the numbers
//	page, err := demo.WriteFiles(dir, res)      // sluice-demo.html and the load reports
//
// # What it runs
//
// An in-process static-file server (package static on the server frame,
// main and admin listeners on 127.0.0.1 with ports the system picks) serves
// a small built-in site: a few hot pages, small enough for its cache, and
// cold archive files, too large for it, so every request for one reads the
// disk. The disk is a model: static.Config.FS wraps the files so that a
// file's first Read waits for one of Disk.Channels and then sleeps
// Disk.Service. Its capacity is known by construction (4 channels at 40 ms
// is about 100 reads a second), and the demo measures it anyway with a
// short closed loop of uncached requests, so a busy machine's slower
// sleeps are part of the figure.
//
// Then four variants of the server get the same stepped open-loop load
// from two drivers (package load) running at once, one for cached and one
// for uncached work, each offering Multipliers × the measured capacity
// (1×, 2×, 5×, 10× by default) for StepDuration a step:
//
//   - no-gate: a gate so wide it admits everything;
//   - request-scope: static.ScopeRequest, the historical bug, where the
//     slot is taken before the cache lookup, so cache hits queue behind
//     (here: are refused by) slow disk reads;
//   - disk-scope: static.ScopeDisk, the fix, the slot taken right before the
//     disk read, WorkLimit slots;
//   - adaptive: disk-scope whose slots package limit moves
//     (limit.New as the gate's Observer, then Attach).
//
// Two drivers rather than one, because a driver's workers are shared: with
// one pool, uncached requests stuck at an ungated disk would hold up the
// cached ones in the driver itself and blame the server for it.
//
// # What it reports
//
// For each variant and step, and for cached and uncached work apart: ok
// answers per second (goodput), refusals (503) as a share of the step's
// requests, requests lost (dropped by the driver's bounded queue, or
// failed), and the p99 response time of ok answers measured from each
// request's scheduled time. Summary derives two sentences from those
// numbers: how the bug and the fix compare on cached work (and at how many
// steps above 1× the fix was ahead), and which variant had the highest and
// the lowest p99 for uncached work at the heaviest step, with what each
// paid in refusals. HTML draws the same figures as one self-contained
// page; WriteFiles also keeps each driver's full load report and its
// per-second timeline (package render).
//
// Each variant also records its gate's counters after the run and whether
// its books close (every admitted request completed, nothing in flight),
// and whether a driver fell behind its timetable, which a machine too busy
// for the load causes.
//
// # Design notes
//
// The comparison is between variants of one server under one load, run
// one after another on the same machine, so the demo claims orderings, not
// absolute figures: on a busy machine every number moves, the ordering of
// the bug and the fix does not (a slower disk fills the bug's gate
// sooner). Every server, driver and sampler a run starts has ended when
// Run returns. Nothing here keeps package-level state: calls to Run share
// nothing but the machine, whose CPU and timing they would disturb for
// each other.
package demo
