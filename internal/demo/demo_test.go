package demo

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/load"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemoEndToEnd runs the demo on a short schedule (steps of half a
// second) against the bug, the fix and the adaptive gate, and checks what
// the demo claims: the fix serves more cached requests than the bug at
// every step above 1×, by a wide margin; the fix never refuses cached work
// while it refuses uncached work past capacity; the steps offer their
// multiple of the measured capacity; the adaptive gate's capacity moves;
// every gate's books close; the files it writes read back. The margins are
// orderings, not absolute figures, so a loaded machine passes: the bug
// only gets worse when the disk is slower than planned.
//
// On a busy machine a driver drops much of a heavy step from its own
// queue (half of the 10× step on a shared 2-core machine): the bug's cache
// hits, queued behind disk reads, then show as lost more than as refused,
// and a request never sent never met the gate. So the bug is judged on
// the cached requests it turned away (refused or lost), and the refusals
// at 10× as a share of the requests sent. About 16 s: three variants,
// each a stepped real load of half-second steps.
func TestDemoEndToEnd(t *testing.T) {
	var progress []Progress
	res, err := Run(context.Background(), Config{
		StepDuration:  500 * time.Millisecond,
		CapacityProbe: 500 * time.Millisecond,
		Variants:      []Variant{RequestScope, DiskScope, Adaptive},
		Progress:      func(p Progress) { progress = append(progress, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if err := WriteTable(&buf, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s%s", buf.String(), Summary(res))

	// The disk does 4 reads at a time, 40 ms each: 100 a second at most.
	// A busy machine oversleeps, so less is possible; a probe that did not
	// load the disk measures far less.
	if !res.Measured || res.Capacity < 50 || res.Capacity > 105 {
		t.Errorf("capacity %.1f/s measured=%v: want the disk's 100/s (50..105 on a busy machine)", res.Capacity, res.Measured)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(res.Runs))
	}
	bug, fix, adaptive := res.find(RequestScope), res.find(DiskScope), res.find(Adaptive)
	for _, r := range res.Runs {
		if !r.BooksClosed {
			t.Errorf("%s: books do not close: %+v", r.Variant, r.Gate)
		}
		if len(r.Steps) != len(DefaultMultipliers()) {
			t.Fatalf("%s: %d steps, want %d", r.Variant, len(r.Steps), len(DefaultMultipliers()))
		}
		for i, st := range r.Steps {
			want := DefaultMultipliers()[i] * res.Capacity
			for _, c := range []Class{st.Cached, st.Uncached} {
				if math.Abs(c.Offered-want) > 0.1*want+2 {
					t.Errorf("%s step %s: offered %.1f/s, want %.1f/s", r.Variant, FormatMultiplier(st.Multiplier), c.Offered, want)
				}
			}
		}
	}
	// Refusals are judged among the requests the driver sent: a machine
	// too busy for the driver drops arrivals before any gate sees them
	// (the variant's DriverLimited), and those say nothing of the gate.
	refusedOfSent := func(c Class) float64 {
		if sent := c.Scheduled - c.Dropped; sent > 0 {
			return 100 * float64(c.Refused) / float64(sent)
		}
		return 0
	}
	for i := range fix.Steps {
		f, b := fix.Steps[i], bug.Steps[i]
		if f.Multiplier <= 1 {
			continue
		}
		if !(f.Cached.Goodput >= 1.3*b.Cached.Goodput) {
			t.Errorf("step %s: cached goodput: fix %.1f/s, bug %.1f/s: want the fix ahead by 30%% or more",
				FormatMultiplier(f.Multiplier), f.Cached.Goodput, b.Cached.Goodput)
		}
		if !(refusedOfSent(b.Cached) >= refusedOfSent(f.Cached)+20) {
			t.Errorf("step %s: cached refusals of the requests sent: bug %.1f%%, fix %.1f%%: want the bug 20 points higher",
				FormatMultiplier(f.Multiplier), refusedOfSent(b.Cached), refusedOfSent(f.Cached))
		}
	}
	for _, r := range []*VariantResult{fix, adaptive} {
		for _, st := range r.Steps {
			if st.Cached.Refused != 0 {
				t.Errorf("%s step %s: %d cached requests refused; a disk-scoped gate never refuses a cache hit",
					r.Variant, FormatMultiplier(st.Multiplier), st.Cached.Refused)
			}
		}
		if top := r.Steps[len(r.Steps)-1]; refusedOfSent(top.Uncached) < 30 {
			t.Errorf("%s at %s: %.1f%% of the uncached requests sent refused; at ten times the disk's capacity most must be",
				r.Variant, FormatMultiplier(top.Multiplier), refusedOfSent(top.Uncached))
		}
	}
	moved := false
	for _, s := range adaptive.Limit {
		moved = moved || s.Limit != res.WorkLimit
	}
	if len(adaptive.Limit) == 0 || !moved {
		t.Errorf("adaptive gate's capacity never left %d slots: %v", res.WorkLimit, adaptive.Limit)
	}
	if fix.Limit != nil || bug.Limit != nil {
		t.Error("fixed gates report limit samples")
	}
	if len(progress) == 0 {
		t.Error("no progress reported")
	}
	if !strings.Contains(Summary(res), "ahead at every step above 1×") {
		t.Errorf("summary does not state the ordering the numbers show: %s", Summary(res))
	}

	dir := t.TempDir()
	page, err := WriteFiles(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	checkPage(t, page, Summary(res), 9) // goodput, refused, lost and p99, cached and uncached; the adaptive limit
	for _, r := range res.Runs {
		for _, class := range []string{"cached", "uncached"} {
			rep, err := load.ReadReport(filepath.Join(dir, string(r.Variant)+"-"+class+".json"))
			if err != nil {
				t.Fatalf("%s %s report does not read back: %v", r.Variant, class, err)
			}
			if len(rep.Steps) != 1 || len(rep.Steps[0].Windows[0].Phases) != len(DefaultMultipliers()) {
				t.Errorf("%s %s report: want one window of %d phases", r.Variant, class, len(DefaultMultipliers()))
			}
		}
		if _, err := os.Stat(filepath.Join(dir, string(r.Variant)+".html")); err != nil {
			t.Error(err)
		}
	}
}

// checkPage reads an HTML report and checks it is one self-contained
// file: no scripts, no link or fetch to anything but the files beside it,
// every chart well-formed SVG, and the summary in it.
func checkPage(t *testing.T, path, summary string, charts int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Contains(strings.ToLower(page), "<script") {
		t.Error("the page has a script")
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if strings.Contains(m[1], ":") || strings.Contains(m[1], "/") {
			t.Errorf("the page refers to %q: only files beside it are allowed", m[1])
		}
	}
	if n := strings.Count(page, "http"); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("the page names %d URLs beyond the SVG namespace", n-strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`))
	}
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(page, -1)
	if len(svgs) != charts {
		t.Errorf("%d charts, want %d", len(svgs), charts)
	}
	for _, s := range svgs {
		if err := wellFormed(s); err != nil {
			t.Errorf("chart is not well-formed XML: %v", err)
		}
	}
	if !strings.Contains(page, htmlEscape(summary)) {
		t.Error("the page does not carry the summary")
	}
}

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

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// TestConfigRejectsBadValues: every bad field is an ErrInvalidConfig
// before anything starts.
func TestConfigRejectsBadValues(t *testing.T) {
	for name, c := range map[string]Config{
		"negative step":        {StepDuration: -time.Second},
		"step over bound":      {StepDuration: MaxStepDuration + 1},
		"no steps":             {Multipliers: []float64{}},
		"zero multiplier":      {Multipliers: []float64{1, 0}},
		"NaN multiplier":       {Multipliers: []float64{math.NaN()}},
		"multiplier too large": {Multipliers: []float64{MaxMultiplier + 1}},
		"no variants":          {Variants: []Variant{}},
		"unknown variant":      {Variants: []Variant{"sideways"}},
		"duplicate variant":    {Variants: []Variant{DiskScope, DiskScope}},
		"negative channels":    {Disk: Disk{Channels: -1}},
		"negative service":     {Disk: Disk{Service: -time.Millisecond}},
		"too many channels":    {Disk: Disk{Channels: 5000}},
		"negative work limit":  {WorkLimit: -1},
		"unknown law":          {Law: "newton"},
		"negative SLO":         {SLO: -time.Second},
		"negative probe":       {CapacityProbe: -time.Second},
		"negative capacity":    {Capacity: -1},
		"infinite capacity":    {Capacity: math.Inf(1)},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Run(context.Background(), c)
			if !errors.Is(err, ErrInvalidConfig) || res != nil {
				t.Fatalf("Run = %v, %v: want ErrInvalidConfig", res, err)
			}
		})
	}
}

// TestCanceledRunStopsAndCleansUp: a canceled context ends the run with
// its error, and nothing it started keeps running (goleak checks).
// About 2 s: the capacity probe and a server start before the first
// progress report cancels the run.
func TestCanceledRunStopsAndCleansUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	res, err := Run(ctx, Config{
		Capacity: 50, StepDuration: 10 * time.Second, Variants: []Variant{DiskScope},
		Progress: func(Progress) { cancel() },
	})
	cancel()
	if err == nil || !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run = %v, %v: want context.Canceled", res, err)
	}
}
