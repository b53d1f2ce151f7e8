// Package chart draws the line charts of sluice's HTML reports (the load
// reports of package load/render and the page of `sluice demo`) as inline
// SVG, and holds the page style they share, so that both look and behave
// the same:
//
//	c := chart.Chart{YLabel: "per second", XMax: 60, XUnit: "s", Series: []chart.Series{
//		{Name: "ok", Color: "#2ca02c", Points: []chart.Point{{X: 0.5, Y: 980}, {X: 1.5, Y: 1010}}},
//	}}
//	page := "<style>" + chart.Style + "</style>" + c.SVG()
//
// # Design
//
// A chart is one plot area with a y axis from zero (or a log10 axis), an x
// axis that is either continuous (seconds, with optional shaded bands) or
// categorical (one tick per label, as the demo's steps), and a legend on
// the right. A NaN y breaks a line: a second without ok answers has no ok
// latency, which is not a latency of zero.
//
// Lines that carry the same values would hide one another; the charts
// exist to compare them. So where the strokes of several series overlap
// along a stretch (the same x, less than a stroke's width apart at both
// ends), each is drawn there in dashes of its own color, in turn, like
// the stripes of a rope: every series shows, and at the very place its
// values put it (nothing is moved). Markers that fall on one another are
// drawn as rings of decreasing size. A marker's tooltip carries its exact
// value.
//
// The package writes strings only: no scripts, nothing fetched, every
// name escaped. It keeps no state; everything in it is safe for
// concurrent use. It imports nothing of sluice, so the load driver's
// packages can use it and still import nothing they measure.
package chart

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// Style is the CSS of every report page: the frame, headings, tables,
// notes, preformatted summaries (wrapped, never cut off), and charts.
// Prose is kept to a readable width; tables, charts and summaries may use
// the whole window.
const Style = `body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
p,ul,h1,h2{max-width:1100px}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}td,th{border:1px solid #ccc;padding:2px 7px;text-align:right}th{background:#f4f4f4}
td.l{text-align:left}.note{color:#555;font-size:13px}.summary{background:#f6f8fa;border-left:4px solid #2ca02c;padding:.6em 1em}
.v-PASS{color:#080}.v-FAIL{color:#b00}.v-INVALID{color:#a60}
pre{background:#f8f8f8;padding:1em;font-size:11px;white-space:pre-wrap;overflow-wrap:anywhere}
.grid{display:flex;flex-wrap:wrap;gap:1em}.grid>div{flex:0 0 560px}
svg{background:#fff;border:1px solid #ddd;margin:.3em 0;display:block}`

// Point is one value of a series; a NaN Y breaks the line.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name  string
	Color string // an SVG color, e.g. "#2ca02c"
	// Width is the stroke width in pixels (zero: 2).
	Width float64
	// Dash is an SVG dash pattern such as "7 4" (empty: solid).
	Dash string
	// Markers draws a dot at each point, its value in a tooltip.
	Markers bool
	Points  []Point
}

// Band is a stretch of the x axis, shaded unless Plain, with an optional
// label under the axis at its middle.
type Band struct {
	From, To float64
	Label    string
	Plain    bool
}

// Chart is one line chart. Zero sizes take the defaults.
type Chart struct {
	// Width and Height of the whole picture in pixels (zero: 1000 × 280);
	// Legend is the width kept on the right for the legend (zero: 180).
	Width, Height, Legend float64
	// Categories, when set, make the x axis categorical: a point's X is
	// the index of its label, and the labels are spread evenly.
	Categories []string
	// XMax ends a continuous x axis (zero: the largest X); XUnit follows
	// each tick label ("s"). Bands are shaded; when any has a label, the
	// labels replace the numeric ticks.
	XMax  float64
	XUnit string
	Bands []Band
	// XLabel and YLabel name the axes.
	XLabel, YLabel string
	// LogY draws a log10 y axis (values ≤ 0 are left out); otherwise y
	// runs linearly from zero.
	LogY   bool
	Series []Series
}

// plot is the chart's geometry once resolved.
type plot struct {
	c          Chart
	l, t, w, h float64 // the plot area
	x          func(float64) float64
	y          func(float64) float64
	yTicks     []float64
}

const marginL, marginT, marginB = 60.0, 14.0, 38.0

// SVG draws the chart.
func (c Chart) SVG() string {
	p := c.layout()
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-size="11">`, c.Width, c.Height, c.Width, c.Height)
	p.frame(&b)
	pts := p.placed()
	shared := p.sharedSegments(pts)
	for si, s := range c.Series {
		p.line(&b, si, s, pts[si], shared[si])
	}
	p.markers(&b, pts)
	p.legend(&b)
	b.WriteString("</svg>\n")
	return b.String()
}

func (c Chart) layout() plot {
	if c.Width <= 0 {
		c.Width = 1000
	}
	if c.Height <= 0 {
		c.Height = 280
	}
	if c.Legend <= 0 {
		c.Legend = 180
	}
	p := plot{c: c, l: marginL, t: marginT, w: math.Max(c.Width-marginL-c.Legend, 10), h: math.Max(c.Height-marginT-marginB, 10)}
	if n := len(c.Categories); n > 0 {
		p.x = func(i float64) float64 {
			if n == 1 {
				return p.l + p.w/2
			}
			return p.l + p.w*(0.05+0.9*i/float64(n-1))
		}
	} else {
		xmax := c.XMax
		if !(xmax > 0) || math.IsInf(xmax, 0) {
			xmax = 0
			for _, s := range c.Series {
				for _, pt := range s.Points {
					if finite(pt.X) {
						xmax = math.Max(xmax, pt.X)
					}
				}
			}
			if xmax <= 0 {
				xmax = 1
			}
		}
		p.c.XMax = xmax
		p.x = func(v float64) float64 { return p.l + p.w*math.Min(math.Max(v/xmax, 0), 1) }
	}
	lo, hi, any := 0.0, 0.0, false
	for _, s := range c.Series {
		for _, pt := range s.Points {
			if !finite(pt.Y) || (c.LogY && pt.Y <= 0) {
				continue
			}
			if !any {
				lo, hi, any = pt.Y, pt.Y, true
			}
			lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
		}
	}
	if c.LogY {
		if !any {
			lo, hi = 1, 10
		}
		a, z := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if z <= a {
			z = a + 1
		}
		for e := a; e <= z; e++ {
			p.yTicks = append(p.yTicks, math.Pow(10, e))
		}
		p.y = func(v float64) float64 { return p.t + p.h - p.h*(math.Log10(v)-a)/(z-a) }
	} else {
		top := NiceCeil(hi)
		for k := 0; k <= 4; k++ {
			p.yTicks = append(p.yTicks, top*float64(k)/4)
		}
		p.y = func(v float64) float64 { return p.t + p.h - p.h*math.Min(v/top, 1) }
	}
	return p
}

// frame draws the bands, the grid, the ticks and the axis labels.
func (p plot) frame(b *strings.Builder) {
	c := p.c
	labelled := false
	for _, bd := range c.Bands {
		x0, x1 := p.x(bd.From), p.x(bd.To)
		if !bd.Plain {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f3f3f3"/>`, x0, p.t, math.Max(x1-x0, 0), p.h)
		}
		labelled = labelled || bd.Label != ""
	}
	for _, v := range p.yTicks {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`,
			p.l, p.y(v), p.l+p.w, p.y(v), p.l-4, p.y(v)+4, Num(v))
	}
	base := p.t + p.h
	switch {
	case len(c.Categories) > 0:
		for i, name := range c.Categories {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, p.x(float64(i)), base+16, html.EscapeString(name))
		}
	case labelled:
		for _, bd := range c.Bands {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (p.x(bd.From)+p.x(bd.To))/2, base+16, html.EscapeString(bd.Label))
		}
	default:
		step := NiceCeil(c.XMax / 10)
		for v := 0.0; v <= c.XMax+1e-9; v += step {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><text x="%.1f" y="%.1f" text-anchor="middle">%s%s</text>`,
				p.x(v), base, p.x(v), base+4, p.x(v), base+16, Num(v), html.EscapeString(c.XUnit))
		}
	}
	if c.YLabel != "" {
		fmt.Fprintf(b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`, p.t+p.h/2, p.t+p.h/2, html.EscapeString(c.YLabel))
	}
	if c.XLabel != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, p.l+p.w/2, c.Height-4, html.EscapeString(c.XLabel))
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`, p.l, base, p.l+p.w, base)
}

// spot is a point placed in pixels; ok is false for a break in the line.
type spot struct {
	x, y, v, at float64
	ok          bool
}

// placed puts every series' points in pixels.
func (p plot) placed() [][]spot {
	c := p.c
	out := make([][]spot, len(c.Series))
	for si, s := range c.Series {
		out[si] = make([]spot, len(s.Points))
		for pi, pt := range s.Points {
			if !finite(pt.X) || !finite(pt.Y) || (c.LogY && pt.Y <= 0) {
				continue
			}
			out[si][pi] = spot{x: p.x(pt.X), y: p.y(pt.Y), v: pt.Y, at: pt.X, ok: true}
		}
	}
	return out
}

// share is a segment's place among the series whose strokes overlap it:
// it is member i of n (n = 1: alone).
type share struct{ i, n int }

// sharedSegments finds, for each series' segment (from point k to k+1),
// the other series' segments whose strokes overlap it: the same pixel
// columns at both ends, each end less than a stroke's width apart. Such
// groups are chained (a near b, b near c) and numbered in series order.
func (p plot) sharedSegments(pts [][]spot) [][]share {
	type seg struct {
		series, k int
		y0, y1    float64
	}
	out := make([][]share, len(pts))
	columns := map[[2]int64][]seg{}
	for si, ps := range pts {
		out[si] = make([]share, len(ps))
		for k := 0; k+1 < len(ps); k++ {
			a, b := ps[k], ps[k+1]
			out[si][k] = share{0, 1}
			if !a.ok || !b.ok {
				continue
			}
			key := [2]int64{int64(math.Round(a.x)), int64(math.Round(b.x))}
			columns[key] = append(columns[key], seg{si, k, a.y, b.y})
		}
	}
	for _, col := range columns {
		if len(col) < 2 {
			continue
		}
		// Chain overlapping segments: a segment joins a group when it
		// overlaps any member.
		group := make([]int, len(col))
		for i := range group {
			group[i] = i
		}
		find := func(i int) int {
			for group[i] != i {
				i = group[i]
			}
			return i
		}
		for i := range col {
			for j := i + 1; j < len(col); j++ {
				tol := math.Max(width(p.c.Series[col[i].series]), width(p.c.Series[col[j].series]))
				if math.Abs(col[i].y0-col[j].y0) < tol && math.Abs(col[i].y1-col[j].y1) < tol {
					group[find(j)] = find(i)
				}
			}
		}
		members := map[int][]seg{}
		for i, sg := range col {
			members[find(i)] = append(members[find(i)], sg)
		}
		for _, m := range members {
			sort.Slice(m, func(a, b int) bool { return m[a].series < m[b].series })
			for i, sg := range m {
				out[sg.series][sg.k] = share{i, len(m)}
			}
		}
	}
	return out
}

func width(s Series) float64 {
	if s.Width <= 0 {
		return 2
	}
	return s.Width
}

// stripe is the dash length of shared stretches, in pixels.
const stripe = 6.0

// line draws one series: polylines broken at gaps, in the series' own
// dash where it is alone, and in stripes (its turn in a dash pattern
// shared with the series it overlaps) where it is not.
func (p plot) line(b *strings.Builder, si int, s Series, pts []spot, shared []share) {
	color := html.EscapeString(s.Color)
	var run []string
	var cur share
	flush := func() {
		if len(run) > 1 {
			dash := ""
			switch {
			case cur.n > 1:
				dash = fmt.Sprintf(` stroke-dasharray="%.0f %.0f" stroke-dashoffset="%.0f"`, stripe, stripe*float64(cur.n-1), -stripe*float64(cur.i))
			case s.Dash != "":
				dash = fmt.Sprintf(` stroke-dasharray="%s"`, html.EscapeString(s.Dash))
			}
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%.1f"%s points="%s"/>`, color, width(s), dash, strings.Join(run, " "))
		}
		run = run[:0]
	}
	at := func(sp spot) string { return fmt.Sprintf("%.1f,%.1f", sp.x, sp.y) }
	for k := 0; k+1 < len(pts); k++ {
		a, z := pts[k], pts[k+1]
		if !a.ok || !z.ok {
			flush()
			continue
		}
		if len(run) > 0 && shared[k] != cur {
			last := run[len(run)-1]
			flush()
			run = append(run, last) // the next stretch starts where this one ended
		}
		cur = shared[k]
		if len(run) == 0 {
			run = append(run, at(a))
		}
		run = append(run, at(z))
	}
	flush()
}

// markers draws each series' markers (and a dot for a point with no line
// to either side), rings of decreasing size where points of several
// series fall on one another, the first series the largest.
func (p plot) markers(b *strings.Builder, pts [][]spot) {
	type key [2]int64
	stack := map[key]int{} // how many markers already sit at a place
	count := map[key]int{}
	want := func(si, k int) bool {
		ps := pts[si]
		alone := (k == 0 || !ps[k-1].ok) && (k == len(ps)-1 || !ps[k+1].ok)
		return ps[k].ok && (p.c.Series[si].Markers || alone)
	}
	at := func(sp spot) key { return key{int64(math.Round(sp.x / 3)), int64(math.Round(sp.y / 3))} }
	for si, ps := range pts {
		for k := range ps {
			if want(si, k) {
				count[at(ps[k])]++
			}
		}
	}
	for si, s := range p.c.Series {
		for k, sp := range pts[si] {
			if !want(si, k) {
				continue
			}
			kk := at(sp)
			n, i := count[kk], stack[kk]
			stack[kk]++
			r := math.Max(width(s), 3) + 1.5*float64(n-1-i)
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="#fff" stroke-width="0.8"><title>%s</title></circle>`,
				sp.x, sp.y, r, html.EscapeString(s.Color), html.EscapeString(p.tooltip(s, sp)))
		}
	}
}

func (p plot) tooltip(s Series, sp spot) string {
	at := Num(sp.at) + p.c.XUnit
	if n := len(p.c.Categories); n > 0 {
		if i := int(sp.at); i >= 0 && i < n {
			at = p.c.Categories[i]
		}
	}
	return fmt.Sprintf("%s at %s: %s", s.Name, at, Num(sp.v))
}

func (p plot) legend(b *strings.Builder) {
	x := p.l + p.w + 12
	for i, s := range p.c.Series {
		y := p.t + 8 + 15*float64(i)
		dash := ""
		if s.Dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, html.EscapeString(s.Dash))
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/><text x="%.1f" y="%.1f">%s</text>`,
			x, y, x+28, y, html.EscapeString(s.Color), width(s), dash, x+34, y+4, html.EscapeString(s.Name))
	}
}

// NiceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten: the top
// of a linear axis. Zero, negative and non-finite values give 1.
func NiceCeil(v float64) float64 {
	if v <= 0 || !finite(v) {
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

// Num writes a figure for a tick or a tooltip: whole from 100 up, else
// with up to two decimals and no trailing zeros.
func Num(v float64) string {
	if !finite(v) {
		return "-"
	}
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
