package render

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/load"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gated refuses every third request through a "disk" gate (a sluice
// envelope) and every third+1 with a 429 from "quota"; its /metrics counts
// the disk rejections and a CPU counter, so attribution and server CPU show.
type gated struct {
	mu            sync.Mutex
	n             int
	rejected, cpu float64
	noCPU         bool
}

func (s *gated) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/metrics" {
		fmt.Fprintf(w, "# TYPE sluice_admission_rejected_total counter\nsluice_admission_rejected_total{gate=\"disk\",kind=\"read\",reason=\"full\"} %g\n", s.rejected)
		if !s.noCPU {
			fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", s.cpu)
		}
		return
	}
	s.n++
	switch s.n % 3 {
	case 0:
		s.rejected++
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"BUSY","gate":"disk","reason":"full"}`)
	case 1:
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"RATE_LIMITED","gate":"quota","reason":"rate"}`)
	default:
		s.cpu += 0.002
		io.WriteString(w, "ok")
	}
}

// run drives a short stepped load (two windows, two steps each) at a real
// server and returns the report. It runs on the real clock for about a
// second, so every test that draws from one takes that long: the report
// must come from a real run, scrapes and all.
func run(t *testing.T, s *gated, kind string, steps ...load.Config) *load.Report {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if len(steps) == 0 {
		sh, err := load.Stepped([]float64{100, 300}, 400*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		steps = []load.Config{{Shape: sh, Windows: 2}}
	}
	for i := range steps {
		steps[i].Targets = []load.Target{{URL: srv.URL + "/x"}}
		steps[i].MetricsURL = srv.URL + "/metrics"
		steps[i].Workers, steps[i].MaxLag, steps[i].MaxCPU = 4, time.Second, 2
	}
	p, err := load.ParseProfile([]byte(`{"name":"p","cases":[{"name":"c","qps_floor":1,"max_refusal_rate":0.8}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := load.Run(context.Background(), kind, load.Meta{Command: []string{"sluice", kind}, Profile: &load.ProfileRef{Path: "p.json", Case: "c", Profile: p}}, steps)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Over a second: it draws a real run (see run).
func TestTextLeadsWithOKLatencyAndNamesWaits(t *testing.T) {
	r := run(t, &gated{}, "load")
	var b bytes.Buffer
	Text(&b, r)
	out := b.String()
	for _, want := range []string{load.SchemaV1, "steps=100,300", "ok p50", "ok p99", "all p50", "all p99", "exchange p99", "sched wait p99",
		"pacer lag p99", "by disk/full (503)", "by quota/rate (429)", "attributed", "server CPU 2.000 ms per ok", "verdict: PASS (case c)",
		"window 0 by step:", "window 1 by step:"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// ok latency comes before all-answer latency in the header.
	head := out[strings.Index(out, "win  "):]
	if strings.Index(head, "ok p99") > strings.Index(head, "all p50") || strings.Contains(head, "wait p99  ") && !strings.Contains(head, "sched wait p99") {
		t.Errorf("header order:\n%s", head[:strings.Index(head, "\n")])
	}
	// Two step rows per window, each with its own rate.
	if n := strings.Count(out, "\n       100 ") + strings.Count(out, "\n       300 "); n < 2 {
		t.Logf("summary:\n%s", out)
	}
	b.Reset()
	CliffTable(&b, r)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.Contains(lines[0], "refused %") || !strings.Contains(lines[0], "ok p99") || len(lines) < 3 {
		t.Errorf("cliff table:\n%s", b.String())
	}
}

// Over a second: it draws a real run (see run).
func TestTextSaysWhatTheMetricsLack(t *testing.T) {
	r := run(t, &gated{noCPU: true}, "load")
	var b bytes.Buffer
	Text(&b, r)
	if !strings.Contains(b.String(), "server CPU: not exported") {
		t.Errorf("a server without a CPU counter goes unmentioned:\n%s", b.String())
	}
	// Books that do not close and connection refusals, as the engine
	// records them.
	one, eight := 1.0, 8.0
	w := &r.Steps[0].Windows[0]
	w.Metrics.Gates = []load.GateBalance{{Gate: "db", Admitted: 30, Completed: 29, Inflight: &one, Capacity: &eight, Occupancy: 2.5,
		Problems: []string{"inflight 1 after the drain, want 0", "admitted 30 but completed 29 in the window"}}}
	w.Counts.Refusals = append(w.Counts.Refusals, load.Refusal{Status: 503, Gate: "connections", Reason: "max_conns", Count: 4})
	b.Reset()
	Text(&b, r)
	for _, want := range []string{"gate db occupancy 2.50 slots of 8, BOOKS DO NOT CLOSE: inflight 1 after the drain", "refused 4 by connections/max_conns (503)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSweepCliffTableAndHTML(t *testing.T) {
	var steps []load.Config
	for _, c := range []int{1, 2, 4} {
		steps = append(steps, load.Config{Concurrency: c, Duration: 100 * time.Millisecond})
	}
	r := run(t, &gated{}, "sweep", steps...)
	if len(r.Steps) != 3 || r.Steps[2].Label != "c=4" {
		t.Fatalf("steps %d", len(r.Steps))
	}
	var b bytes.Buffer
	CliffTable(&b, r)
	for _, want := range []string{"c=1", "c=2", "c=4", "%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("cliff table lacks %q:\n%s", want, b.String())
		}
	}
	page := string(HTML([]*load.Report{r, r}, []string{"a.json", "b<script>.json"}))
	for _, want := range []string{"<svg", "stroke-dasharray", "b&lt;script&gt;.json"} {
		if !strings.Contains(page, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "src=") || strings.Contains(page, "href=\"http") || strings.Contains(page, "@import") {
		t.Error("html is not self-contained or not escaped")
	}
}

func TestProgressLine(t *testing.T) {
	s := ProgressLine(load.Progress{Step: 1, Window: 2, Elapsed: 3 * time.Second, Sent: 10, OK: 7, Refused: 2, Dropped: 1, Rate: 9.5, P99: 1500 * time.Microsecond})
	for _, want := range []string{"step 1", "window 2", "sent 10", "ok 7", "refused 2", "dropped 1", "10 req/s", "p99 1.5ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

// FuzzRender: whatever load.ParseReport accepts can be drawn, as text and
// as HTML, without a panic, and the page stays free of markup injected from
// the report.
func FuzzRender(f *testing.F) {
	f.Add([]byte(`{"schema":"sluice/load-report/v1","kind":"load","steps":[],"verdict":{"status":"NONE"}}`))
	f.Add([]byte(`{"schema":"sluice/load-report/v1","kind":"load","host":{"hostname":"<img src=x>"},"steps":[{"label":"<marquee>","mode":"open","windows":[]}],"verdict":{"status":"NONE"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := load.ParseReport(data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		Text(&b, r)
		page := HTML([]*load.Report{r, r}, []string{"a", "b"})
		if bytes.Contains(page, []byte("<img")) || bytes.Contains(page, []byte("<marquee")) {
			t.Fatal("report text reached the page unescaped")
		}
	})
}

// TestHTMLTimeSeriesAlignOnElapsedTime: two runs of different shapes are
// laid out by elapsed time since each run started, not by window number: a
// window that started 2 s into its run is drawn from x = 2 s, and the gap
// between windows breaks the line.
func TestHTMLTimeSeriesAlignOnElapsedTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(ok, refused, dropped int64, p99 float64) load.Second {
		return load.Second{Scheduled: ok + refused + dropped, OK: ok, Refused: refused, Dropped: dropped, ResponseP99: p99, OKResponseP99: p99, ResponseP50: p99 / 2}
	}
	a := &load.Report{Started: t0, Steps: []load.Step{{Label: "a", Windows: []load.Window{
		{Index: 0, Started: t0, DurationS: 2, Timeline: []load.Second{sec(10, 0, 0, 5), sec(10, 3, 0, 6)}},
		{Index: 1, Started: t0.Add(3 * time.Second), DurationS: 2, Timeline: []load.Second{sec(10, 0, 4, 7), sec(0, 9, 0, 8)}},
	}}}}
	b := &load.Report{Started: t0.Add(time.Hour), Steps: []load.Step{{Label: "b", Windows: []load.Window{
		{Index: 0, Started: t0.Add(time.Hour + 2*time.Second), DurationS: 1, Timeline: []load.Second{sec(20, 0, 0, 9)}},
	}}}}
	tl := timelineOf(a)
	var xs []float64
	for _, p := range tl.points {
		if !p.gap {
			xs = append(xs, p.x)
		}
	}
	if fmt.Sprint(xs) != "[0.5 1.5 3.5 4.5]" || len(tl.points) != 5 || !tl.points[2].gap || tl.end != 5 {
		t.Errorf("A laid out at %v (%d points, end %v), want 0.5 1.5 | 3.5 4.5", xs, len(tl.points), tl.end)
	}
	if tb := timelineOf(b); len(tb.points) != 1 || tb.points[0].x != 2.5 {
		t.Errorf("B laid out at %+v, want x = 2.5 (2 s into its own run)", tb.points)
	}
	page := string(HTML([]*load.Report{a, b}, []string{"a", "b"}))
	for _, want := range []string{"Answers per second", "Response time", "schedule lag", "A refused", "A dropped (driver)", "B ok", "elapsed since the run started", `stroke="#d62728"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// A's second window has no ok answer in its last second: the ok p99
	// line breaks there instead of dropping to 0 ms.
	if n := strings.Count(page, "<svg"); n != 3 {
		t.Errorf("%d charts, want 3", n)
	}
	if strings.Contains(page, "NaN") || strings.Contains(page, "Inf") {
		t.Error("a NaN or Inf reached the SVG")
	}
}

// TestTextExplainsEveryCountAndTheDrops: the summary has a legend line for
// every count it prints, and a window that dropped arrivals says so in its
// driver column and says whose doing the drops were.
func TestTextExplainsEveryCountAndTheDrops(t *testing.T) {
	window := func(dropped, canceled int64, reqP99 float64) load.Window {
		sent := 600 - dropped - canceled
		return load.Window{
			Counts: load.Counts{Scheduled: 600, Sent: sent, Dropped: dropped + canceled, OK: sent,
				DropReasons: map[string]int64{load.DropQueueFull: dropped, load.DropCanceled: canceled}},
			Latency: load.Latency{RequestTime: load.Dist{Count: sent, P99: reqP99}},
		}
	}
	report := func(w load.Window) string {
		r := &load.Report{Steps: []load.Step{{Label: "rate=600", Mode: "open", Workers: 64, QueueDepth: 64,
			Settings: load.Settings{P99BudgetMS: 500}, Windows: []load.Window{w}}}}
		var b bytes.Buffer
		Text(&b, r)
		return b.String()
	}
	clean := report(window(0, 0, 20))
	for _, count := range []string{"sched:", "sent:", "ok:", "refused:", "http_err:", "transp_err:", "unfin:", "dropped:", "driver:"} {
		n := 0
		for _, l := range strings.Split(clean, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), count) || strings.Contains(l, "; "+count) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d legend lines explain %q, want one:\n%s", n, count, clean)
		}
	}
	if strings.Contains(clean, "ok, drops\n") || strings.Contains(clean, "dropped 0") {
		t.Errorf("a window without drops mentions them:\n%s", clean)
	}

	slow := report(window(404, 0, 2300))
	for _, want := range []string{"ok, drops\n", "dropped 404 of 600 arrivals (67.3%) because its queue of 64 in front of 64 workers was full: the server was slow (request time p99 2.30s, over the 500.0ms budget)", "the server's doing"} {
		if !strings.Contains(slow, want) {
			t.Errorf("server-caused drops: summary lacks %q:\n%s", want, slow)
		}
	}
	fast := report(window(404, 0, 20))
	if !strings.Contains(fast, "too few workers") || strings.Contains(fast, "the server's doing") {
		t.Errorf("drops while the server was fast are the driver's:\n%s", fast)
	}
	stopped := report(window(0, 7, 20))
	if !strings.Contains(stopped, "dropped 7 arrivals still queued when the run stopped") || !strings.Contains(stopped, "ok, drops\n") {
		t.Errorf("drops at a stop:\n%s", stopped)
	}
}

// TestHTMLHeaderNamesOnlyWhatTheReportRecords: a report written by the
// driver as a library has no tool module or version; the header leaves
// them out instead of printing empty fields.
func TestHTMLHeaderNamesOnlyWhatTheReportRecords(t *testing.T) {
	r := &load.Report{Kind: "load", Host: load.Host{Hostname: "vm", CPUs: 2}, Verdict: load.Verdict{Status: load.StatusNone}}
	page := string(HTML([]*load.Report{r}, []string{"no-gate cached"}))
	if !strings.Contains(page, "load, host vm (2 cpus), started") || strings.Contains(page, ", ,") || strings.Contains(page, ",  ,") {
		t.Errorf("header with empty fields: %s", page[strings.Index(page, "<p>"):strings.Index(page, "</p>")])
	}
	r.Tool = load.Tool{Module: "github.com/sluicehq/sluice", Version: "v1.2.3"}
	if page := string(HTML([]*load.Report{r}, []string{"x"})); !strings.Contains(page, "load, github.com/sluicehq/sluice v1.2.3, host vm") {
		t.Error("the tool is not named when the report records it")
	}
}
