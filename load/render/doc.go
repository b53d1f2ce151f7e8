// Package render draws load reports for people:
//
//	render.Text(os.Stdout, report)                 // the summary tables
//	render.CliffTable(os.Stdout, sweepReport)       // one row per rung
//	err := render.WriteHTML("ab.html", []*load.Report{a, b}, []string{"a.json", "b.json"})
//
// Text leads each window with the response time of ok answers beside that
// of all answers (refusals are fast and flatter the latter), names every
// column after whose time it is and explains every count in a legend line
// of its own, says how many arrivals a window dropped and whose doing that
// was, prints stepped and ramped windows one row per step, and says what
// the server's metrics showed (attribution, CPU or its absence, each
// gate's books and occupancy).
//
// HTML is one self-contained page: inline SVG, no scripts, nothing fetched.
// It draws each window's per-second timeline as time series (ok and
// refused per second, drops, errors, p50/p99 response time, schedule lag),
// so what happened during a window is visible; with two reports the series
// overlay, aligned on elapsed time from each run's start, A solid and B
// dashed. The charts and the page style are the module's one chart kit
// (internal/chart), which `sluice demo` draws with too.
//
// Rendering reads a report and never changes it; every function is safe
// for concurrent use.
package render
