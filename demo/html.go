package demo

import (
	"bytes"
	"fmt"
	"github.com/sluicehq/sluice/internal/atomicfile"
	"html"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/load/render"
)

// ProgressLine is the live line: which variant and step is running and
// what each driver has seen so far.
func ProgressLine(p Progress) string {
	if p.Stage == "capacity" {
		return "measuring capacity: uncached requests a second the disk completes..."
	}
	return fmt.Sprintf("[%d/%d %s] step %s %4.1fs  cached ok %d refused %d  |  uncached ok %d refused %d dropped %d  p99 %v",
		p.Index+1, p.Variants, p.Variant, FormatMultiplier(p.Multiplier), p.Elapsed.Seconds(),
		p.Cached.OK, p.Cached.Refused, p.Uncached.OK, p.Uncached.Refused, p.Uncached.Dropped, p.Uncached.P99.Round(time.Millisecond))
}

// PageName is the file WriteFiles writes the report page to.
const PageName = "sluice-demo.html"

// WriteFiles writes the report into dir: the page (PageName), and for each
// variant the two drivers' load reports (<variant>-cached.json,
// <variant>-uncached.json, readable by `sluice report`) and their
// per-second timelines (<variant>.html, drawn by package render). Every
// file is written atomically. It returns the page's path.
func WriteFiles(dir string, res *Result) (string, error) {
	for _, r := range res.Runs {
		base := filepath.Join(dir, string(r.Variant))
		if err := load.WriteReport(base+"-cached.json", r.Cached); err != nil {
			return "", err
		}
		if err := load.WriteReport(base+"-uncached.json", r.Uncached); err != nil {
			return "", err
		}
		if err := render.WriteHTML(base+".html", []*load.Report{r.Cached, r.Uncached},
			[]string{string(r.Variant) + " cached", string(r.Variant) + " uncached"}); err != nil {
			return "", err
		}
	}
	page := filepath.Join(dir, PageName)
	return page, atomicfile.Write(page, HTML(res))
}

// variantStroke gives each variant its own line width and dash, so lines
// that coincide (cached goodput of every variant but the bug) stay
// visible: the widest is drawn first.
func variantStroke(v Variant) string {
	switch v {
	case NoGate:
		return `stroke-width="6" stroke-opacity="0.45"`
	case DiskScope:
		return `stroke-width="3.5"`
	case Adaptive:
		return `stroke-width="2" stroke-dasharray="6 4"`
	}
	return `stroke-width="2"`
}

// variantColor gives each variant the same color in every chart.
func variantColor(v Variant) string {
	switch v {
	case NoGate:
		return "#7f7f7f"
	case RequestScope:
		return "#d62728"
	case DiskScope:
		return "#2ca02c"
	case Adaptive:
		return "#1f77b4"
	}
	return "#000"
}

// HTML draws the result as one self-contained page (inline SVG, no
// scripts, nothing fetched): what was run, the two-sentence summary, one
// chart per figure of the table (goodput, refusals and p99, cached and
// uncached, over the steps, one line per variant), the adaptive limit over
// time, and the table itself.
func HTML(res *Result) []byte {
	var b bytes.Buffer
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>sluice demo</title><style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}td,th{border:1px solid #ccc;padding:2px 7px;text-align:right}th{background:#f4f4f4}
td.l{text-align:left}.summary{background:#f6f8fa;border-left:4px solid #2ca02c;padding:.6em 1em}.note{color:#555;font-size:13px}
.grid{display:flex;flex-wrap:wrap;gap:1em}.grid div{flex:0 0 520px}svg{background:#fff;border:1px solid #ddd;display:block}</style></head><body>
<h1>sluice demo: four gates under the same overload</h1>
`)
	how := "measured"
	if !res.Measured {
		how = "given"
	}
	fmt.Fprintf(&b, `<p>A static-file server ran in-process: hot files served from its cache, cold files read from a slow disk (%d channels, %v a read). `+
		`Its capacity, the uncached requests a second the disk completes, was %s at <b>%.0f/s</b>. Each variant then got the same stepped open-loop load: `+
		`at each step (%s of capacity, %v each) that many uncached requests a second, and as many cached ones. Fixed gates have %d slots; the adaptive gate starts there and moves with a %s law (SLO %v). `+
		`Started %s, took %v.</p>`+"\n",
		res.Disk.Channels, res.Disk.Service, how, res.Capacity, html.EscapeString(multipliers(res.Multipliers)), res.StepDuration,
		res.WorkLimit, html.EscapeString(res.Law), res.SLO, res.Started.Format("2006-01-02 15:04:05Z"), res.Elapsed.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "<p class=\"summary\">%s</p>\n", html.EscapeString(Summary(res)))
	b.WriteString("<ul>\n")
	for _, r := range res.Runs {
		fmt.Fprintf(&b, `<li><b style="color:%s">%s</b>: %s</li>`+"\n", variantColor(r.Variant), r.Variant, html.EscapeString(r.Variant.Describe()))
	}
	b.WriteString("</ul>\n")

	type figure struct {
		title string
		log   bool
		f     func(Step) float64
	}
	charts := []figure{
		{"Cached work: ok answers per second", false, func(s Step) float64 { return s.Cached.Goodput }},
		{"Uncached work: ok answers per second", false, func(s Step) float64 { return s.Uncached.Goodput }},
		{"Cached work: refused (%)", false, func(s Step) float64 { return s.Cached.RefusedPercent }},
		{"Uncached work: refused (%)", false, func(s Step) float64 { return s.Uncached.RefusedPercent }},
		{"Cached work: p99 of ok answers (ms, log scale)", true, func(s Step) float64 { return s.Cached.P99 }},
		{"Uncached work: p99 of ok answers (ms, log scale)", true, func(s Step) float64 { return s.Uncached.P99 }},
	}
	b.WriteString(`<div class="grid">`)
	for _, c := range charts {
		var ss []series
		for _, r := range res.Runs {
			s := series{name: string(r.Variant), color: variantColor(r.Variant), stroke: variantStroke(r.Variant)}
			for _, st := range r.Steps {
				s.ys = append(s.ys, c.f(st))
			}
			ss = append(ss, s)
		}
		fmt.Fprintf(&b, "<div><h2>%s</h2>\n%s</div>\n", html.EscapeString(c.title), stepChart(res.Multipliers, ss, c.log))
	}
	b.WriteString("</div>\n")
	if r := res.find(Adaptive); r != nil && len(r.Limit) > 0 {
		b.WriteString("<h2>The adaptive gate's slots over its run</h2>\n")
		b.WriteString(limitChart(r.Limit, res.StepDuration, res.Multipliers))
	}

	b.WriteString("<h2>The table</h2>\n<table><tr><th>variant</th><th>step</th><th>offered/s (each class)</th>" +
		"<th>cached ok/s</th><th>refused</th><th>lost</th><th>ok p99</th><th>uncached ok/s</th><th>refused</th><th>lost</th><th>ok p99</th></tr>\n")
	for _, r := range res.Runs {
		for i, st := range r.Steps {
			name := ""
			if i == 0 {
				name = fmt.Sprintf(`<b style="color:%s">%s</b>`, variantColor(r.Variant), r.Variant)
			}
			fmt.Fprintf(&b, `<tr><td class="l">%s</td><td>%s</td><td>%.0f</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td></tr>`+"\n",
				name, FormatMultiplier(st.Multiplier), st.Uncached.Offered, st.Cached.Goodput, pct(st.Cached.RefusedPercent), pct(lostPercent(st.Cached)),
				FormatMS(st.Cached.P99), st.Uncached.Goodput, pct(st.Uncached.RefusedPercent), pct(lostPercent(st.Uncached)), FormatMS(st.Uncached.P99))
		}
	}
	b.WriteString("</table>\n<p class=\"note\">ok/s: ok answers per second (goodput). refused: 503 answers. lost: requests the driver dropped " +
		"(its bounded queue was full, which is what an ungated server's pile-up does to clients) or that failed. ok p99: response time of ok answers, " +
		"measured from when each request was due, so waiting in the driver counts.</p>\n")
	var notes bytes.Buffer
	for _, r := range res.Runs {
		if !r.BooksClosed {
			fmt.Fprintf(&notes, "<li>%s: the gate's books do not close (offered %d, admitted %d, completed %d, in flight %d).</li>", r.Variant,
				r.Gate.Offered, r.Gate.Admitted, r.Gate.Completed.Total(), r.Gate.Inflight)
		}
		if r.DriverLimited {
			fmt.Fprintf(&notes, "<li>%s: the driver fell behind its timetable (a busy machine); its figures understate the load.</li>", r.Variant)
		}
	}
	if notes.Len() > 0 {
		fmt.Fprintf(&b, "<h2>Notes</h2><ul>%s</ul>\n", notes.String())
	}
	b.WriteString("<h2>Details</h2><p>Each variant's two drivers wrote full load reports beside this page; their per-second timelines are drawn in:</p><ul>\n")
	for _, r := range res.Runs {
		v := html.EscapeString(string(r.Variant))
		fmt.Fprintf(&b, `<li><a href="%s.html">%s.html</a> (reports: %s-cached.json, %s-uncached.json; <code>sluice report FILE</code> prints them)</li>`+"\n", v, v, v, v)
	}
	b.WriteString("</ul>\n</body></html>\n")
	return b.Bytes()
}

func multipliers(ms []float64) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = FormatMultiplier(m)
	}
	return strings.Join(parts, ", ")
}

type series struct {
	name, color, stroke string
	ys                  []float64 // one per step; NaN: nothing measured
}

// stepChart draws one line per series over the steps (evenly spaced, as
// categories), with a linear y axis from zero, or a log10 axis.
func stepChart(steps []float64, ss []series, logY bool) string {
	const W, H, L, R, T, B = 520.0, 250.0, 56.0, 110.0, 12.0, 34.0
	pw, ph := W-L-R, H-T-B
	lo, hi := 0.0, 0.0
	first := true
	for _, s := range ss {
		for _, y := range s.ys {
			if math.IsNaN(y) || math.IsInf(y, 0) || (logY && y <= 0) {
				continue
			}
			if first {
				lo, hi, first = y, y, false
			}
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
	}
	var ticks []float64
	var ymap func(float64) float64
	if logY {
		if first {
			lo, hi = 1, 10
		}
		a, z := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if z <= a {
			z = a + 1
		}
		for e := a; e <= z; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
		ymap = func(v float64) float64 { return T + ph - ph*(math.Log10(v)-a)/(z-a) }
	} else {
		top := niceCeil(hi)
		for k := 0; k <= 4; k++ {
			ticks = append(ticks, top*float64(k)/4)
		}
		ymap = func(v float64) float64 { return T + ph - ph*math.Min(v/top, 1) }
	}
	n := len(steps)
	xmap := func(i int) float64 {
		if n == 1 {
			return L + pw/2
		}
		return L + pw*(0.05+0.9*float64(i)/float64(n-1))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-size="11">`, W, H, W, H)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			L, ymap(t), L+pw, ymap(t), L-4, ymap(t)+4, trimFloat(t))
	}
	for i, m := range steps {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, xmap(i), T+ph+16, FormatMultiplier(m))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">step (multiple of capacity)</text>`, L+pw/2, H-3)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`, L, T+ph, L+pw, T+ph)
	for si, s := range ss {
		var pts []string
		for i, y := range s.ys {
			if i >= n || math.IsNaN(y) || math.IsInf(y, 0) || (logY && y <= 0) {
				continue
			}
			x, yy := xmap(i), ymap(y)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, yy))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %s: %s</title></circle>`, x, yy, s.color,
				html.EscapeString(s.name), FormatMultiplier(steps[i]), trimFloat(y))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" %s points="%s"/>`, s.color, s.stroke, strings.Join(pts, " "))
		}
		ly := T + 8 + 15*float64(si)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" %s/><text x="%.1f" y="%.1f">%s</text>`,
			L+pw+8, ly, L+pw+28, ly, s.color, s.stroke, L+pw+32, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// limitChart draws the adaptive limit over the run, with the steps marked.
func limitChart(samples []LimitSample, step time.Duration, steps []float64) string {
	const W, H, L, R, T, B = 1000.0, 220.0, 56.0, 20.0, 12.0, 34.0
	pw, ph := W-L-R, H-T-B
	end := step.Seconds() * float64(len(steps))
	top := 1.0
	for _, s := range samples {
		end = math.Max(end, s.At.Seconds())
		top = math.Max(top, float64(s.Limit))
	}
	if !(end > 0) {
		end = 1
	}
	top = niceCeil(top)
	x := func(v float64) float64 { return L + pw*math.Min(v/end, 1) }
	y := func(v float64) float64 { return T + ph - ph*math.Min(v/top, 1) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-size="11">`, W, H, W, H)
	for i, m := range steps {
		x0, x1 := x(step.Seconds()*float64(i)), x(step.Seconds()*float64(i+1))
		if i%2 == 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f3f3f3"/>`, x0, T, x1-x0, ph)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (x0+x1)/2, T+ph+16, FormatMultiplier(m))
	}
	for k := 0; k <= 4; k++ {
		v := top * float64(k) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			L, y(v), L+pw, y(v), L-4, y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">slots, over the run's steps</text>`, L+pw/2, H-3)
	pts := make([]string, len(samples))
	for i, s := range samples {
		pts[i] = fmt.Sprintf("%.1f,%.1f", x(s.At.Seconds()), y(float64(s.Limit)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, variantColor(Adaptive), strings.Join(pts, " "))
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
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
