package render

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/load"
)

// ProgressLine is the live line: one a second while a run is on a terminal.
func ProgressLine(p load.Progress) string {
	return fmt.Sprintf("step %d window %d %4.0fs  sent %d  ok %d  refused %d  dropped %d  errors %d  %.0f req/s  p99 %s",
		p.Step, p.Window, p.Elapsed.Seconds(), p.Sent, p.OK, p.Refused, p.Dropped, p.Errors, p.Rate, p.P99.Round(10*time.Microsecond))
}

// Text prints a report as text: the header, one block per window,
// and the verdict.
func Text(w io.Writer, r *load.Report) {
	fmt.Fprintf(w, "%s %s  %s %s", r.Schema, r.Kind, r.Tool.Module, r.Tool.Version)
	if r.Tool.Revision != "" {
		fmt.Fprintf(w, " rev %.12s", r.Tool.Revision)
		if r.Tool.Dirty {
			fmt.Fprint(w, " (dirty)")
		}
	}
	fmt.Fprintf(w, "\nhost %s  %d cpus  GOMAXPROCS %d  started %s\n", r.Host.Hostname, r.Host.CPUs, r.Host.GOMAXPROCS, r.Started.Format(time.RFC3339))
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the run was stopped early")
	}
	if r.Aborted != "" {
		fmt.Fprintln(w, "ABORTED:", r.Aborted)
	}
	for si, st := range r.Steps {
		fmt.Fprintf(w, "\nstep %d  %s  (%s loop", si, st.Label, st.Mode)
		switch {
		case st.Arrivals == load.Poisson && st.Seed > 0:
			fmt.Fprintf(w, ", poisson arrivals, seed %d", st.Seed)
		case st.Arrivals != "":
			fmt.Fprintf(w, ", %s arrivals", st.Arrivals)
		}
		fmt.Fprintf(w, ", %d workers", st.Workers)
		if st.Mode == "open" {
			fmt.Fprintf(w, ", queue %d", st.QueueDepth)
		}
		fmt.Fprintln(w, ")")
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "win\tsched\tsent\tok\trefused\thttp_err\ttransp_err\tunfin\tdropped\tok/s\tok p50\tok p99\tall p50\tall p99\texchange p99\tsched wait p99\tpacer lag p99\tdriver\t")
		for _, win := range st.Windows {
			c := win.Counts
			l := win.Latency
			drv := DriverColumn(win)
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				win.Index, c.Scheduled, c.Sent, c.OK, c.Refused, c.HTTPError, c.TransportError, c.Unfinished, c.Dropped,
				win.Rates.OK, fmtDist(l.OKResponseTime, l.OKResponseTime.P50), fmtDist(l.OKResponseTime, l.OKResponseTime.P99),
				fmtDist(l.ResponseTime, l.ResponseTime.P50), fmtDist(l.ResponseTime, l.ResponseTime.P99),
				fmtDist(l.RequestTime, l.RequestTime.P99), fmtDist(l.ScheduleWait, l.ScheduleWait.P99),
				fmtDist(win.Driver.ScheduleLag, win.Driver.ScheduleLag.P99), drv)
		}
		tw.Flush()
		if si == 0 {
			for _, l := range legend {
				fmt.Fprintln(w, "  "+l)
			}
		}
		for _, win := range st.Windows {
			if len(win.Phases) > 0 {
				writePhases(w, win)
			}
		}
		for _, win := range st.Windows {
			var extra []string
			for _, rf := range win.Counts.Refusals {
				g := rf.Gate
				if g == "" {
					g = "(no envelope)"
				}
				extra = append(extra, fmt.Sprintf("refused %d by %s/%s (%d)", rf.Count, g, rf.Reason, rf.Status))
			}
			extra = append(extra, DropLines(st, win)...)
			for _, k := range sortedKeys(win.Counts.TransportErrors) {
				extra = append(extra, fmt.Sprintf("transport %s %d", k, win.Counts.TransportErrors[k]))
			}
			extra = append(extra, metricsLines(win)...)
			for _, s := range win.Driver.Reasons {
				extra = append(extra, "driver-limited: "+s)
			}
			if len(extra) > 0 {
				fmt.Fprintf(w, "  window %d: %s\n", win.Index, strings.Join(extra, "; "))
			}
		}
	}
	v := r.Verdict
	fmt.Fprintf(w, "\nverdict: %s", v.Status)
	if v.Case != "" {
		fmt.Fprintf(w, " (case %s)", v.Case)
	}
	fmt.Fprintln(w)
	for _, s := range v.Reasons {
		fmt.Fprintf(w, "  - %s\n", s)
	}
}

// legend explains every column of the window table, one line each.
var legend = []string{
	"sched: arrivals due in the window (closed loop: requests begun); sent: handed to the server; sched = sent + dropped.",
	"ok: answered 1xx-3xx.",
	"refused: answered 503 or 429, a gate or quota turning the request away (which one, below).",
	"http_err: answered with any other 4xx or 5xx.",
	"transp_err: no HTTP answer: connection refused or reset, timeout, EOF, DNS, TLS (kinds below).",
	"unfin: still in flight when the run was stopped (Ctrl-C, or a drain that timed out); sent = ok + refused + http_err + transp_err + unfin.",
	"dropped: never sent: the driver's bounded queue was full (queue_full) or the run stopped with it queued (canceled); why, below.",
	"ok p50, ok p99: response time of ok answers; all: of every answer (fast refusals pull it down); both from the scheduled time.",
	"exchange: send to last byte. sched wait: scheduled to sent (the driver's own queue). pacer lag: scheduled to hand-off.",
	"driver: ok = the driver kept its timetable; LIMITED = it did not (the window is INVALID: its figures are the driver's); " +
		"\"ok, drops\" = it kept its timetable but dropped arrivals, which the line below explains.",
}

// DriverColumn is a window's "driver" cell: LIMITED when the window is
// driver-limited, "ok, drops" when the driver kept its timetable but
// dropped arrivals (DropLines says why), else ok.
func DriverColumn(win load.Window) string {
	switch {
	case win.Driver.Limited:
		return "LIMITED"
	case win.Counts.Dropped > 0:
		return "ok, drops"
	}
	return "ok"
}

// DropLines explains a window's drops: how many of the arrivals, for which
// reason, and whose doing they are. Drops from a full queue while the
// server answered within the p99 budget are the driver's (too few
// workers: the window is driver-limited); while it answered slower they
// are the server's: a slow server fills any bounded queue, and the drops
// are what its clients would have met.
func DropLines(st load.Step, win load.Window) []string {
	c := win.Counts
	if c.Dropped == 0 {
		return nil
	}
	var out []string
	share := 100 * float64(c.Dropped) / float64(max(c.Scheduled, 1))
	if n := c.DropReasons[load.DropQueueFull]; n > 0 {
		queue := fmt.Sprintf("its queue of %d in front of %d workers", st.QueueDepth, st.Workers)
		p99, budget := win.Latency.RequestTime.P99, st.Settings.P99BudgetMS
		switch {
		case win.Latency.RequestTime.Count > 0 && budget > 0 && p99 > budget:
			out = append(out, fmt.Sprintf("dropped %d of %d arrivals (%.1f%%) because %s was full: the server was slow (request time p99 %s, over the %s budget), "+
				"so the drops are the server's doing, what its clients would have met", n, c.Scheduled, share, queue, fmtMS(p99), fmtMS(budget)))
		default:
			out = append(out, fmt.Sprintf("dropped %d of %d arrivals (%.1f%%) because %s was full while the server answered within the %s budget: "+
				"too few workers for the rate, the driver's own doing (raise --workers)", n, c.Scheduled, share, queue, fmtMS(budget)))
		}
	}
	if n := c.DropReasons[load.DropCanceled]; n > 0 {
		out = append(out, fmt.Sprintf("dropped %d arrivals still queued when the run stopped", n))
	}
	return out
}

// CliffTable prints one row per step: the cliff test's table
// (requests/s, % refused, p50 and p99 response time). A step with several
// windows shows each window; percentiles are never combined.
func CliffTable(w io.Writer, r *load.Report) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\twin\tok req/s\trefused %\terrors\tdropped\tok p50\tok p99\tall p50\tall p99\t")
	for _, st := range r.Steps {
		for _, win := range st.Windows {
			c := win.Counts
			pct := 0.0
			if c.Sent > 0 {
				pct = 100 * float64(c.Refused) / float64(c.Sent)
			}
			l := win.Latency
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f%%\t%d\t%d\t%s\t%s\t%s\t%s\t\n", st.Label, win.Index, win.Rates.OK, pct,
				c.HTTPError+c.TransportError+c.Unfinished, c.Dropped,
				fmtDist(l.OKResponseTime, l.OKResponseTime.P50), fmtDist(l.OKResponseTime, l.OKResponseTime.P99),
				fmtDist(l.ResponseTime, l.ResponseTime.P50), fmtDist(l.ResponseTime, l.ResponseTime.P99))
		}
	}
	tw.Flush()
	if r.Verdict.Status != load.StatusNone {
		fmt.Fprintf(w, "verdict: %s\n", r.Verdict.Status)
		for _, s := range r.Verdict.Reasons {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
}

// fmtDist formats a percentile of d, or "-" when d holds nothing (an ok
// p99 of a window without ok answers is not 0 ms).
func fmtDist(d load.Dist, v float64) string {
	if d.Count == 0 {
		return "-"
	}
	return fmtMS(v)
}

// writePhases prints one row per step (or tenth of a ramp) of a window.
func writePhases(w io.Writer, win load.Window) {
	fmt.Fprintf(w, "  window %d by step:\n", win.Index)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  \trate/s\tfrom\tto\tsched\tok\trefused\terrors\tdropped\tok/s\tok p50\tok p99\tall p99\t")
	for _, p := range win.Phases {
		rate := chart.Num(p.RateFrom)
		if p.RateTo != p.RateFrom {
			rate += ".." + chart.Num(p.RateTo)
		}
		c := p.Counts
		fmt.Fprintf(tw, "  \t%s\t%.1fs\t%.1fs\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t\n", rate, p.StartS, p.EndS,
			c.Scheduled, c.OK, c.Refused, c.Errors, c.Dropped, p.Rates.OK,
			fmtDist(p.OKResponseTime, p.OKResponseTime.P50), fmtDist(p.OKResponseTime, p.OKResponseTime.P99),
			fmtDist(p.ResponseTime, p.ResponseTime.P99))
	}
	tw.Flush()
}

// metricsLines says what the server's metrics showed in a window: its
// rejections and how many refusals they explain, its CPU (or that it does
// not export any), and each gate's books.
func metricsLines(win load.Window) []string {
	m := win.Metrics
	if m == nil {
		return nil
	}
	if m.Error != "" {
		return []string{"metrics: " + m.Error}
	}
	out := []string{fmt.Sprintf("server rejections %.0f, refusals attributed %d, unattributed %d", m.RejectedTotal, m.Attributed, m.Unattributed)}
	switch {
	case m.ServerCPUPerOKMillis != nil:
		out = append(out, fmt.Sprintf("server CPU %.3f ms per ok", *m.ServerCPUPerOKMillis))
	case m.ServerCPUSeconds != nil:
		out = append(out, fmt.Sprintf("server CPU %.3f s (no ok answers)", *m.ServerCPUSeconds))
	default:
		out = append(out, "server CPU: not exported (no process_cpu_seconds_total)")
	}
	for _, g := range m.Gates {
		line := fmt.Sprintf("gate %s occupancy %.2f slots", g.Gate, g.Occupancy)
		if g.Capacity != nil && *g.Capacity > 0 {
			line += fmt.Sprintf(" of %g", *g.Capacity)
		}
		if g.Closed {
			line += fmt.Sprintf(", books close (admitted = completed = %.0f)", g.Admitted)
		} else {
			line += ", BOOKS DO NOT CLOSE: " + strings.Join(g.Problems, ", ")
		}
		out = append(out, line)
	}
	return out
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func fmtMS(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.3fms", v)
	}
}
