package doctor

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes the diagnosis for a person: the gates' rates over the
// interval, the findings (most severe first), and the goroutine summary
// when there is one.
func (d *Diagnosis) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "over %s:\n\n", secs(d.Interval))
	if len(d.Gates) > 0 {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "gate\toffered/s\tadmitted/s\trefused/s\tcompleted/s\tinflight\twaiting\tcapacity\thold mean\twait mean")
		for _, g := range d.Gates {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Gate, num(g.Offered), num(g.Admitted), num(g.Refused),
				num(g.Completed), num(g.Inflight), num(g.Waiting), num(g.Capacity), secs(g.HoldMean), secs(g.WaitMean))
		}
		_ = tw.Flush()
		fmt.Fprintln(ew)
	}
	if len(d.Findings) == 0 {
		fmt.Fprintln(ew, "no findings: arrivals, completions, queues and counters are consistent.")
	} else {
		fmt.Fprintf(ew, "findings (%d):\n", len(d.Findings))
		for _, f := range d.Findings {
			fmt.Fprintf(ew, "\n[%s] %s\n", f.Severity, f.Code)
			fmt.Fprintf(ew, "  seen:    %s\n", f.Seen)
			fmt.Fprintf(ew, "  meaning: %s\n", f.Meaning)
			fmt.Fprintf(ew, "  next:    %s\n", f.Next)
		}
	}
	if s := d.Goroutines; s != nil {
		fmt.Fprintf(ew, "\ngoroutines (%d), by where they wait:\n", s.Total)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  where\tcount\tlongest\ttop sites")
		for _, g := range s.Groups {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", g.Where, g.Count, longestOf(g), topSites(g))
		}
		_ = tw.Flush()
	}
	return ew.err
}

// errWriter keeps the first write error so the rendering code stays flat.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// longestOf is a group's longest wait: from the server's figures when
// Diagnose knows them, else the dump's minutes; a dump without minutes
// says every wait was under a minute (Go prints the wait from a minute
// on). Running goroutines do not wait.
func longestOf(g GoroutineGroup) string {
	switch {
	case g.LongestMinutes > 0 && float64(g.LongestMinutes)*60 >= g.LongestSeconds:
		return fmt.Sprintf("%d min", g.LongestMinutes)
	case g.LongestSeconds > 0 && g.LongestAtLeast:
		return "≥ " + secs(g.LongestSeconds)
	case g.LongestSeconds > 0:
		return secs(g.LongestSeconds)
	case g.Where == WhereRunning:
		return "-"
	}
	return "< 1 min"
}
