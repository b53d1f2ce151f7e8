package chart

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func wellFormed(s string) error {
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type drawn struct {
	points       [][2]float64
	dash, offset string
}

// lines returns each polyline's points and dash pattern, in order.
func lines(svg string) []drawn {
	var out []drawn
	re := regexp.MustCompile(`<polyline ([^>]*)/>`)
	attr := func(s, name string) string {
		m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(s)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		var d drawn
		for _, p := range strings.Fields(attr(m[1], "points")) {
			x, y, _ := strings.Cut(p, ",")
			fx, _ := strconv.ParseFloat(x, 64)
			fy, _ := strconv.ParseFloat(y, 64)
			d.points = append(d.points, [2]float64{fx, fy})
		}
		d.dash, d.offset = attr(m[1], "stroke-dasharray"), attr(m[1], "stroke-dashoffset")
		out = append(out, d)
	}
	return out
}

// TestCoincidingSeriesBothShow: where series carry the same values, each
// is drawn at its own place in its turn of a shared dash pattern, so both
// show and neither moves; a series that overlaps nothing stays solid.
func TestCoincidingSeriesBothShow(t *testing.T) {
	same := []Point{{0, 0}, {1, 50}, {2, 100}, {3, 100}}
	c := Chart{Categories: []string{"1×", "2×", "5×", "10×"}, Series: []Series{
		{Name: "no-gate", Color: "#777", Width: 2, Points: same},
		{Name: "disk-scope", Color: "#2ca02c", Width: 3, Points: same},
		{Name: "bug", Color: "#d62728", Points: []Point{{0, 0}, {1, 10}, {2, 10}, {3, 10}}},
	}}
	svg := c.SVG()
	if err := wellFormed(svg); err != nil {
		t.Fatal(err)
	}
	ls := lines(svg)
	if len(ls) != 3 {
		t.Fatalf("%d lines, want 3: %+v", len(ls), ls)
	}
	a, b, bug := ls[0], ls[1], ls[2]
	if a.dash != "6 6" || b.dash != "6 6" || a.offset == b.offset {
		t.Errorf("equal series dashed %q/%q offset %q/%q: want their turns of one pattern", a.dash, b.dash, a.offset, b.offset)
	}
	for i := range a.points {
		if a.points[i] != b.points[i] {
			t.Errorf("point %d: %v and %v: equal values must stay at their place", i, a.points[i], b.points[i])
		}
	}
	want := marginT + (280-marginT-marginB)*(1-0.1)
	if bug.dash != "" || math.Abs(bug.points[1][1]-want) > 0.1 {
		t.Errorf("bug line %+v: want it solid, at y %.1f", bug, want)
	}

	// Eight series at zero: all on the axis, each in its turn of eight.
	var zeros []Series
	for i := range 8 {
		zeros = append(zeros, Series{Name: strconv.Itoa(i), Color: "#000", Points: []Point{{0, 0}, {1, 0}, {2, 0}}})
	}
	zeros = append(zeros, Series{Name: "ok", Color: "#0a0", Points: []Point{{0, 200}, {1, 210}, {2, 190}}})
	zl := lines(Chart{Series: zeros}.SVG())
	offsets := map[string]bool{}
	for _, l := range zl[:8] {
		for _, pt := range l.points {
			if math.Abs(pt[1]-(280-marginB)) > 0.05 {
				t.Errorf("a zero drawn at y %.1f, off the axis", pt[1])
			}
		}
		if l.dash != "6 42" {
			t.Errorf("dash %q, want a turn of eight (6 42)", l.dash)
		}
		offsets[l.offset] = true
	}
	if len(offsets) != 8 || zl[8].dash != "" {
		t.Errorf("%d distinct turns, want 8; the series apart: dash %q", len(offsets), zl[8].dash)
	}

	// Markers on one another are rings of decreasing size.
	radii := regexp.MustCompile(`<circle cx="[^"]*" cy="[^"]*" r="([^"]*)"`).FindAllStringSubmatch(
		Chart{Series: []Series{{Name: "a", Markers: true, Points: []Point{{0, 5}}}, {Name: "b", Markers: true, Points: []Point{{0, 5}}}}}.SVG(), -1)
	if len(radii) != 2 || radii[0][1] == radii[1][1] {
		t.Errorf("markers at one place: radii %v, want two sizes", radii)
	}
}

// TestChartsDrawAnyNumbers: NaN and infinite values, zeros on a log axis,
// one category, no series, and names that need escaping all give
// well-formed SVG with no NaN in it; a NaN breaks a line.
func TestChartsDrawAnyNumbers(t *testing.T) {
	odd := []Point{{0, math.NaN()}, {1, 0}, {2, 1e9}, {3, math.Inf(1)}, {4, 5}, {5, math.NaN()}, {6, 7}}
	for _, c := range []Chart{
		{Series: []Series{{Name: "a<b&c", Color: `#000"`, Points: odd}}},
		{LogY: true, Series: []Series{{Name: "log", Color: "#111", Points: odd, Markers: true}}},
		{Categories: []string{"only"}, Series: []Series{{Name: "one", Points: []Point{{0, 3}}}}},
		{Bands: []Band{{0, 1, "1×", false}, {1, 2, "2×", true}}, XMax: 2},
		{},
	} {
		svg := c.SVG()
		if err := wellFormed(svg); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
		if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Errorf("NaN or Inf in %s", svg)
		}
	}
	svg := Chart{Series: []Series{{Name: "gappy", Color: "#000", Points: []Point{{0, 1}, {1, 2}, {2, math.NaN()}, {3, 3}, {4, 4}}}}}.SVG()
	if n := len(lines(svg)); n != 2 {
		t.Errorf("a NaN must break the line in two: %d lines", n)
	}
	if !strings.Contains(Chart{Series: []Series{{Name: "m", Markers: true, Points: []Point{{0, 12.5}, {1, 3}}}}, XUnit: "s"}.SVG(), "<title>m at 0s: 12.5</title>") {
		t.Error("a marker's tooltip does not carry its value")
	}
}

func TestNiceCeilAndNum(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, -3: 1, 0.7: 1, 1: 1, 1.2: 2, 2.2: 2.5, 3: 5, 7: 10, 930: 1000, 1001: 2000} {
		if got := NiceCeil(in); got != want {
			t.Errorf("NiceCeil(%v) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[float64]string{0: "0", 2.5: "2.5", 12.345: "12.35", 100: "100", 1234.5: "1234", math.NaN(): "-"} {
		if got := Num(in); got != want {
			t.Errorf("Num(%v) = %q, want %q", in, got, want)
		}
	}
}
