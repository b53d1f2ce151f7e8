package demo

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the comparison: one row per variant and step, with
// cached and uncached work side by side (goodput, refusal %, the share the
// driver dropped or that failed, and the p99 of ok answers).
func WriteTable(w io.Writer, res *Result) error {
	how := "measured"
	if !res.Measured {
		how = "given"
	}
	fmt.Fprintf(w, "capacity (1×): %.0f uncached req/s, %s (disk: %d channels, %v a read); each step offers that many\n",
		res.Capacity, how, res.Disk.Channels, res.Disk.Service)
	fmt.Fprintf(w, "uncached and as many cached req/s, times the step, for %v; fixed gates: %d slots; adaptive: %s, SLO %v\n\n",
		res.StepDuration, res.WorkLimit, res.Law, res.SLO)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// offered/s is per class: as many cached as uncached requests.
	fmt.Fprintln(tw, "variant\tstep\toffered/s\t  cached ok/s\trefused\tlost\tok p99\t  uncached ok/s\trefused\tlost\tok p99\t")
	for _, r := range res.Runs {
		for i, st := range r.Steps {
			name := ""
			if i == 0 {
				name = string(r.Variant)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n", name, FormatMultiplier(st.Multiplier),
				st.Uncached.Offered, st.Cached.Goodput, pct(st.Cached.RefusedPercent), pct(lostPercent(st.Cached)), formatP99(st.Cached),
				st.Uncached.Goodput, pct(st.Uncached.RefusedPercent), pct(lostPercent(st.Uncached)), formatP99(st.Uncached))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\noffered/s: requests a second of each class; ok/s: ok answers to the step's requests, per second of the step")
	fmt.Fprintln(w, "(goodput); refused: 503s; lost: dropped by the driver (its queue was full) or failed; ok p99: response time")
	fmt.Fprintln(w, "of ok answers, from when each request was due.")
	for _, n := range Notes(res) {
		fmt.Fprintln(w, "note: "+n)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// formatP99 writes a class's p99, marked "≥" when it sits at the driver's
// ceiling (Class.P99Capped).
func formatP99(c Class) string {
	if c.P99Capped {
		return "≥" + FormatMS(c.P99)
	}
	return FormatMS(c.P99)
}

// overshoot is how far above the measured capacity a step's uncached
// goodput must be for Notes to explain it: a 1 s probe of a disk of 4
// channels measures its capacity within several percent, so a gated
// variant's 104/s against a measured 97/s is the probe's spread, not
// requests carried over from the step before.
const overshoot = 1.2

// Notes says what the table's numbers need said beside them, each in a
// sentence computed from them: p99s that sit at the driver's ceiling,
// goodput above the measured capacity and why, gates whose books do not
// close, drivers that fell behind their timetable.
func Notes(res *Result) []string {
	var out []string
	var capped []string
	for _, r := range res.Runs {
		for _, st := range r.Steps {
			if st.Uncached.P99Capped {
				capped = append(capped, fmt.Sprintf("%s at %s", r.Variant, FormatMultiplier(st.Multiplier)))
			}
		}
	}
	if len(capped) > 0 {
		out = append(out, fmt.Sprintf("≥ marks a p99 at the driver's ceiling (uncached: %s): the driver lost requests in that step because its %d workers "+
			"and %d queued places were all taken, so no request it did send waited longer than about (%d + %d) ÷ %.0f/s + one read = %s. "+
			"That p99 is a floor for what clients would see, set by the driver, not the server's latency: the requests that would have waited longer were lost.",
			strings.Join(capped, ", "), DriverWorkers, DriverQueue, DriverWorkers, DriverQueue, res.Capacity, FormatMS(float64(res.Ceiling())/1e6)))
	}
	for _, r := range res.Runs {
		for _, st := range r.Steps {
			if st.Uncached.Goodput > overshoot*res.Capacity {
				out = append(out, fmt.Sprintf("%s's uncached ok/s at %s (%.0f/s) is above the capacity (%.0f/s): each step counts the ok answers to the requests "+
					"scheduled in it, and requests that piled up in one step (at the disk, and in the driver) are still being answered during the next, "+
					"while that step's own requests wait or are lost. Over the whole run no variant completes more than the disk can.",
					r.Variant, FormatMultiplier(st.Multiplier), st.Uncached.Goodput, res.Capacity))
				break
			}
		}
	}
	for _, r := range res.Runs {
		if !r.BooksClosed {
			out = append(out, fmt.Sprintf("WARNING: %s: the gate's books do not close (offered %d, admitted %d, completed %d, in flight %d).",
				r.Variant, r.Gate.Offered, r.Gate.Admitted, r.Gate.Completed.Total(), r.Gate.Inflight))
		}
		if r.DriverLimited {
			out = append(out, fmt.Sprintf("%s: the driver fell behind its timetable (a busy machine); its figures understate the load.", r.Variant))
		}
	}
	return out
}

func lostPercent(c Class) float64 {
	if c.Scheduled == 0 {
		return 0
	}
	return 100 * float64(c.Dropped+c.Errors) / float64(c.Scheduled)
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", v) }

// FormatMultiplier writes 2 as "2×" and 1.5 as "1.5×".
func FormatMultiplier(m float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", m), "0"), ".") + "×"
}

// FormatMS writes milliseconds readably ("0.4ms", "38ms", "1.25s"); NaN
// (nothing measured) is "-".
func FormatMS(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v < 10:
		return fmt.Sprintf("%.1fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.2fs", v/1000)
}

// find returns the run of variant v, or nil.
func (res *Result) find(v Variant) *VariantResult {
	for i := range res.Runs {
		if res.Runs[i].Variant == v {
			return &res.Runs[i]
		}
	}
	return nil
}

// Summary says in two sentences what the table shows, from its numbers:
// how the bug and the fix compare on cached work, and how the variants
// compare on the latency of uncached work at the heaviest step.
func Summary(res *Result) string {
	return cachedSentence(res) + " " + uncachedSentence(res)
}

// cachedSentence compares the request-scoped and disk-scoped gates on
// cached goodput at the heaviest step, and counts the steps above 1× at
// which the fix served more cached requests than the bug.
func cachedSentence(res *Result) string {
	bug, fix := res.find(RequestScope), res.find(DiskScope)
	if bug == nil || fix == nil || len(bug.Steps) == 0 || len(bug.Steps) != len(fix.Steps) {
		return "The run did not include both the request-scoped and the disk-scoped gate, so it cannot compare the bug with the fix."
	}
	top := len(fix.Steps) - 1
	b, f := bug.Steps[top], fix.Steps[top]
	ahead, above := 0, 0
	for i := range fix.Steps {
		if fix.Steps[i].Multiplier <= 1 {
			continue
		}
		above++
		if fix.Steps[i].Cached.Goodput > bug.Steps[i].Cached.Goodput {
			ahead++
		}
	}
	at := FormatMultiplier(f.Multiplier)
	if f.Cached.Goodput > b.Cached.Goodput {
		where := ""
		switch {
		case above > 0 && ahead == above:
			where = ", and it was ahead at every step above 1×"
		case above > 0:
			where = fmt.Sprintf(", though it was ahead at only %d of the %d steps above 1×", ahead, above)
		}
		return fmt.Sprintf("At %s capacity the request-scoped gate (the bug) refused %s of cached requests and served %.0f/s of them, "+
			"while the disk-scoped gate (the fix) served %.0f/s with %s refused%s: taking the slot before the cache lookup turns cache hits away once slow disk reads fill the gate.",
			at, pct(b.Cached.RefusedPercent), b.Cached.Goodput, f.Cached.Goodput, pct(f.Cached.RefusedPercent), where)
	}
	return fmt.Sprintf("At %s capacity the disk-scoped gate (the fix) served no more cached requests than the request-scoped gate (the bug): "+
		"%.0f/s against %.0f/s, with %s and %s refused, so this run does not show the bug (a machine too busy to overload the disk can hide it).",
		at, f.Cached.Goodput, b.Cached.Goodput, pct(f.Cached.RefusedPercent), pct(b.Cached.RefusedPercent))
}

// uncachedSentence ranks the variants by the p99 of admitted uncached
// requests at the heaviest step and says what the fastest and slowest
// paid for it in refusals.
func uncachedSentence(res *Result) string {
	type entry struct {
		v   Variant
		c   Class
		lim int64
	}
	var es []entry
	for _, r := range res.Runs {
		if len(r.Steps) == 0 {
			continue
		}
		e := entry{v: r.Variant, c: r.Steps[len(r.Steps)-1].Uncached, lim: -1}
		if len(r.Limit) > 0 {
			e.lim = r.Limit[len(r.Limit)-1].Limit
		}
		if !math.IsNaN(e.c.P99) {
			es = append(es, e)
		}
	}
	if len(es) < 2 {
		return "Too few variants completed uncached requests at the heaviest step to compare their latency."
	}
	best, worst := es[0], es[0]
	for _, e := range es[1:] {
		if e.c.P99 < best.c.P99 {
			best = e
		}
		if e.c.P99 > worst.c.P99 {
			worst = e
		}
	}
	at := FormatMultiplier(res.Runs[0].Steps[len(res.Runs[0].Steps)-1].Multiplier)
	limit := func(e entry) string {
		if e.lim < 0 {
			return ""
		}
		return fmt.Sprintf(", ending at %d slots", e.lim)
	}
	tail := "."
	if best.c.RefusedPercent >= worst.c.RefusedPercent+10 {
		tail = ": refusing the excess at once kept the wait short for what was admitted."
	}
	p99 := func(c Class) string {
		if c.P99Capped {
			return "at least " + FormatMS(c.P99)
		}
		return FormatMS(c.P99)
	}
	return fmt.Sprintf("For uncached work at %s the p99 of ok answers was highest with %s (%s, %.0f/s served, %s refused, %s lost) "+
		"and lowest with %s (%s, %.0f/s served, %s refused%s)%s",
		at, worst.v, p99(worst.c), worst.c.Goodput, pct(worst.c.RefusedPercent), pct(lostPercent(worst.c)),
		best.v, p99(best.c), best.c.Goodput, pct(best.c.RefusedPercent), limit(best), tail)
}
