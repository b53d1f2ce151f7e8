package demo

import (
	"math"
	"strings"
	"testing"
)

// synthetic builds a result whose cached goodput per step is given for
// the bug and the fix, and whose uncached p99 at the top step is given per
// variant.
func synthetic(bugCached, fixCached []float64, p99 map[Variant]float64, refused map[Variant]float64) *Result {
	mults := []float64{1, 2, 5, 10}
	res := &Result{Capacity: 100, Measured: true, Multipliers: mults, WorkLimit: 16}
	for _, v := range Variants() {
		r := VariantResult{Variant: v, BooksClosed: true}
		for i, m := range mults {
			st := Step{Multiplier: m}
			offered := m * 100
			st.Cached = Class{Offered: offered, Goodput: offered, P99: 2}
			st.Uncached = Class{Offered: offered, Goodput: 100, P99: 50}
			switch v {
			case RequestScope:
				st.Cached.Goodput = bugCached[i]
			case DiskScope:
				st.Cached.Goodput = fixCached[i]
			}
			st.Cached.RefusedPercent = 100 * (offered - st.Cached.Goodput) / offered
			if i == len(mults)-1 {
				st.Uncached.P99 = p99[v]
				st.Uncached.RefusedPercent = refused[v]
			}
			r.Steps = append(r.Steps, st)
		}
		if v == Adaptive {
			r.Limit = []LimitSample{{Limit: 16}, {Limit: 7}}
		}
		res.Runs = append(res.Runs, r)
	}
	return res
}

// TestSummaryFollowsTheNumbers: the two sentences say what the numbers
// say, and change when the numbers do.
func TestSummaryFollowsTheNumbers(t *testing.T) {
	p99 := map[Variant]float64{NoGate: 1300, RequestScope: 170, DiskScope: 180, Adaptive: 120}
	refused := map[Variant]float64{NoGate: 0, RequestScope: 90, DiskScope: 90, Adaptive: 90}

	fixWins := Summary(synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000}, p99, refused))
	for _, want := range []string{
		"At 10× capacity", "refused 92.6% of cached requests and served 74/s", "served 1000/s with 0.0% refused",
		"ahead at every step above 1×",
		"highest with no-gate (1.30s", "lowest with adaptive (120ms", "ending at 7 slots", "refusing the excess",
	} {
		if !strings.Contains(fixWins, want) {
			t.Errorf("summary lacks %q:\n%s", want, fixWins)
		}
	}
	if n := strings.Count(fixWins, ". "); n != 1 || !strings.HasSuffix(fixWins, ".") {
		t.Errorf("want exactly two sentences, got:\n%s", fixWins)
	}

	bugWins := Summary(synthetic([]float64{100, 200, 500, 1000}, []float64{100, 150, 400, 900}, p99, refused))
	if strings.Contains(bugWins, "ahead") || !strings.Contains(bugWins, "does not show the bug") ||
		!strings.Contains(bugWins, "900/s against 1000/s") {
		t.Errorf("the fix lost and the summary does not say so:\n%s", bugWins)
	}

	mixed := Summary(synthetic([]float64{100, 250, 60, 74}, []float64{100, 200, 500, 1000}, p99, refused))
	if !strings.Contains(mixed, "ahead at only 2 of the 3 steps above 1×") {
		t.Errorf("the fix lost at 2× and the summary does not say so:\n%s", mixed)
	}

	swapped := map[Variant]float64{NoGate: 120, RequestScope: 170, DiskScope: 180, Adaptive: 1300}
	flipped := Summary(synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000}, swapped, refused))
	if !strings.Contains(flipped, "highest with adaptive (1.30s") || !strings.Contains(flipped, "lowest with no-gate (120ms") ||
		strings.Contains(flipped, "refusing the excess") {
		t.Errorf("latency ranking does not follow the numbers:\n%s", flipped)
	}

	none := synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000}, p99, refused)
	none.Runs = none.Runs[:1]
	if s := Summary(none); !strings.Contains(s, "cannot compare the bug with the fix") || !strings.Contains(s, "Too few variants") {
		t.Errorf("a run of one variant: %s", s)
	}
}

// TestFormatting: the table's number formats.
func TestFormatting(t *testing.T) {
	for in, want := range map[float64]string{math.NaN(): "-", 0.42: "0.4ms", 38.2: "38ms", 1250: "1.25s"} {
		if got := FormatMS(in); got != want {
			t.Errorf("FormatMS(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{1: "1×", 2.5: "2.5×", 10: "10×", 0.25: "0.25×"} {
		if got := FormatMultiplier(in); got != want {
			t.Errorf("FormatMultiplier(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestChartsDrawAnyNumbers: charts of NaN, zero, one step and huge values
// are still well-formed SVG.
func TestChartsDrawAnyNumbers(t *testing.T) {
	for _, logY := range []bool{false, true} {
		for _, steps := range [][]float64{{1}, {1, 2, 5, 10}} {
			ss := []series{
				{name: "a<b", color: "#000", ys: []float64{math.NaN(), 0, 1e9, math.Inf(1)}},
				{name: "empty", color: "#111"},
			}
			if err := wellFormed(stepChart(steps, ss, logY)); err != nil {
				t.Errorf("log=%v steps=%v: %v", logY, steps, err)
			}
		}
	}
	if err := wellFormed(limitChart([]LimitSample{{Limit: 16}, {At: 3e9, Limit: 4}}, 0, nil)); err != nil {
		t.Error(err)
	}
	page := HTML(synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000},
		map[Variant]float64{NoGate: math.NaN(), RequestScope: 1, DiskScope: 2, Adaptive: 3}, map[Variant]float64{}))
	if !strings.Contains(string(page), "</html>") {
		t.Error("page not finished")
	}
}
