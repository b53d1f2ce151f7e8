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

// polylines returns each polyline's points, in order.
func polylines(svg string) [][][2]float64 {
	var out [][][2]float64
	for _, m := range regexp.MustCompile(`<polyline [^>]*points="([^"]*)"`).FindAllStringSubmatch(svg, -1) {
		var line [][2]float64
		for _, p := range strings.Fields(m[1]) {
			x, y, _ := strings.Cut(p, ",")
			fx, _ := strconv.ParseFloat(x, 64)
			fy, _ := strconv.ParseFloat(y, 64)
			line = append(line, [2]float64{fx, fy})
		}
		out = append(out, line)
	}
	return out
}

// TestCoincidingSeriesBothShow: series with equal values are drawn side
// by side, a stroke and a gap apart, not one over the other; series that
// differ stay where their values put them.
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
	ls := polylines(svg)
	if len(ls) != 3 {
		t.Fatalf("%d lines, want 3", len(ls))
	}
	a, b, bug := ls[0], ls[1], ls[2]
	for i := range a {
		if d := math.Abs(a[i][1] - b[i][1]); d < 3 {
			t.Errorf("point %d: equal series %.1f px apart, want at least the wider stroke (3 px)", i, d)
		}
	}
	// The bug's line is alone from the second point on: exactly where its
	// values say (10 of a 100 axis). At the first it shares 0 with both.
	want := marginT + (280-marginT-marginB)*(1-0.1)
	for i := 1; i < len(bug); i++ {
		if math.Abs(bug[i][1]-want) > 0.1 {
			t.Errorf("bug point %d at y %.1f, want %.1f: a series that overlaps nothing must not move", i, bug[i][1], want)
		}
	}
	// Near values are spread in their own order: the larger stays above,
	// whichever series comes first.
	near := Chart{Series: []Series{
		{Name: "lower", Points: []Point{{0, 995}, {1, 995}}},
		{Name: "higher", Points: []Point{{0, 1000}, {1, 1000}}},
	}}.SVG()
	if nl := polylines(near); len(nl) != 2 || nl[0][0][1]-nl[1][0][1] < 2 {
		t.Errorf("995 drawn at y %.1f and 1000 at %.1f: the larger value must stay above, a stroke apart", nl[0][0][1], nl[1][0][1])
	}
	// Dodged points stay inside the plot.
	for _, l := range ls {
		for _, p := range l {
			if p[1] < marginT || p[1] > 280-marginB {
				t.Errorf("point %v outside the plot", p)
			}
		}
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
	if n := len(polylines(svg)); n != 2 {
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
