package render

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/sluicehq/sluice/internal/atomicfile"
	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/load"
)

// HTML draws reports as one self-contained page (inline SVG, no scripts,
// nothing fetched). For each report it draws the per-second timeline of
// every window on one axis of elapsed seconds since the run started: ok,
// refused, dropped and errors per second (refusals red, drops orange, so
// trouble shows at a glance), response-time p50/p99 and ok p99, and the
// pacer's schedule lag. With several reports the series overlay, aligned on
// elapsed time (A solid, B dashed), so runs of different shapes compare
// second by second, never by window number. Below the charts: a table of
// every window and step, and each report's text summary.
func HTML(rs []*load.Report, names []string) []byte {
	var b bytes.Buffer
	title := "sluice load report"
	if len(rs) == 2 {
		title = "sluice load A/B: " + names[0] + " vs " + names[1]
	}
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body><h1>%s</h1>\n",
		html.EscapeString(title), chart.Style, html.EscapeString(title))
	letters := []string{"A", "B", "C", "D"}
	tag := func(i int) string {
		if len(rs) > 1 {
			return letters[i%len(letters)] + " "
		}
		return ""
	}
	for i, r := range rs {
		fmt.Fprintf(&b, `<p>%s<b>%s</b> — %s — verdict <b class="v-%s">%s</b></p>`,
			tag(i), html.EscapeString(names[i]), html.EscapeString(reportFacts(r)), html.EscapeString(r.Verdict.Status), html.EscapeString(r.Verdict.Status))
	}

	tls := make([]timeline, len(rs))
	xmax := 0.0
	for i, r := range rs {
		tls[i] = timelineOf(r)
		xmax = max(xmax, tls[i].end)
	}
	b.WriteString(`<p class="note">Each point is one second of scheduled arrivals, placed at its elapsed time since the run started; grey bands are the first report's windows (the drains between windows are gaps).`)
	if len(rs) > 1 {
		b.WriteString(` Reports overlay on elapsed time: A solid, B dashed.`)
	}
	b.WriteString("</p>\n")

	type pick struct {
		name, color string
		width       float64
		f           func(load.Second) float64
	}
	draw := func(heading, unit string, picks []pick) {
		c := chart.Chart{Width: 1000, Height: 280, Legend: 190, XMax: xmax, XUnit: "s", YLabel: unit, XLabel: "elapsed since the run started"}
		for _, bd := range tls[0].bands {
			c.Bands = append(c.Bands, chart.Band{From: bd[0], To: bd[1]})
		}
		for i, tl := range tls {
			for _, p := range picks {
				s := chart.Series{Name: tag(i) + p.name, Color: p.color, Width: p.width}
				if i > 0 {
					s.Dash = "7 4"
				}
				for _, pt := range tl.points {
					if pt.gap {
						s.Points = append(s.Points, chart.Point{X: pt.x, Y: math.NaN()})
						continue
					}
					s.Points = append(s.Points, chart.Point{X: pt.x, Y: p.f(pt.s)})
				}
				c.Series = append(c.Series, s)
			}
		}
		fmt.Fprintf(&b, "<h2>%s</h2>\n", html.EscapeString(heading))
		b.WriteString(c.SVG())
	}
	draw("Answers per second", "per second", []pick{
		{"ok", "#2ca02c", 2, func(s load.Second) float64 { return float64(s.OK) }},
		{"refused", "#d62728", 2.5, func(s load.Second) float64 { return float64(s.Refused) }},
		{"dropped (driver)", "#ff7f0e", 2.5, func(s load.Second) float64 { return float64(s.Dropped) }},
		{"errors", "#9467bd", 2, func(s load.Second) float64 { return float64(s.Errors) }},
	})
	draw("Response time (ms, from the scheduled time)", "ms", []pick{
		{"ok p99", "#2ca02c", 2.5, func(s load.Second) float64 { return orGap(s.OK > 0, s.OKResponseP99) }},
		{"all p99", "#1f77b4", 2, func(s load.Second) float64 { return orGap(s.OK+s.Refused > 0 || s.ResponseP99 > 0, s.ResponseP99) }},
		{"all p50", "#17becf", 1.5, func(s load.Second) float64 { return orGap(s.OK+s.Refused > 0 || s.ResponseP50 > 0, s.ResponseP50) }},
	})
	draw("Driver schedule lag p99 (ms): did the driver keep its timetable?", "ms", []pick{
		{"pacer lag p99", "#7f7f7f", 2, func(s load.Second) float64 { return orGap(s.Scheduled > 0, s.LagP99) }},
	})

	for i, r := range rs {
		fmt.Fprintf(&b, "<h2>%sWindows and steps: %s</h2>\n", tag(i), html.EscapeString(names[i]))
		b.WriteString(windowTable(r))
	}
	for i, r := range rs {
		var txt bytes.Buffer
		Text(&txt, r)
		fmt.Fprintf(&b, "<h2>%sSummary: %s</h2><pre>%s</pre>\n", tag(i), html.EscapeString(names[i]), html.EscapeString(txt.String()))
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// orGap is v, or NaN (a gap in the line) when there is nothing to measure:
// a second without ok answers has no ok latency, not a latency of 0.
func orGap(measured bool, v float64) float64 {
	if !measured {
		return math.NaN()
	}
	return v
}

// WriteHTML renders rs (see HTML) into the file at path, atomically.
func WriteHTML(path string, rs []*load.Report, names []string) error {
	return atomicfile.Write(path, HTML(rs, names))
}

// timeline is a report's seconds laid out on elapsed time.
type timeline struct {
	points []tpoint
	bands  [][2]float64 // windows, [start, end) in elapsed seconds
	end    float64
}

type tpoint struct {
	x   float64
	s   load.Second
	gap bool // breaks the line (between windows)
}

// timelineOf places every window's seconds at their elapsed time since the
// run started; a window's start comes from its own clock reading, so
// drains and scrapes between windows show as gaps.
func timelineOf(r *load.Report) timeline {
	var tl timeline
	for _, st := range r.Steps {
		for _, w := range st.Windows {
			x0 := w.Started.Sub(r.Started).Seconds()
			if x0 < 0 || math.IsNaN(x0) || x0 > 1e7 {
				x0 = tl.end // a clock that makes no sense: lay windows end to end
			}
			if len(tl.points) > 0 {
				tl.points = append(tl.points, tpoint{x: x0, gap: true})
			}
			for i, s := range w.Timeline {
				tl.points = append(tl.points, tpoint{x: x0 + float64(i) + 0.5, s: s})
			}
			end := x0 + max(w.DurationS, float64(len(w.Timeline)))
			tl.bands = append(tl.bands, [2]float64{x0, end})
			tl.end = max(tl.end, end)
		}
	}
	return tl
}

// windowTable lists each window, and each step of a stepped window, with
// ok latency first.
func windowTable(r *load.Report) string {
	var b strings.Builder
	b.WriteString("<table><tr><th>step</th><th>window</th><th>rows</th><th>sched</th><th>ok/s</th><th>refused</th><th>dropped</th><th>errors</th><th>ok p50</th><th>ok p99</th><th>all p99</th><th>driver</th></tr>\n")
	for _, st := range r.Steps {
		for _, w := range st.Windows {
			c, l := w.Counts, w.Latency
			drv := DriverColumn(w)
			fmt.Fprintf(&b, `<tr><td class="l">%s</td><td>%d</td><td class="l">window</td><td>%d</td><td>%.1f</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`+"\n",
				html.EscapeString(st.Label), w.Index, c.Scheduled, w.Rates.OK, c.Refused, c.Dropped, c.HTTPError+c.TransportError+c.Unfinished,
				fmtDist(l.OKResponseTime, l.OKResponseTime.P50), fmtDist(l.OKResponseTime, l.OKResponseTime.P99), fmtDist(l.ResponseTime, l.ResponseTime.P99), drv)
			for _, p := range w.Phases {
				rate := chart.Num(p.RateFrom)
				if p.RateTo != p.RateFrom {
					rate += ".." + chart.Num(p.RateTo)
				}
				fmt.Fprintf(&b, `<tr><td></td><td></td><td class="l">%s/s, %.1f–%.1fs</td><td>%d</td><td>%.1f</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td></td></tr>`+"\n",
					rate, p.StartS, p.EndS, p.Counts.Scheduled, p.Rates.OK, p.Counts.Refused, p.Counts.Dropped, p.Counts.Errors,
					fmtDist(p.OKResponseTime, p.OKResponseTime.P50), fmtDist(p.OKResponseTime, p.OKResponseTime.P99), fmtDist(p.ResponseTime, p.ResponseTime.P99))
			}
		}
	}
	b.WriteString("</table>\n")
	return b.String()
}

// reportFacts says what produced a report and where, leaving out what it
// does not record (a driver run as a library has no tool version).
func reportFacts(r *load.Report) string {
	parts := []string{r.Kind}
	if tool := strings.TrimSpace(r.Tool.Module + " " + r.Tool.Version); tool != "" {
		parts = append(parts, tool)
	}
	host := "host " + r.Host.Hostname
	if r.Host.Hostname == "" {
		host = "host unnamed"
	}
	if r.Host.CPUs > 0 {
		host += fmt.Sprintf(" (%d cpus)", r.Host.CPUs)
	}
	parts = append(parts, host, "started "+r.Started.Format("2006-01-02 15:04:05Z"))
	return strings.Join(parts, ", ")
}
