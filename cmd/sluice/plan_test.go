package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/plan"
)

// The backlog drain table through the CLI, to the digit: backlog 120,000
// and 900 attempts a second.
func TestPlanDrainTable(t *testing.T) {
	rows := []struct {
		refused, completed string
		code               int
		net                float64
		seconds            *float64
		text               string
	}{
		{"400", "500", exitFail, 0, nil, "never"},
		{"600", "500", exitOK, 200, ptr(600.0), "600 s"},
		{"600", "400", exitOK, 100, ptr(1200.0), "1200 s"},
	}
	for _, row := range rows {
		args := []string{"plan", "drain", "--backlog", "120000", "--offered", "900", "--refused", row.refused, "--completed", row.completed}
		code, stdout, stderr := runCmd(context.Background(), nil, append(args, "--json")...)
		if code != row.code {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, row.code, stderr)
		}
		var got struct {
			Net     float64  `json:"net_drain_per_second"`
			Never   bool     `json:"never"`
			Seconds *float64 `json:"drain_seconds"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stdout)
		}
		if got.Net != row.net || (got.Seconds == nil) != (row.seconds == nil) || (got.Seconds != nil && *got.Seconds != *row.seconds) || got.Never != (row.seconds == nil) {
			t.Errorf("%v: got %s", args, stdout)
		}
		code, stdout, _ = runCmd(context.Background(), nil, args...)
		if code != row.code || !strings.Contains(stdout, row.text) || !strings.Contains(stdout, "net drain") {
			t.Errorf("%v: exit %d, table:\n%s", args, code, stdout)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestPlanCalculations(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"little", "--rate", "500", "--total-time", "200ms"}, exitOK, []string{"L (in system)", "100 ← solved"}},
		{[]string{"little", "--queued", "25", "--rate", "500"}, exitOK, []string{"Wq (queue time)", "0.05 s ← solved"}},
		{[]string{"little", "--rate", "500", "--total-time", "0.2", "--in-system", "300"}, exitFail, []string{"does NOT add up"}},
		{[]string{"queue", "--target-wait", "200ms", "--safe-rate", "500", "--item-bytes", "64KiB"}, exitOK, []string{"100 items", "6.25 MiB"}},
		{[]string{"retry", "--attempts", "4", "--layers", "3"}, exitOK, []string{"4 → 16 → 64", "64 attempts per original"}},
		{[]string{"retry", "--attempts", "4", "--layers", "3", "--budget", "0.1", "--rate", "100"}, exitOK, []string{"1.331 attempts", "6400 /s", "133.1 /s"}},
		{[]string{"wait", "--slots", "4", "--service-time", "10ms", "--rate", "300"}, exitOK, []string{"P(wait) (Erlang C)          0.509434", "mean time in system         15.0943 ms"}},
		{[]string{"wait", "--slots", "1", "--service-time", "0.01", "--rate", "90"}, exitOK, []string{"mean time in system         100 ms", "p99 time in system          460.517 ms"}},
		{[]string{"wait", "--slots", "4", "--service-time", "10ms", "--rate", "380", "--target-p99-wait", "50ms"}, exitFail, []string{"p99 wait                    224.511 ms", "5; 4 does NOT meet it"}},
		{[]string{"wait", "--service-time", "10ms", "--rate", "380", "--target-p99-wait", "50ms"}, exitOK, []string{"5 (the fewest that meet the target)", "p99 wait                    32.253 ms"}},
		{[]string{"wait", "--slots", "4", "--service-time", "10ms", "--rate", "400"}, exitFail, []string{"grows without bound"}},
		{[]string{"fleet", "--per-instance", "50", "--instances", "10"}, exitOK, []string{"50 × 10 = 500"}},
		{[]string{"fleet", "--per-instance", "50", "--instances", "10", "--shared", "300"}, exitFail, []string{"OVER by 200", "6 at 50 each", "30 at 10 instances"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(context.Background(), nil, append([]string{"plan"}, c.args...)...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, stdout, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, stdout)
			}
		}
	}
	// JSON carries the same figures.
	code, stdout, _ := runCmd(context.Background(), nil, "plan", "retry", "--attempts", "4", "--layers", "3", "--json")
	var r struct {
		WorstCase float64 `json:"worst_case"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &r) != nil || r.WorstCase != 64 {
		t.Errorf("retry --json: exit %d\n%s", code, stdout)
	}
}

// Bad input exits 2 with a reason that says what is wrong.
func TestPlanBadInputExitsTwo(t *testing.T) {
	cases := []struct {
		args   []string
		reason string
	}{
		{[]string{}, "usage: sluice plan"},
		{[]string{"nope"}, "unknown calculation"},
		{[]string{"little", "--queued", "40", "--total-time", "200ms"}, "overstates the queue"},
		{[]string{"little", "--in-system", "100", "--queue-time", "50ms"}, "understates L"},
		{[]string{"little", "--rate", "500", "--total-time", "200ms", "--stat", "p99"}, "not an average"},
		{[]string{"little", "--rate", "500"}, "give two of the three"},
		{[]string{"little", "--rate", "-5", "--total-time", "1s"}, "must not be negative"},
		{[]string{"little", "--rate", "NaN", "--total-time", "1s"}, "finite"},
		{[]string{"little", "--total-time", "soon", "--rate", "1"}, "want a duration"},
		{[]string{"drain", "--offered", "10", "--refused", "20"}, "cannot exceed offered"},
		{[]string{"drain", "--backlog", "x"}, "--backlog \"x\": want a number"},
		{[]string{"drain", "--step", "2"}, "need --report"},
		{[]string{"drain", "--report", "/nonexistent/r.json"}, "no such file"},
		{[]string{"drain", "extra"}, "unexpected argument"},
		{[]string{"queue", "--safe-rate", "500"}, "target-wait"},
		{[]string{"queue", "--target-wait", "1s", "--safe-rate", "5", "--item-bytes", "12XB"}, "unknown unit"},
		{[]string{"retry", "--attempts", "0"}, "at least 1"},
		{[]string{"retry", "--attempts", "4", "--layers", "100"}, "from 1 to 64"},
		{[]string{"fleet", "--per-instance", "50"}, "instances"},
		{[]string{"wait", "--service-time", "10ms", "--rate", "100"}, "slots 0: required"},
		{[]string{"wait", "--slots", "4", "--rate", "100"}, "service-time 0: required"},
		{[]string{"wait", "--slots", "4", "--service-time", "10ms"}, "rate 0: required"},
		{[]string{"wait", "--slots", "-1", "--service-time", "10ms", "--rate", "1"}, "must be 1 to"},
		{[]string{"wait", "--slots", "4", "--service-time", "-1s", "--rate", "1"}, "must not be negative"},
		{[]string{"wait", "--slots", "4", "--service-time", "10ms", "--rate", "Inf"}, "finite"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(context.Background(), nil, append([]string{"plan"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.reason) || stdout != "" {
			t.Errorf("%v: exit %d, want 2 with %q\nstdout: %s\nstderr: %s", c.args, code, c.reason, stdout, stderr)
		}
	}
	if code, _, _ := runCmd(context.Background(), nil, "plan", "drain", "--help"); code != exitOK {
		t.Errorf("--help: exit %d", code)
	}
}

// A real `sluice load` run against a server that refuses one request in
// four; plan drain reads its report.
// Over a second: a real sluice load run for plan to read.
func TestPlanDrainFromLoadReport(t *testing.T) {
	srv := okServer(t, 4)
	out := filepath.Join(t.TempDir(), "r.json")
	if code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "200", "--duration", "300ms",
		"--windows", "2", "--max-lag", "1s", "--out", out, "--live", "off"); code != exitOK {
		t.Fatalf("load: exit %d\n%s\n%s", code, stdout, stderr)
	}
	rep, err := load.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	var secs float64
	var sched, refused, ok int64
	for _, w := range rep.Steps[0].Windows {
		secs += w.DurationS
		sched += w.Counts.Scheduled
		refused += w.Counts.Refused + w.Counts.Dropped
		ok += w.Counts.OK
	}
	code, stdout, stderr := runCmd(context.Background(), nil, "plan", "drain", "--report", out, "--backlog", "1000", "--json")
	var got struct {
		Offered   float64 `json:"offered_per_second"`
		Refused   float64 `json:"refused_per_second"`
		Completed float64 `json:"completed_per_second"`
		Net       float64 `json:"net_drain_per_second"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if got.Offered != float64(sched)/secs || got.Refused != float64(refused)/secs || got.Completed != float64(ok)/secs {
		t.Errorf("got %+v; want offered %v refused %v completed %v", got, float64(sched)/secs, float64(refused)/secs, float64(ok)/secs)
	}
	if got.Refused == 0 || got.Completed == 0 {
		t.Errorf("a server refusing one in four gave refused %v completed %v", got.Refused, got.Completed)
	}
	// Flags win over the report; one window can be picked.
	code, stdout, _ = runCmd(context.Background(), nil, "plan", "drain", "--report", out, "--window", "1", "--completed", "1e6", "--backlog", "1000", "--json")
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK || got.Completed != 1e6 {
		t.Errorf("override: exit %d %+v %v", code, got, err)
	}
	w := rep.Steps[0].Windows[0]
	if want := float64(w.Counts.Scheduled) / w.DurationS; math.Abs(got.Offered-want) > 1e-9 {
		t.Errorf("window 1 offered %v, want %v", got.Offered, want)
	}
	for _, args := range [][]string{{"--step", "2"}, {"--window", "3"}, {"--window", "-1"}} {
		if code, _, stderr := runCmd(context.Background(), nil, append([]string{"plan", "drain", "--report", out}, args...)...); code != exitUsage || !strings.Contains(stderr, "the report has") && !strings.Contains(stderr, "has windows") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}

// Little's law from a saved report: the rate of answered requests and
// their mean request time give the requests the server had in hand.
func TestPlanLittleFromLoadReport(t *testing.T) {
	path := filepath.Join("testdata", "plan", "report.json")
	rep, err := load.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	var secs, n, sum float64
	for _, w := range rep.Steps[len(rep.Steps)-1].Windows {
		secs += w.DurationS
		n += float64(w.Latency.RequestTime.Count)
		sum += float64(w.Latency.RequestTime.Count) * w.Latency.RequestTime.Mean
	}
	code, stdout, stderr := runCmd(context.Background(), nil, "plan", "little", "--report", path, "--json")
	var got struct {
		Scope  string  `json:"scope"`
		Rate   float64 `json:"rate_per_second"`
		Count  float64 `json:"count"`
		Time   float64 `json:"time_seconds"`
		Solved string  `json:"solved"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK {
		t.Fatalf("exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	wantRate, wantTime := n/secs, sum/n/1000
	if got.Scope != "system" || got.Solved != "count" || got.Rate != wantRate || math.Abs(got.Time-wantTime) > 1e-12 || math.Abs(got.Count-wantRate*wantTime) > 1e-9 {
		t.Errorf("got %+v, want rate %v time %v", got, wantRate, wantTime)
	}
	// A server-side count far from what the driver saw does not add up.
	if code, stdout, _ := runCmd(context.Background(), nil, "plan", "little", "--report", path, "--in-system", "50"); code != exitFail || !strings.Contains(stdout, "does NOT add up") {
		t.Errorf("check: exit %d\n%s", code, stdout)
	}
	// A gate's inflight gauge alone leaves its queue out: the message says
	// to add the waiting gauge, and with it the figures add up.
	inflight, waiting := strconv.FormatFloat(got.Count*0.6, 'f', 3, 64), strconv.FormatFloat(got.Count*0.4, 'f', 3, 64)
	if code, stdout, _ := runCmd(context.Background(), nil, "plan", "little", "--report", path, "--in-system", inflight); code != exitFail || !strings.Contains(stdout, "add its waiting gauge (--waiting)") {
		t.Errorf("inflight alone: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "plan", "little", "--report", path, "--in-system", inflight, "--waiting", waiting); code != exitOK || !strings.Contains(stdout, "adds up") || !strings.Contains(stdout, "+ waiting") {
		t.Errorf("inflight + waiting: exit %d\n%s", code, stdout)
	}
	// The report's total time with a queue count is the mixing refused.
	if code, _, stderr := runCmd(context.Background(), nil, "plan", "little", "--report", path, "--queued", "3"); code != exitUsage || !strings.Contains(stderr, "overstates the queue") {
		t.Errorf("mixed: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCmd(context.Background(), nil, "plan", "little", "--window", "1", "--rate", "1"); code != exitUsage || !strings.Contains(stderr, "need --report") {
		t.Errorf("--window without --report: exit %d\n%s", code, stderr)
	}
}

// FuzzPlanArgs: any command line either computes (0 or 1) or is refused
// with exit 2 and a reason; never a panic, and --json output is JSON.
func FuzzPlanArgs(f *testing.F) {
	for _, s := range []string{
		"drain --backlog 120000 --offered 900 --refused 600 --completed 500 --json",
		"little --rate 500 --total-time 200ms",
		"little --queued 40 --total-time 0.2",
		"queue --target-wait 1e308 --safe-rate 1e308 --item-bytes 1G",
		"retry --attempts 4 --layers 3 --budget 0.1 --json",
		"fleet --per-instance 9223372036854775807 --instances 2",
		"little --rate 1e-320 --in-system 1e300 --json",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := append([]string{"plan"}, strings.Fields(line)...)
		code, stdout, stderr := runCmd(context.Background(), nil, args...)
		switch code {
		case exitOK, exitFail:
			if strings.Contains(line, "--json") && !strings.Contains(line, "-h") && stdout != "" && !json.Valid([]byte(stdout)) {
				t.Errorf("%q: not JSON:\n%s", line, stdout)
			}
		case exitUsage:
			if stderr == "" {
				t.Errorf("%q: exit 2 without a reason", line)
			}
		default:
			t.Errorf("%q: exit %d", line, code)
		}
	})
}

// FuzzPlanDrainReport: a report file is refused or read; never a panic.
func FuzzPlanDrainReport(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "plan", "report.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"schema":"sluice/load-report/v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := load.ParseReport(data)
		if err != nil {
			return
		}
		for _, sw := range [][2]int{{0, 0}, {1, 1}, {-1, 0}, {0, 99}} {
			d, err := drainFromReport(rep, sw[0], sw[1])
			if err != nil {
				continue
			}
			// A report that validates reconciles its counts, so its
			// rates are finite, non-negative and refused ≤ offered.
			if _, err := d.Solve(); err != nil {
				t.Fatalf("rates %+v from a valid report: %v", d, err)
			}
		}
		for _, sw := range [][2]int{{0, 0}, {1, 1}} {
			rate, total, err := littleFromReport(rep, sw[0], sw[1])
			if err != nil {
				continue
			}
			if rate <= 0 || total < 0 || math.IsNaN(total) || math.IsInf(total, 0) {
				t.Fatalf("rate %v, total time %v from a valid report", rate, total)
			}
			_, _ = plan.Little{Rate: rate, TotalTime: total}.Solve() // refused or solved, never a panic
		}
	})
}
