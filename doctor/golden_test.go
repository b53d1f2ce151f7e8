package doctor

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.txt from the current output")

// loadCase reads a recorded case: two metric snapshots, the time between
// them, and optionally /state documents and a goroutine dump.
func loadCase(t *testing.T, name string) (before, after *Reading, gs *GoroutineSummary) {
	t.Helper()
	dir := filepath.Join("testdata", name)
	var c struct {
		Interval float64 `json:"interval_seconds"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	read := func(file string, at time.Time) *Reading {
		f, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := ParseMetrics(f, at)
		if err != nil {
			t.Fatalf("%s/%s: %v", name, file, err)
		}
		return r
	}
	before = read("before.prom", t0)
	after = read("after.prom", t0.Add(time.Duration(c.Interval*float64(time.Second))))
	for file, r := range map[string]*Reading{"state_before.json": before, "state_after.json": after} {
		if f, err := os.Open(filepath.Join(dir, file)); err == nil {
			r.State, err = ParseState(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if f, err := os.Open(filepath.Join(dir, "goroutines.txt")); err == nil {
		gs, err = ParseGoroutines(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return before, after, gs
}

// Every finding has a recorded case that shows it; the rendered report is
// compared with a golden file, and the set of finding codes with the list
// below, so a golden file cannot quietly absorb a lost finding.
func TestGoldenFindings(t *testing.T) {
	cases := map[string][]string{
		"healthy":                    nil,
		"arrivals_above_completions": {CodeArrivalsAboveCompletions},
		"queue_growing_at_capacity":  {CodeQueueGrowingAtCapacity},
		// The heavy permit completes nothing in the interval either.
		"queue_growing_below_capacity": {CodeQueueGrowingBelowCap, CodeStalled},
		// The three permits held across the interval complete nothing:
		// Little's law rightly says so too.
		"oldest_waiter_stuck": {CodeOldestWaiterStuck, CodeLittleMismatch},
		// A queue grows while nothing completes: both findings are true.
		"stalled":                     {CodeStalled, CodeQueueGrowingAtCapacity},
		"refusals_concentrated_gate":  {CodeArrivalsAboveCompletions, CodeRefusalsConcentrated},
		"refusals_concentrated_kind":  {CodeArrivalsAboveCompletions, CodeRefusalsConcentrated},
		"refusals_concentrated_class": {CodeArrivalsAboveCompletions, CodeRefusalsConcentrated},
		"retries_amplifying":          {CodeRetriesAmplifying},
		"littles_law_mismatch":        {CodeLittleMismatch},
		"counter_missing":             {CodeCounterMissing, CodeCounterMissing},
		"counter_missing_state":       {CodeCounterMissing},
		"counter_reset":               {CodeCounterReset},
		"double_release":              {CodeDoubleRelease},
		"draining":                    {CodeDraining},
		"goroutines":                  {CodeGoroutinesInGateQueues, CodeGoroutinesOnLocks, CodeStalled, CodeQueueGrowingAtCapacity},
	}
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, ok := cases[d.Name()]; d.IsDir() && d.Name() != "fuzz" && !ok {
			t.Errorf("testdata/%s has no entry in the case list", d.Name())
		}
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			before, after, gs := loadCase(t, name)
			d := Diagnose(before, after, gs)
			var got []string
			for _, f := range d.Findings {
				got = append(got, f.Code)
				if f.Seen == "" || f.Meaning == "" || f.Next == "" || f.Figures == nil {
					t.Errorf("finding %s lacks a part: %+v", f.Code, f)
				}
			}
			sort.Strings(got)
			want = slices.Clone(want)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("findings %v, want %v", got, want)
			}
			var b bytes.Buffer
			if err := d.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name, "want.txt")
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantText, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != string(wantText) {
				t.Errorf("report differs from %s (run with -update to accept):\n%s", golden, b.String())
			}
		})
	}
}
