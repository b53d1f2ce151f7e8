package render

import (
	"bytes"
	"fmt"
	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/load/internal/atomicfile"
	"html"
	"math"
	"strings"
)

// HTML draws reports as one self-contained page (inline SVG, no
// scripts, nothing fetched): response-time percentiles per window, ok
// requests/s and refusal % per step, and each report's summary. With two
// reports the charts overlay them (A solid, B dashed) for an A/B comparison.
func HTML(rs []*load.Report, names []string) []byte {
	var b bytes.Buffer
	title := "sluice load report"
	if len(rs) == 2 {
		title = "sluice load A/B: " + names[0] + " vs " + names[1]
	}
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><title>%s</title><style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#f4f4f4}
.v-PASS{color:#080}.v-FAIL{color:#b00}.v-INVALID{color:#a60}pre{background:#f8f8f8;padding:1em;overflow:auto}
svg{background:#fff;border:1px solid #ddd;margin:.5em 1em .5em 0}</style></head><body><h1>%s</h1>
`, html.EscapeString(title), html.EscapeString(title))
	letters := []string{"A", "B", "C", "D"}
	for i, r := range rs {
		tag := ""
		if len(rs) > 1 {
			tag = letters[i%len(letters)] + ": "
		}
		fmt.Fprintf(&b, `<p>%s<b>%s</b> — %s, %s %s, host %s (%d cpus), started %s — verdict <b class="v-%s">%s</b></p>`,
			tag, html.EscapeString(names[i]), html.EscapeString(r.Kind), html.EscapeString(r.Tool.Module),
			html.EscapeString(r.Tool.Version), html.EscapeString(r.Host.Hostname), r.Host.CPUs,
			r.Started.Format("2006-01-02 15:04:05Z"), r.Verdict.Status, r.Verdict.Status)
	}

	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	// Latency percentiles per window.
	var xs []string
	for _, st := range rs[0].Steps {
		for _, w := range st.Windows {
			xs = append(xs, fmt.Sprintf("%s/w%d", st.Label, w.Index))
		}
	}
	var lat []series
	for i, r := range rs {
		for j, pc := range []struct {
			name string
			f    func(load.Dist) float64
		}{{"p50", func(d load.Dist) float64 { return d.P50 }}, {"p90", func(d load.Dist) float64 { return d.P90 }},
			{"p99", func(d load.Dist) float64 { return d.P99 }}, {"p99.9", func(d load.Dist) float64 { return d.P999 }}} {
			s := series{Name: pc.name, Color: colors[j], Dash: i > 0}
			if len(rs) > 1 {
				s.Name = letters[i%len(letters)] + " " + pc.name
			}
			for _, st := range r.Steps {
				for _, w := range st.Windows {
					s.Values = append(s.Values, pc.f(w.Latency.ResponseTime))
				}
			}
			lat = append(lat, s)
		}
	}
	b.WriteString("<h2>Response time percentiles per window (ms, from the scheduled time)</h2>\n")
	b.WriteString(lineChart("ms", xs, lat))

	// Requests/s and refusal % per step (per window when there is one step).
	var steps []string
	for _, st := range rs[0].Steps {
		steps = append(steps, st.Label)
	}
	var rps, ref []series
	for i, r := range rs {
		name := names[i]
		if len(rs) > 1 {
			name = letters[i%len(letters)] + " " + name
		}
		a := series{Name: name, Color: colors[i%len(colors)], Dash: i > 0}
		f := series{Name: name, Color: colors[i%len(colors)], Dash: i > 0}
		for _, st := range r.Steps {
			var ok, sent, refused, secs float64
			for _, w := range st.Windows {
				ok += float64(w.Counts.OK)
				sent += float64(w.Counts.Sent)
				refused += float64(w.Counts.Refused)
				secs += w.DurationS
			}
			a.Values = append(a.Values, safeDiv(ok, secs))
			f.Values = append(f.Values, 100*safeDiv(refused, sent))
		}
		rps = append(rps, a)
		ref = append(ref, f)
	}
	b.WriteString("<h2>OK requests/s per step</h2>\n")
	b.WriteString(lineChart("req/s", steps, rps))
	b.WriteString("<h2>Refused % per step</h2>\n")
	b.WriteString(lineChart("% refused", steps, ref))

	for i, r := range rs {
		var txt bytes.Buffer
		Text(&txt, r)
		fmt.Fprintf(&b, "<h2>Summary: %s</h2><pre>%s</pre>\n", html.EscapeString(names[i]), html.EscapeString(txt.String()))
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

type series struct {
	Name   string
	Color  string
	Dash   bool
	Values []float64
}

// lineChart draws series over categorical x labels as an SVG line chart
// with a linear y axis from zero.
func lineChart(yLabel string, xs []string, ss []series) string {
	const W, H, L, R, T, B = 760.0, 320.0, 60.0, 170.0, 20.0, 70.0
	ymax := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > ymax {
				ymax = v
			}
		}
	}
	ymax = niceCeil(ymax)
	pw, ph := W-L-R, H-T-B
	x := func(i int) float64 {
		if len(xs) <= 1 {
			return L + pw/2
		}
		return L + pw*float64(i)/float64(len(xs)-1)
	}
	y := func(v float64) float64 { return T + ph - ph*v/ymax }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-size="11">`, W, H, W, H)
	for k := 0; k <= 4; k++ {
		v := ymax * float64(k) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			L, y(v), L+pw, y(v), L-4, y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="12" y="%.1f" transform="rotate(-90 12 %.1f)" text-anchor="middle">%s</text>`, T+ph/2, T+ph/2, html.EscapeString(yLabel))
	for i, l := range xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" transform="rotate(-35 %.1f %.1f)">%s</text>`,
			x(i), T+ph+14, x(i), T+ph+14, html.EscapeString(l))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`, L, T+ph, L+pw, T+ph)
	for si, s := range ss {
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for i, v := range s.Values {
			if i < len(xs) && !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, s.Color, dash, strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, xy[0], xy[1], s.Color)
		}
		ly := T + 14*float64(si)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f">%s</text>`,
			L+pw+12, ly, L+pw+36, ly, s.Color, dash, L+pw+40, ly+4, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
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

// WriteHTML renders rs (see HTML) into the file at path, atomically.
func WriteHTML(path string, rs []*load.Report, names []string) error {
	return atomicfile.Write(path, HTML(rs, names))
}
