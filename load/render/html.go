package render

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/sluicehq/sluice/internal/atomicfile"
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
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><title>%s</title><style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}td,th{border:1px solid #ccc;padding:2px 7px;text-align:right}th{background:#f4f4f4}
td.l{text-align:left}.v-PASS{color:#080}.v-FAIL{color:#b00}.v-INVALID{color:#a60}pre{background:#f8f8f8;padding:1em;overflow:auto;font-size:12px}
svg{background:#fff;border:1px solid #ddd;margin:.3em 0;display:block}.note{color:#555;font-size:13px}</style></head><body><h1>%s</h1>
`, html.EscapeString(title), html.EscapeString(title))
	letters := []string{"A", "B", "C", "D"}
	tag := func(i int) string {
		if len(rs) > 1 {
			return letters[i%len(letters)] + " "
		}
		return ""
	}
	for i, r := range rs {
		fmt.Fprintf(&b, `<p>%s<b>%s</b> — %s, %s %s, host %s (%d cpus), started %s — verdict <b class="v-%s">%s</b></p>`,
			tag(i), html.EscapeString(names[i]), html.EscapeString(r.Kind), html.EscapeString(r.Tool.Module),
			html.EscapeString(r.Tool.Version), html.EscapeString(r.Host.Hostname), r.Host.CPUs,
			r.Started.Format("2006-01-02 15:04:05Z"), html.EscapeString(r.Verdict.Status), html.EscapeString(r.Verdict.Status))
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
	chart := func(heading, unit string, picks []pick) {
		var ss []tseries
		for i, tl := range tls {
			for _, p := range picks {
				s := tseries{Name: tag(i) + p.name, Color: p.color, Width: p.width, Dash: i > 0}
				for _, pt := range tl.points {
					if pt.gap {
						s.Points = append(s.Points, xy{pt.x, math.NaN()})
						continue
					}
					s.Points = append(s.Points, xy{pt.x, p.f(pt.s)})
				}
				ss = append(ss, s)
			}
		}
		fmt.Fprintf(&b, "<h2>%s</h2>\n", html.EscapeString(heading))
		b.WriteString(timeChart(unit, xmax, ss, tls[0].bands))
	}
	chart("Answers per second", "per second", []pick{
		{"ok", "#2ca02c", 2, func(s load.Second) float64 { return float64(s.OK) }},
		{"refused", "#d62728", 2.5, func(s load.Second) float64 { return float64(s.Refused) }},
		{"dropped (driver)", "#ff7f0e", 2.5, func(s load.Second) float64 { return float64(s.Dropped) }},
		{"errors", "#9467bd", 2, func(s load.Second) float64 { return float64(s.Errors) }},
	})
	chart("Response time (ms, from the scheduled time)", "ms", []pick{
		{"ok p99", "#2ca02c", 2.5, func(s load.Second) float64 { return orGap(s.OK > 0, s.OKResponseP99) }},
		{"all p99", "#1f77b4", 2, func(s load.Second) float64 { return orGap(s.OK+s.Refused > 0 || s.ResponseP99 > 0, s.ResponseP99) }},
		{"all p50", "#17becf", 1.5, func(s load.Second) float64 { return orGap(s.OK+s.Refused > 0 || s.ResponseP50 > 0, s.ResponseP50) }},
	})
	chart("Driver schedule lag p99 (ms): did the driver keep its timetable?", "ms", []pick{
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
				rate := trimFloat(p.RateFrom)
				if p.RateTo != p.RateFrom {
					rate += ".." + trimFloat(p.RateTo)
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

type xy struct{ x, y float64 }

type tseries struct {
	Name   string
	Color  string
	Width  float64
	Dash   bool
	Points []xy // a NaN y breaks the line
}

// timeChart draws series over elapsed seconds [0, xmax] as an SVG line
// chart with a linear y axis from zero, shading the windows in bands.
func timeChart(yLabel string, xmax float64, ss []tseries, bands [][2]float64) string {
	const W, H, L, R, T, B = 1000.0, 280.0, 60.0, 190.0, 14.0, 36.0
	if !(xmax > 0) {
		xmax = 1
	}
	ymax := 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			if !math.IsNaN(p.y) && !math.IsInf(p.y, 0) && p.y > ymax {
				ymax = p.y
			}
		}
	}
	ymax = niceCeil(ymax)
	pw, ph := W-L-R, H-T-B
	x := func(v float64) float64 { return L + pw*math.Min(math.Max(v/xmax, 0), 1) }
	y := func(v float64) float64 { return T + ph - ph*math.Min(v/ymax, 1) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-size="11">`, W, H, W, H)
	for _, bd := range bands {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f3f3f3"/>`, x(bd[0]), T, math.Max(x(bd[1])-x(bd[0]), 0), ph)
	}
	for k := 0; k <= 4; k++ {
		v := ymax * float64(k) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			L, y(v), L+pw, y(v), L-4, y(v)+4, trimFloat(v))
	}
	step := niceCeil(xmax / 10)
	for v := 0.0; v <= xmax+1e-9; v += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><text x="%.1f" y="%.1f" text-anchor="middle">%ss</text>`,
			x(v), T+ph, x(v), T+ph+4, x(v), T+ph+16, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`, T+ph/2, T+ph/2, html.EscapeString(yLabel))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">elapsed since the run started</text>`, L+pw/2, H-4)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`, L, T+ph, L+pw, T+ph)
	for si, s := range ss {
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="7 4"`
		}
		var seg []string
		flush := func() {
			if len(seg) == 1 {
				xy := strings.Split(seg[0], ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2" fill="%s"/>`, xy[0], xy[1], s.Color)
			} else if len(seg) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f"%s points="%s"/>`, s.Color, s.Width, dash, strings.Join(seg, " "))
			}
			seg = seg[:0]
		}
		for _, p := range s.Points {
			if math.IsNaN(p.y) || math.IsInf(p.y, 0) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", x(p.x), y(p.y)))
		}
		flush()
		ly := T + 8 + 15*float64(si)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/><text x="%.1f" y="%.1f">%s</text>`,
			L+pw+12, ly, L+pw+40, ly, s.Color, s.Width, dash, L+pw+46, ly+4, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
