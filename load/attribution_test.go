package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/promtext/promtexttest"
)

// gatedServer refuses every third request through its "disk" gate (503
// with a sluice envelope, counted in sluice_admission_rejected_total),
// every third+1 with a 429 that no admission metric counts, and answers the
// rest. Its /metrics page is real Prometheus text exposition, including a
// CPU counter that grows 2 ms per answered request.
type gatedServer struct {
	mu       sync.Mutex
	n        int
	rejected float64 // starts non-zero: the window must report deltas
	quota    int
	ok       int
	cpu      float64
}

func (s *gatedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/metrics" {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP sluice_admission_rejected_total Attempts rejected.\n# TYPE sluice_admission_rejected_total counter\n")
		fmt.Fprintf(w, "sluice_admission_rejected_total{gate=\"disk\",kind=\"read\",reason=\"full\"} %g\n", s.rejected)
		fmt.Fprintf(w, "sluice_admission_rejected_total{gate=\"upstream\",kind=\"proxy\",reason=\"queue_full\"} 12\n")
		fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", s.cpu)
		fmt.Fprintf(w, "# TYPE go_goroutines gauge\ngo_goroutines 7\n")
		return
	}
	s.n++
	switch s.n % 3 {
	case 0:
		s.rejected++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"BUSY","gate":"disk","reason":"full"}`)
	case 1:
		s.quota++
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"RATE_LIMITED","gate":"quota","reason":"rate"}`)
	default:
		s.ok++
		s.cpu += 0.002
		io.WriteString(w, "ok")
	}
}

func TestAttributionFromPrometheusText(t *testing.T) {
	gs := &gatedServer{rejected: 40}
	srv := serve(t, gs.ServeHTTP)
	st, _ := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: srv.URL + "/work"}}, Shape: mustShape(t, 300, 300*time.Millisecond),
		Workers: 4, MetricsURL: srv.URL + "/metrics", Windows: 2,
	})
	for _, w := range st.Windows {
		m := w.Metrics
		if m == nil || m.Error != "" {
			t.Fatalf("window %d metrics %+v", w.Index, m)
		}
		disk := int64(0)
		for _, r := range w.Counts.Refusals {
			if r.Gate == "disk" {
				disk = r.Count
			}
		}
		if disk == 0 {
			t.Fatal("no disk refusals")
		}
		want := []Rejection{{Gate: "disk", Kind: "read", Reason: "full", Delta: float64(disk)}}
		if fmt.Sprint(m.Rejections) != fmt.Sprint(want) {
			t.Errorf("window %d rejections %+v, want %+v (the static upstream series has no delta)", w.Index, m.Rejections, want)
		}
		if m.Attributed != disk || m.Unattributed != w.Counts.Refused-disk || m.Unattributed == 0 {
			t.Errorf("window %d attributed %d unattributed %d; refused %d of which disk %d", w.Index, m.Attributed, m.Unattributed, w.Counts.Refused, disk)
		}
		if m.ServerCPUPerOKMillis == nil || *m.ServerCPUPerOKMillis < 1.99 || *m.ServerCPUPerOKMillis > 2.01 {
			t.Errorf("server CPU per ok %v ms, want 2", m.ServerCPUPerOKMillis)
		}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.rejected != 40+float64(st.Windows[0].Metrics.Attributed+st.Windows[1].Metrics.Attributed) {
		t.Errorf("server rejected %v in all", gs.rejected)
	}
}

func TestAttributeMatching(t *testing.T) {
	m := &Metrics{Rejections: []Rejection{
		{Gate: "disk", Kind: "read", Reason: "full", Delta: 5},
		{Gate: "disk", Kind: "stream", Reason: "full", Delta: 2},
		{Gate: "upstream", Kind: "proxy", Reason: "queue_full", Delta: 5},
	}}
	c := Counts{Refused: 14, Refusals: []Refusal{
		{Status: 503, Gate: "disk", Reason: "full", Count: 9},  // 7 match, 2 do not
		{Status: 503, Gate: "quota", Reason: "rate", Count: 1}, // nothing matches
		{Status: 503, Count: 4},                                // no envelope: 4 of the 5 upstream left over
	}}
	attributeRefusals(m, c)
	if m.RejectedTotal != 12 || m.Attributed != 11 || m.Unattributed != 3 {
		t.Errorf("total %v attributed %d unattributed %d; want 12, 11, 3", m.RejectedTotal, m.Attributed, m.Unattributed)
	}
}

func TestParseMetricsErrors(t *testing.T) {
	if s := parseMetrics(strings.NewReader("this is { not prometheus\n")); s.err == nil {
		t.Error("bad exposition accepted")
	}
	s := parseMetrics(strings.NewReader("sluice_admission_rejected_total{gate=\"g\",reason=\"r\"} 3\n"))
	if s.err != nil || s.rejected[rejKey{gate: "g", reason: "r"}] != 3 || s.cpu != nil {
		t.Errorf("untyped series: %+v", s)
	}
}

// TestParseMetricsFollowsTheRule: the scraper reads the shared table of
// the Prometheus text rule (internal/promtext) as doctor does: a NaN,
// infinite or negative sample, or a family of another type, marks the
// scrape as failed; the rest reads.
func TestParseMetricsFollowsTheRule(t *testing.T) {
	for _, f := range families {
		if f.Kind == 0 {
			t.Errorf("%s is read but internal/metricname does not list it", f.Name)
		}
	}
	for _, tc := range promtexttest.Cases() {
		s := parseMetrics(strings.NewReader(tc.Text))
		if tc.Error == "" && s.err != nil {
			t.Errorf("%s: %v, want it read", tc.Name, s.err)
		}
		if tc.Error != "" && (s.err == nil || !strings.Contains(s.err.Error(), tc.Error)) {
			t.Errorf("%s: scrape error %v, want one saying %q", tc.Name, s.err, tc.Error)
		}
	}
}

func TestMetricsScrapeFailureIsRecorded(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.Error(w, "nope", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	st, _ := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: srv.URL}}, Shape: mustShape(t, 50, 100*time.Millisecond), MetricsURL: srv.URL + "/metrics",
	})
	m := st.Windows[0].Metrics
	if m == nil || !strings.Contains(m.Error, "HTTP 500") || m.Unattributed != 5 || m.Attributed != 0 {
		t.Errorf("metrics %+v", m)
	}
}

// bookServer keeps a "db" gate's books the way promsluice exports them,
// refuses every 4th request at connection level (connlimit's busy reply,
// counted in sluice_connections_rejected_total), exports no process CPU
// counter, and, from request leakAt on, admits one request it never
// completes: that window's books must not close.
type bookServer struct {
	mu                  sync.Mutex
	n, leakAt           int
	admitted, completed float64
	inflight, hold      float64
	connRejected        float64
}

func (s *bookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/metrics" {
		fmt.Fprintf(w, "# TYPE sluice_admission_admitted_total counter\nsluice_admission_admitted_total{gate=\"db\",kind=\"default\"} %g\n", s.admitted)
		fmt.Fprintf(w, "# TYPE sluice_admission_completed_total counter\nsluice_admission_completed_total{gate=\"db\",kind=\"default\",outcome=\"ok\"} %g\n", s.completed)
		fmt.Fprintf(w, "# TYPE sluice_admission_inflight gauge\nsluice_admission_inflight{gate=\"db\"} %g\n", s.inflight)
		fmt.Fprintf(w, "# TYPE sluice_admission_waiting gauge\nsluice_admission_waiting{gate=\"db\"} 0\n")
		fmt.Fprintf(w, "# TYPE sluice_admission_capacity gauge\nsluice_admission_capacity{gate=\"db\"} 8\n")
		fmt.Fprintf(w, "# TYPE sluice_admission_hold_seconds histogram\nsluice_admission_hold_seconds_bucket{gate=\"db\",kind=\"default\",le=\"+Inf\"} %g\nsluice_admission_hold_seconds_sum{gate=\"db\",kind=\"default\"} %g\nsluice_admission_hold_seconds_count{gate=\"db\",kind=\"default\"} %g\n", s.completed, s.hold, s.completed)
		fmt.Fprintf(w, "# TYPE sluice_connections_rejected_total counter\nsluice_connections_rejected_total{reason=\"max_conns\"} %g\n", s.connRejected)
		return
	}
	s.n++
	if s.n%4 == 0 {
		s.connRejected++
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"BUSY","gate":"connections","reason":"max_conns"}`)
		return
	}
	s.admitted++
	if s.leakAt > 0 && s.n == s.leakAt {
		s.inflight++ // a slot taken and never given back
	} else {
		s.completed++
		s.hold += 0.010
	}
	io.WriteString(w, "ok")
}

func TestGateBooksOccupancyAndConnectionRefusals(t *testing.T) {
	bs := &bookServer{leakAt: 50}
	srv := serve(t, bs.ServeHTTP)
	r, err := Run(context.Background(), "load", Meta{}, []Config{{
		Targets: []Target{{URL: srv.URL + "/q"}}, Shape: mustShape(t, 200, 200*time.Millisecond),
		Workers: 4, MetricsURL: srv.URL + "/metrics", Windows: 2, MaxLag: time.Second, MaxCPU: 2,
	}})
	if err != nil {
		t.Fatal(err)
	}
	ws := r.Steps[0].Windows
	for _, w := range ws {
		m := w.Metrics
		if m == nil || m.Error != "" || w.Counts.Refused != 10 {
			t.Fatalf("window %d: metrics %+v, refused %d (want 10 of 40)", w.Index, m, w.Counts.Refused)
		}
		// Connection-level refusals are booked under connections/max_conns.
		if m.Attributed != w.Counts.Refused || m.Unattributed != 0 {
			t.Errorf("window %d: attributed %d unattributed %d of %d connection refusals", w.Index, m.Attributed, m.Unattributed, w.Counts.Refused)
		}
		if len(m.Gates) != 1 || m.Gates[0].Gate != "db" || m.Gates[0].Admitted != 30 {
			t.Fatalf("window %d gates %+v", w.Index, m.Gates)
		}
		g := m.Gates[0]
		if want := g.Completed * 0.010 / w.ElapsedS; !same(g.Occupancy, want) || g.Occupancy == 0 {
			t.Errorf("window %d occupancy %v, want completed × 10 ms / elapsed = %v", w.Index, g.Occupancy, want)
		}
		if g.Capacity == nil || *g.Capacity != 8 {
			t.Errorf("capacity %v", g.Capacity)
		}
		if m.ServerCPUSeconds != nil {
			t.Errorf("server CPU %v from a server that exports none", *m.ServerCPUSeconds)
		}
	}
	if !ws[0].Metrics.BooksClosed || !ws[0].Metrics.Gates[0].Closed {
		t.Errorf("window 0 books do not close: %+v", ws[0].Metrics.Gates)
	}
	g1 := ws[1].Metrics.Gates[0]
	if ws[1].Metrics.BooksClosed || g1.Closed || len(g1.Problems) != 2 ||
		!strings.Contains(g1.Problems[0], "inflight 1") || !strings.Contains(g1.Problems[1], "admitted 30 but completed 29") {
		t.Errorf("window 1 leaked a slot, yet: closed %v, problems %q", g1.Closed, g1.Problems)
	}
}
