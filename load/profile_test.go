package load

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile([]byte(`{"name":"release","cases":[
		{"name":"list","rate":1200,"windows":3,"duration":"60s","workers":48,"qps_floor":1190,"p99_budget_ms":100,"max_refusal_rate":0,"max_error_rate":0.01,"zero_drops":true},
		{"name":"sync","concurrency":16}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Case("list")
	if err != nil || c.QPSFloor != 1190 || *c.MaxRefusalRate != 0 || *c.MaxErrorRate != 0.01 || !c.ZeroDrops {
		t.Fatalf("case %+v err %v", c, err)
	}
	if s, _ := p.Case("sync"); s.MaxRefusalRate != nil {
		t.Error("absent max_refusal_rate must mean no limit (nil)")
	}
	if _, err := p.Case(""); !errors.Is(err, ErrBadProfile) || !strings.Contains(err.Error(), "list, sync") {
		t.Errorf("ambiguous case: %v", err)
	}
	if _, err := p.Case("nope"); !errors.Is(err, ErrBadProfile) {
		t.Errorf("missing case: %v", err)
	}
}

func TestParseProfileErrors(t *testing.T) {
	for name, s := range map[string]string{
		"not json":        `{`,
		"no cases":        `{"name":"x","cases":[]}`,
		"unknown field":   `{"cases":[{"name":"a","qps":1}]}`,
		"unnamed":         `{"cases":[{"qps_floor":1}]}`,
		"duplicate":       `{"cases":[{"name":"a"},{"name":"a"}]}`,
		"rate > 1":        `{"cases":[{"name":"a","max_error_rate":1.5}]}`,
		"negative floor":  `{"cases":[{"name":"a","qps_floor":-1}]}`,
		"bad duration":    `{"cases":[{"name":"a","duration":"soon"}]}`,
		"zero duration":   `{"cases":[{"name":"a","duration":"0s"}]}`,
		"rate and conc":   `{"cases":[{"name":"a","rate":1,"concurrency":2}]}`,
		"trailing":        `{"cases":[{"name":"a"}]} {}`,
		"negative counts": `{"cases":[{"name":"a","workers":-2}]}`,
	} {
		if _, err := ParseProfile([]byte(s)); !errors.Is(err, ErrBadProfile) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// judgedWindow builds a window with the given counts and latencies (one
// value each: enough to pin the percentiles).
func judgedWindow(t *testing.T, c Counts, respMS, reqMS, lagMS float64, secs float64) Window {
	t.Helper()
	mk := func(ms float64, n int64) Dist {
		h := newHist()
		for range n {
			record(h, msDur(ms))
		}
		return distOf(h)
	}
	answered := c.OK + c.Refused + c.HTTPError
	if c.DropReasons == nil {
		c.DropReasons = map[string]int64{}
	}
	w := Window{DurationS: secs, Counts: c, Rates: ratesOf(c, secs)}
	w.Latency = Latency{ResponseTime: mk(respMS, answered), RequestTime: mk(reqMS, answered)}
	w.Driver.ScheduleLag = mk(lagMS, c.Scheduled)
	return w
}

func reportOf(ws ...Window) *Report {
	return &Report{Schema: SchemaV1, Kind: "load", Steps: []Step{{Label: "s", Mode: "open",
		Settings: Settings{P99BudgetMS: 500, MaxLagMS: 10}, Windows: ws}}}
}

func f64(v float64) *float64 { return &v }

func TestJudgeVerdicts(t *testing.T) {
	gate := &Case{Name: "gate", QPSFloor: 90, P99BudgetMS: 100, MaxRefusalRate: f64(0.01), MaxErrorRate: f64(0), ZeroDrops: true}
	good := Counts{Scheduled: 1000, Sent: 1000, OK: 1000}
	pass := judgedWindow(t, good, 50, 20, 0.1, 10)

	if v := Judge(reportOf(pass), gate); v.Status != StatusPass || len(v.Reasons) != 0 {
		t.Errorf("good window: %+v", v)
	}
	if v := Judge(reportOf(pass), nil); v.Status != StatusNone {
		t.Errorf("no case: %s", v.Status)
	}

	// Every limit broken at once: FAIL with every reason.
	bad := Counts{Scheduled: 1000, Sent: 990, Dropped: 10, DropReasons: map[string]int64{DropQueueFull: 10},
		OK: 800, Refused: 150, HTTPError: 20, TransportError: 20}
	fail := judgedWindow(t, bad, 250, 200, 0.1, 10)
	v := Judge(reportOf(pass, fail), gate)
	if v.Status != StatusFail {
		t.Fatalf("status %s, reasons %v", v.Status, v.Reasons)
	}
	all := strings.Join(v.Reasons, "\n")
	for _, want := range []string{"ok rate 80.0/s below the floor 90.0/s", "response time p99 250", "10 dropped", "refusal rate 15.0000%", "error rate 4.0000%", "window 0"} {
		if !strings.Contains(all, want) {
			t.Errorf("reasons lack %q:\n%s", want, all)
		}
	}
	if len(v.Windows) != 2 || v.Windows[0].Status != StatusPass || v.Windows[1].Status != StatusFail || len(v.Windows[1].Reasons) != 5 {
		t.Errorf("per-window verdicts %+v", v.Windows)
	}

	// Response time is judged, not request time: a queueing driver still
	// fails a budget the server alone would meet.
	queued := judgedWindow(t, good, 150, 10, 0.1, 10)
	if v := Judge(reportOf(queued), gate); v.Status != StatusFail {
		t.Errorf("response p99 over budget: %s", v.Status)
	}

	// The driver lagged: INVALID, whatever the server did.
	lagging := judgedWindow(t, good, 50, 20, 30, 10)
	if v := Judge(reportOf(lagging, fail), gate); v.Status != StatusInvalid || !strings.Contains(strings.Join(v.Reasons, " "), "schedule lag") {
		t.Errorf("lagging: %+v", v)
	}
	// Drops while the server answered within budget: the pool was too small.
	drops := Counts{Scheduled: 1000, Sent: 900, Dropped: 100, DropReasons: map[string]int64{DropQueueFull: 100}, OK: 900}
	if v := Judge(reportOf(judgedWindow(t, drops, 50, 20, 0.1, 10)), gate); v.Status != StatusInvalid {
		t.Errorf("driver drops: %+v", v)
	}
	// Drops while the server was slow are the server's: FAIL, not INVALID.
	if v := Judge(reportOf(judgedWindow(t, drops, 900, 800, 0.1, 10)), gate); v.Status != StatusFail {
		t.Errorf("server-caused drops: %+v", v)
	}
	// Interrupted runs are INVALID.
	r := reportOf(pass)
	r.Interrupted = true
	if v := Judge(r, gate); v.Status != StatusInvalid {
		t.Errorf("interrupted: %s", v.Status)
	}
	// A report without windows proves nothing.
	if v := Judge(reportOf(), gate); v.Status != StatusInvalid {
		t.Errorf("empty: %s", v.Status)
	}
}

func TestDriverLimits(t *testing.T) {
	w := judgedWindow(t, Counts{Scheduled: 10, Sent: 10, OK: 10}, 1, 1, 2, 1)
	if r := driverLimits(w, 500, 10, 0); len(r) != 0 {
		t.Errorf("lag 2 ms under 10 ms: %v", r)
	}
	if r := driverLimits(w, 500, 1, 0); len(r) != 1 || !strings.Contains(r[0], "schedule lag") {
		t.Errorf("lag 2 ms over 1 ms: %v", r)
	}
	w.Driver.CPUUtilization = 0.97
	if r := driverLimits(w, 500, 10, 0); len(r) != 1 || !strings.Contains(r[0], "CPU") {
		t.Errorf("cpu: %v", r)
	}
	if r := driverLimits(w, 500, 10, 1.5); len(r) != 0 {
		t.Errorf("cpu limit above 1 must disable the check: %v", r)
	}
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
