package demo

import (
	"html"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/load"
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

// TestChartsDrawAnyNumbers: a page of NaN, zero and missing figures, and
// a limit chart of odd samples, are still finished, well-formed pages.
func TestChartsDrawAnyNumbers(t *testing.T) {
	if err := wellFormed(limitChart([]LimitSample{{Limit: 16}, {At: 3e9, Limit: 4}}, 0, nil)); err != nil {
		t.Error(err)
	}
	page := string(HTML(synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000},
		map[Variant]float64{NoGate: math.NaN(), RequestScope: 1, DiskScope: 2, Adaptive: 3}, map[Variant]float64{})))
	if !strings.Contains(page, "</html>") || strings.Contains(page, "NaN") {
		t.Error("page not finished, or a NaN reached it")
	}
	if n := strings.Count(page, "<svg"); n != 9 {
		t.Errorf("%d charts, want one per figure (goodput, refused, lost, p99; cached and uncached) and the adaptive limit", n)
	}
	for _, title := range []string{"Cached work: lost (%)", "Uncached work: lost (%)"} {
		if !strings.Contains(page, html.EscapeString(title)) {
			t.Errorf("no chart %q", title)
		}
	}
}

// TestNotesExplainTheCeilingAndTheOvershoot: a p99 measured while the
// driver dropped requests is marked as the driver's ceiling, with the
// ceiling computed; uncached goodput above the capacity is explained;
// both in the text table and on the page.
func TestNotesExplainTheCeilingAndTheOvershoot(t *testing.T) {
	p99 := map[Variant]float64{NoGate: 1310, RequestScope: 170, DiskScope: 180, Adaptive: 120}
	res := synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000}, p99, map[Variant]float64{})
	res.Disk = Disk{Channels: 4, Service: 40 * time.Millisecond}
	ng := res.find(NoGate)
	ng.Steps[1].Uncached.Goodput = 148
	for _, i := range []int{2, 3} {
		ng.Steps[i].Uncached.P99, ng.Steps[i].Uncached.P99Capped = 1310, true
	}
	if got := res.Ceiling(); got != 1320*time.Millisecond {
		t.Errorf("ceiling %v, want (64 + 64) / 100 + 40 ms = 1.32 s", got)
	}
	notes := strings.Join(Notes(res), "\n")
	for _, want := range []string{
		"≥ marks a p99 at the driver's ceiling (uncached: no-gate at 5×, no-gate at 10×)", "(64 + 64) ÷ 100/s + one read = 1.32s",
		"no-gate's uncached ok/s at 2× (148/s) is above the capacity (100/s)", "still being answered during the next",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	var b strings.Builder
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "≥1.31s") || !strings.Contains(b.String(), "note: ≥ marks") {
		t.Errorf("the table does not mark the capped p99:\n%s", b.String())
	}
	if s := Summary(res); !strings.Contains(s, "highest with no-gate (at least 1.31s") {
		t.Errorf("the summary states a capped p99 as a measurement: %s", s)
	}
	page := string(HTML(res))
	if !strings.Contains(page, "≥1.31s") || !strings.Contains(page, "is above the capacity") {
		t.Error("the page does not carry the notes")
	}
	// Goodput within the probe's spread of the capacity is not explained
	// as carried over.
	ng.Steps[1].Uncached.Goodput = 107
	if n := strings.Join(Notes(res), "\n"); strings.Contains(n, "above the capacity") {
		t.Errorf("107/s against a capacity of 100/s explained as carried over:\n%s", n)
	}
	// Without drops and overshoot there is nothing to explain.
	for _, n := range Notes(synthetic([]float64{100, 50, 60, 74}, []float64{100, 200, 500, 1000}, p99, map[Variant]float64{})) {
		if strings.Contains(n, "ceiling") || strings.Contains(n, "above the capacity") {
			t.Errorf("a note with nothing to explain: %s", n)
		}
	}
}

// TestClassOfMarksTheCeiling: a step in which the driver dropped requests
// while those it sent waited near its ceiling has a capped p99; one
// without drops, one whose drops came with quick answers (a busy machine,
// not a pile-up) and cached work have not.
func TestClassOfMarksTheCeiling(t *testing.T) {
	ceil := 1320 * time.Millisecond
	slow, quick := load.Dist{Count: 10, P99: 1310}, load.Dist{Count: 10, P99: 350}
	dropped := load.PhaseCounts{Scheduled: 100, Sent: 60, Dropped: 40, OK: 60}
	calm := load.PhaseCounts{Scheduled: 100, Sent: 100, OK: 100}
	for _, c := range []struct {
		name   string
		counts load.PhaseCounts
		p99    load.Dist
		ceil   time.Duration
		capped bool
	}{
		{"pile-up", dropped, slow, ceil, true},
		{"no drops", calm, slow, ceil, false},
		{"drops, quick answers", dropped, quick, ceil, false},
		{"cached work", dropped, slow, 0, false},
	} {
		got := classOf(load.Phase{EndS: 2, Counts: c.counts, OKResponseTime: c.p99}, c.ceil)
		if got.P99Capped != c.capped || got.P99 != c.p99.P99 {
			t.Errorf("%s: %+v, want capped %v", c.name, got, c.capped)
		}
	}
}
