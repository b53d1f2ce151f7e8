package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/promtext/promtexttest"
)

func TestParseMetricsReadsGates(t *testing.T) {
	text := `# TYPE sluice_admission_offered_total counter
sluice_admission_offered_total{gate="disk",kind="hot"} 70
sluice_admission_offered_total{gate="disk",kind="cold"} 30
# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="disk",kind="cold",reason="full"} 12
sluice_admission_rejected_total{gate="disk",kind="cold",reason="queue_full"} 3
sluice_admission_rejected_total{gate="disk",kind="hot",reason="full"} 1
# TYPE sluice_admission_inflight gauge
sluice_admission_inflight{gate="disk"} 4
# TYPE sluice_admission_hold_seconds histogram
sluice_admission_hold_seconds_bucket{gate="disk",kind="hot",le="+Inf"} 10
sluice_admission_hold_seconds_sum{gate="disk",kind="hot"} 0.5
sluice_admission_hold_seconds_count{gate="disk",kind="hot"} 10
sluice_admission_hold_seconds_bucket{gate="disk",kind="cold",le="+Inf"} 5
sluice_admission_hold_seconds_sum{gate="disk",kind="cold"} 1.5
sluice_admission_hold_seconds_count{gate="disk",kind="cold"} 5
# TYPE sluice_retry_attempts_total counter
sluice_retry_attempts_total{target="a"} 9
# TYPE go_goroutines gauge
go_goroutines 12
`
	r, err := ParseMetrics(strings.NewReader(text), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	g := r.Gates["disk"]
	if g == nil || g.Offered != 100 || g.Rejected != 16 || g.Inflight != 4 || g.HoldSum != 2 || g.HoldCount != 15 {
		t.Fatalf("disk %+v", g)
	}
	if len(g.Slices) != 3 || g.Slices[0] != (Slice{Kind: "cold", Reason: "full", Offered: 30, Rejected: 12}) {
		t.Errorf("slices %+v", g.Slices)
	}
	if r.Retries[`target="a"`].Attempts != 9 || !r.Families[MetricOffered] || r.Families[MetricCompleted] {
		t.Errorf("retries %+v families %v", r.Retries, r.Families)
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	for _, text := range []string{
		"sluice_admission_offered_total{gate=\"disk\" 1\n",
		"# TYPE sluice_admission_inflight gauge\nsluice_admission_inflight{gate=\"disk\"} NaN\n",
		"# TYPE sluice_admission_waiting gauge\nsluice_admission_waiting{gate=\"disk\"} -3\n",
	} {
		if _, err := ParseMetrics(strings.NewReader(text), time.Time{}); !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: err %v, want ErrBadInput", text, err)
		}
	}
	for _, text := range []string{"", "{", `{"gates":[{"gate":"x","offered":"many"}]}`} {
		if _, err := ParseState(strings.NewReader(text)); !errors.Is(err, ErrBadInput) {
			t.Errorf("state %q: err %v, want ErrBadInput", text, err)
		}
	}
	for _, text := range []string{"", "not a dump\n", "goroutine x [running]:\n", "goroutine 1 running:\n"} {
		if _, err := ParseGoroutines(strings.NewReader(text)); !errors.Is(err, ErrBadInput) {
			t.Errorf("goroutines %q: err %v, want ErrBadInput", text, err)
		}
	}
}

// TestParseMetricsFollowsTheRule: doctor reads the shared table of the
// Prometheus text rule (internal/promtext) as `sluice load --metrics`
// does: a NaN, infinite or negative sample, or a family of another type,
// is ErrBadInput naming what is wrong; the rest reads.
func TestParseMetricsFollowsTheRule(t *testing.T) {
	for _, f := range families {
		if f.Kind == 0 {
			t.Errorf("%s is read but internal/metricname does not list it", f.Name)
		}
	}
	for _, tc := range promtexttest.Cases() {
		_, err := ParseMetrics(strings.NewReader(tc.Text), time.Time{})
		if tc.Error == "" && err != nil {
			t.Errorf("%s: %v, want it read", tc.Name, err)
		}
		if tc.Error != "" && (!errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.Error)) {
			t.Errorf("%s: error %v, want ErrBadInput saying %q", tc.Name, err, tc.Error)
		}
	}
}

func TestParseGoroutinesClassifies(t *testing.T) {
	dump := `goroutine 1 [IO wait, 12 minutes]:
internal/poll.(*pollDesc).wait(0xc000, 0x72, 0x0)
	/usr/lib/go/src/internal/poll/fd_poll_runtime.go:84 +0x27
internal/poll.(*FD).Read(0xc000100000, {0xc000, 0x1000, 0x1000})
	/usr/lib/go/src/internal/poll/fd_unix.go:165 +0x27a
net.(*conn).Read(0xc00000e028, {0xc000, 0x1000, 0x1000})
	/usr/lib/go/src/net/net.go:196 +0x45
net/http.(*connReader).backgroundRead(0xc000)
	/usr/lib/go/src/net/http/server.go:690 +0x37
created by net/http.(*connReader).startBackgroundRead in goroutine 7
	/usr/lib/go/src/net/http/server.go:686 +0xb6

goroutine 2 [sync.Mutex.Lock]:
sync.runtime_SemacquireMutex(0x0?, 0x0?, 0x0?)
	/usr/lib/go/src/runtime/sema.go:95 +0x25
sync.(*Mutex).Lock(...)
	/usr/lib/go/src/sync/mutex.go:81
example.com/app.(*Cache).Get(0xc000, {0x1, 0x2})
	/src/app/cache.go:10 +0x1

goroutine 3 [select]:
github.com/sluicehq/sluice/admit.(*Gate).wait(0xc000, {0x1, 0x2}, 0x0, 0x1)
	/src/sluice/admit/queue.go:80 +0x1
github.com/sluicehq/sluice/admit.(*Gate).AcquireN(0xc000, {0x1, 0x2}, 0x0, 0x1)
	/src/sluice/admit/gate.go:320 +0x1

goroutine 4 [IO wait]:
internal/poll.(*FD).Accept(0xc000)
	/usr/lib/go/src/internal/poll/fd_unix.go:620 +0x295
net.(*TCPListener).Accept(0xc000)
	/usr/lib/go/src/net/tcpsock.go:380 +0x30

goroutine 5 [sleep]:
time.Sleep(0x3b9aca00)
	/usr/lib/go/src/runtime/time.go:338 +0x167
main.main()
	/src/app/main.go:5 +0x1
`
	s, err := ParseGoroutines(strings.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		WhereNetworkRead: "net/http.(*connReader).backgroundRead", WhereLock: "example.com/app.(*Cache).Get",
		WhereGateQueue: "github.com/sluicehq/sluice/admit.(*Gate).wait", WhereNetworkAccept: "internal/poll.(*FD).Accept",
		WhereSleep: "main.main",
	}
	if s.Total != 5 || len(s.Groups) != len(want) {
		t.Fatalf("summary %+v", s)
	}
	for _, g := range s.Groups {
		if g.Count != 1 || len(g.Sites) != 1 || g.Sites[0].Function != want[g.Where] {
			t.Errorf("group %+v, want site %q", g, want[g.Where])
		}
		if g.Where == WhereNetworkRead && g.LongestMinutes != 12 {
			t.Errorf("network read waited %d minutes, want 12", g.LongestMinutes)
		}
	}
}

// A diagnosis never fails and never invents rates from a zero interval.
func TestDiagnoseZeroInterval(t *testing.T) {
	before, after, _ := loadCase(t, "healthy")
	after.At = before.At
	d := Diagnose(before, after, nil)
	if len(d.Findings) != 1 || d.Findings[0].Code != CodeCounterReset || len(d.Gates) != 0 {
		t.Errorf("zero interval: %+v", d)
	}
}

func TestNoMetricsAtAll(t *testing.T) {
	r, err := ParseMetrics(strings.NewReader("# TYPE go_goroutines gauge\ngo_goroutines 3\n"), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	r2 := *r
	r2.At = time.Unix(1, 0)
	d := Diagnose(r, &r2, nil)
	if len(d.Findings) != 1 || d.Findings[0].Code != CodeCounterMissing || !strings.Contains(d.Findings[0].Seen, "no sluice admission metrics") {
		t.Errorf("findings %+v", d.Findings)
	}
}

func seeds(f interface{ Add(...any) }, name string) {
	matches, _ := filepath.Glob(filepath.Join("testdata", "*", name))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
}

// FuzzParseMetrics: any scrape is parsed or refused with ErrBadInput, and
// a parsed pair diagnoses without a panic or a non-finite figure.
func FuzzParseMetrics(f *testing.F) {
	seeds(f, "after.prom")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseMetrics(strings.NewReader(string(data)), time.Unix(0, 0))
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("err %v does not wrap ErrBadInput", err)
			}
			return
		}
		empty := &Reading{At: time.Unix(-1, 0)}
		for _, d := range []*Diagnosis{Diagnose(empty, r, nil), Diagnose(r, r, nil)} {
			var b strings.Builder
			if err := d.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			// --json must always work: no NaN or infinite figure.
			if _, err := json.Marshal(d); err != nil {
				t.Fatalf("diagnosis does not marshal: %v", err)
			}
		}
	})
}

func FuzzParseState(f *testing.F) {
	seeds(f, "state_after.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseState(strings.NewReader(string(data))); err != nil && !errors.Is(err, ErrBadInput) {
			t.Fatalf("err %v does not wrap ErrBadInput", err)
		}
	})
}

func FuzzParseGoroutines(f *testing.F) {
	seeds(f, "goroutines.txt")
	f.Add([]byte("goroutine 1 [running]:\nmain.main()\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseGoroutines(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("err %v does not wrap ErrBadInput", err)
			}
			return
		}
		n := 0
		for _, g := range s.Groups {
			n += g.Count
		}
		if n != s.Total {
			t.Fatalf("groups hold %d goroutines, total %d", n, s.Total)
		}
	})
}

// Refusals that follow the traffic are not concentrated: a kind with 90 %
// of the arrivals and 90 % of the refusals is no hotspot.
func TestRefusalsProportionalToTraffic(t *testing.T) {
	scrape := func(hot, cold, hotRej, coldRej float64, at time.Time) *Reading {
		text := fmt.Sprintf(`# TYPE sluice_admission_offered_total counter
sluice_admission_offered_total{gate="disk",kind="hot"} %[1]v
sluice_admission_offered_total{gate="disk",kind="cold"} %[2]v
# TYPE sluice_admission_admitted_total counter
sluice_admission_admitted_total{gate="disk",kind="hot"} %[5]v
sluice_admission_admitted_total{gate="disk",kind="cold"} %[6]v
# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="disk",kind="hot",reason="full"} %[3]v
sluice_admission_rejected_total{gate="disk",kind="cold",reason="full"} %[4]v
# TYPE sluice_admission_completed_total counter
sluice_admission_completed_total{gate="disk",kind="hot",outcome="ok"} %[5]v
sluice_admission_completed_total{gate="disk",kind="cold",outcome="ok"} %[6]v
# TYPE sluice_admission_inflight gauge
sluice_admission_inflight{gate="disk"} 0
# TYPE sluice_admission_waiting gauge
sluice_admission_waiting{gate="disk"} 0
# TYPE sluice_admission_capacity gauge
sluice_admission_capacity{gate="disk"} 4
`, hot, cold, hotRej, coldRej, hot-hotRej, cold-coldRej)
		r, err := ParseMetrics(strings.NewReader(text), at)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t0 := time.Unix(0, 0)
	proportional := Diagnose(scrape(0, 0, 0, 0, t0), scrape(900, 100, 450, 50, t0.Add(time.Second)), nil)
	for _, f := range proportional.Findings {
		if f.Code == CodeRefusalsConcentrated {
			t.Errorf("proportional refusals reported: %s", f.Seen)
		}
	}
	skewed := Diagnose(scrape(0, 0, 0, 0, t0), scrape(500, 500, 10, 400, t0.Add(time.Second)), nil)
	found := false
	for _, f := range skewed.Findings {
		if f.Code == CodeRefusalsConcentrated {
			found = true
			if f.Gate != "disk" || !strings.Contains(f.Seen, "kind cold") || f.Figures["refused_share"] < 0.97 || f.Figures["offered_share"] != 0.5 {
				t.Errorf("finding %+v", f)
			}
		}
	}
	if !found {
		t.Errorf("skewed refusals not reported: %+v", skewed.Findings)
	}
}

// A gate that times one permit in eight (admit.Config.SampleEvery) has a
// hold histogram with an eighth of the completions: Little's law must use
// the mean hold and the completion counter, not the histogram's sum.
func TestLittleWithSampledHolds(t *testing.T) {
	scrape := func(completed, holdCount, holdSum float64, at time.Time) *Reading {
		text := fmt.Sprintf(`# TYPE sluice_admission_offered_total counter
sluice_admission_offered_total{gate="disk",kind="read"} %[1]v
# TYPE sluice_admission_admitted_total counter
sluice_admission_admitted_total{gate="disk",kind="read"} %[1]v
# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="disk",kind="read",reason="full"} 0
# TYPE sluice_admission_completed_total counter
sluice_admission_completed_total{gate="disk",kind="read",outcome="ok"} %[2]v
# TYPE sluice_admission_inflight gauge
sluice_admission_inflight{gate="disk"} 8
# TYPE sluice_admission_waiting gauge
sluice_admission_waiting{gate="disk"} 0
# TYPE sluice_admission_capacity gauge
sluice_admission_capacity{gate="disk"} 16
# TYPE sluice_admission_hold_seconds histogram
sluice_admission_hold_seconds_bucket{gate="disk",kind="read",le="+Inf"} %[3]v
sluice_admission_hold_seconds_sum{gate="disk",kind="read"} %[4]v
sluice_admission_hold_seconds_count{gate="disk",kind="read"} %[3]v
`, completed+8, completed, holdCount, holdSum)
		r, err := ParseMetrics(strings.NewReader(text), at)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t0 := time.Unix(0, 0)
	// 800 completions a second of 10 ms each keep 8 slots busy; only 100
	// of them were timed.
	d := Diagnose(scrape(0, 0, 0, t0), scrape(800, 100, 1.0, t0.Add(time.Second)), nil)
	for _, f := range d.Findings {
		if f.Code == CodeLittleMismatch {
			t.Errorf("sampled holds read as a leak: %s", f.Seen)
		}
	}
	// The same scrape with a tenth of the completions does not add up.
	d = Diagnose(scrape(0, 0, 0, t0), scrape(80, 10, 0.1, t0.Add(time.Second)), nil)
	if len(d.Findings) != 1 || d.Findings[0].Code != CodeLittleMismatch {
		t.Errorf("findings %+v, want littles_law_mismatch", d.Findings)
	}
}
