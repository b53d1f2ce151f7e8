package load

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// FormatProgress is the live line: one a second while a run is on a terminal.
func FormatProgress(p Progress) string {
	return fmt.Sprintf("step %d window %d %4.0fs  sent %d  ok %d  refused %d  dropped %d  errors %d  %.0f req/s  p99 %s",
		p.Step, p.Window, p.Elapsed.Seconds(), p.Sent, p.OK, p.Refused, p.Dropped, p.Errors, p.Rate, p.P99.Round(10*time.Microsecond))
}

// WriteSummary prints a report as text: the header, one block per window,
// and the verdict.
func WriteSummary(w io.Writer, r *Report) {
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
		fmt.Fprintf(w, "\nstep %d  %s  (%s loop, %d workers", si, st.Label, st.Mode, st.Workers)
		if st.Mode == "open" {
			fmt.Fprintf(w, ", queue %d", st.QueueDepth)
		}
		fmt.Fprintln(w, ")")
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "win\tsched\tsent\tok\trefused\thttp_err\ttransp_err\tunfin\tdropped\tok/s\tresp p50\tresp p99\treq p99\twait p99\tlag p99\tdriver\t")
		for _, win := range st.Windows {
			c := win.Counts
			l := win.Latency
			drv := "ok"
			if win.Driver.Limited {
				drv = "LIMITED"
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				win.Index, c.Scheduled, c.Sent, c.OK, c.Refused, c.HTTPError, c.TransportError, c.Unfinished, c.Dropped,
				win.Rates.OK, fmtMS(l.ResponseTime.P50), fmtMS(l.ResponseTime.P99), fmtMS(l.RequestTime.P99),
				fmtMS(l.ScheduleWait.P99), fmtMS(win.Driver.ScheduleLag.P99), drv)
		}
		tw.Flush()
		for _, win := range st.Windows {
			var extra []string
			for _, rf := range win.Counts.Refusals {
				g := rf.Gate
				if g == "" {
					g = "(no envelope)"
				}
				extra = append(extra, fmt.Sprintf("refused %d by %s/%s (%d)", rf.Count, g, rf.Reason, rf.Status))
			}
			for k, v := range win.Counts.TransportErrors {
				extra = append(extra, fmt.Sprintf("transport %s %d", k, v))
			}
			if m := win.Metrics; m != nil {
				if m.Error != "" {
					extra = append(extra, "metrics: "+m.Error)
				} else {
					extra = append(extra, fmt.Sprintf("server rejections %.0f, refusals attributed %d, unattributed %d", m.RejectedTotal, m.Attributed, m.Unattributed))
					if m.ServerCPUPerOKMillis != nil {
						extra = append(extra, fmt.Sprintf("server CPU %.3f ms per ok", *m.ServerCPUPerOKMillis))
					}
				}
			}
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

// WriteCliffTable prints one row per step: the cliff test's table
// (requests/s, % refused, p50 and p99 response time). A step with several
// windows shows each window; percentiles are never combined.
func WriteCliffTable(w io.Writer, r *Report) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\twin\tok req/s\trefused %\terrors\tdropped\tp50\tp99\t")
	for _, st := range r.Steps {
		for _, win := range st.Windows {
			c := win.Counts
			pct := 0.0
			if c.Sent > 0 {
				pct = 100 * float64(c.Refused) / float64(c.Sent)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f%%\t%d\t%d\t%s\t%s\t\n", st.Label, win.Index, win.Rates.OK, pct,
				c.HTTPError+c.TransportError+c.Unfinished, c.Dropped,
				fmtMS(win.Latency.ResponseTime.P50), fmtMS(win.Latency.ResponseTime.P99))
		}
	}
	tw.Flush()
	if r.Verdict.Status != StatusNone {
		fmt.Fprintf(w, "verdict: %s\n", r.Verdict.Status)
		for _, s := range r.Verdict.Reasons {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
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
