package demo

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/atomicfile"
	"github.com/sluicehq/sluice/internal/chart"
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

// variantStyle gives each variant the same color and stroke in every
// chart. Lines that coincide (the cached goodput of every variant but the
// bug) are striped by the chart kit, not drawn one over the other.
func variantStyle(v Variant) chart.Series {
	s := chart.Series{Name: string(v), Color: variantColor(v), Width: 2.5, Markers: true}
	if v == Adaptive {
		s.Dash = "6 3"
	}
	return s
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

// Figures are the charts of the page, one per figure of the table and
// class of work, in the order drawn.
var figures = []struct {
	title string
	log   bool
	f     func(Step) float64
}{
	{"Cached work: ok answers per second", false, func(s Step) float64 { return s.Cached.Goodput }},
	{"Uncached work: ok answers per second", false, func(s Step) float64 { return s.Uncached.Goodput }},
	{"Cached work: refused (%)", false, func(s Step) float64 { return s.Cached.RefusedPercent }},
	{"Uncached work: refused (%)", false, func(s Step) float64 { return s.Uncached.RefusedPercent }},
	{"Cached work: lost (%)", false, func(s Step) float64 { return lostPercent(s.Cached) }},
	{"Uncached work: lost (%)", false, func(s Step) float64 { return lostPercent(s.Uncached) }},
	{"Cached work: p99 of ok answers (ms, log scale)", true, func(s Step) float64 { return s.Cached.P99 }},
	{"Uncached work: p99 of ok answers (ms, log scale)", true, func(s Step) float64 { return s.Uncached.P99 }},
}

// HTML draws the result as one self-contained page (inline SVG, no
// scripts, nothing fetched): what was run, the two-sentence summary, one
// chart per figure of the table (goodput, refusals, losses and p99,
// cached and uncached, over the steps, one line per variant), the
// adaptive limit over time, the table itself and the notes its numbers
// need.
func HTML(res *Result) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>sluice demo</title><style>%s</style></head><body>\n"+
		"<h1>sluice demo: four gates under the same overload</h1>\n", chart.Style)
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

	steps := make([]string, len(res.Multipliers))
	for i, m := range res.Multipliers {
		steps[i] = FormatMultiplier(m)
	}
	b.WriteString(`<div class="grid">`)
	for _, fig := range figures {
		c := chart.Chart{Width: 560, Height: 250, Legend: 130, Categories: steps, LogY: fig.log, XLabel: "step (multiple of capacity)"}
		for _, r := range res.Runs {
			s := variantStyle(r.Variant)
			for i, st := range r.Steps {
				s.Points = append(s.Points, chart.Point{X: float64(i), Y: fig.f(st)})
			}
			c.Series = append(c.Series, s)
		}
		fmt.Fprintf(&b, "<div><h2>%s</h2>\n%s</div>\n", html.EscapeString(fig.title), c.SVG())
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
				html.EscapeString(formatP99(st.Cached)), st.Uncached.Goodput, pct(st.Uncached.RefusedPercent), pct(lostPercent(st.Uncached)), html.EscapeString(formatP99(st.Uncached)))
		}
	}
	b.WriteString("</table>\n<p class=\"note\">ok/s: ok answers per second (goodput). refused: 503 answers. lost: requests the driver dropped " +
		"(its bounded queue was full, which is what an ungated server's pile-up does to clients) or that failed. ok p99: response time of ok answers, " +
		"measured from when each request was due, so waiting in the driver counts.</p>\n")
	if notes := Notes(res); len(notes) > 0 {
		b.WriteString("<h2>Notes</h2><ul>\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "<li>%s</li>\n", html.EscapeString(n))
		}
		b.WriteString("</ul>\n")
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

// limitChart draws the adaptive limit over the run, with the steps marked.
func limitChart(samples []LimitSample, step time.Duration, steps []float64) string {
	end := step.Seconds() * float64(len(steps))
	s := chart.Series{Name: "slots", Color: variantColor(Adaptive)}
	for _, l := range samples {
		end = math.Max(end, l.At.Seconds())
		s.Points = append(s.Points, chart.Point{X: l.At.Seconds(), Y: float64(l.Limit)})
	}
	c := chart.Chart{Width: 1000, Height: 220, Legend: 80, XMax: end, XLabel: "slots, over the run's steps", Series: []chart.Series{s}}
	for i, m := range steps {
		c.Bands = append(c.Bands, chart.Band{From: step.Seconds() * float64(i), To: step.Seconds() * float64(i+1), Label: FormatMultiplier(m), Plain: i%2 == 1})
	}
	return c.SVG()
}
