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
		fmt.Fprintf(w, "# HELP sluice_admission_rejected_total Attempts refused.\n# TYPE sluice_admission_rejected_total counter\n")
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
	Attribute(m, c)
	if m.RejectedTotal != 12 || m.Attributed != 11 || m.Unattributed != 3 {
		t.Errorf("total %v attributed %d unattributed %d; want 12, 11, 3", m.RejectedTotal, m.Attributed, m.Unattributed)
	}
}

func TestParseMetricsErrors(t *testing.T) {
	if s := ParseMetrics(strings.NewReader("this is { not prometheus\n")); s.err == nil {
		t.Error("bad exposition accepted")
	}
	s := ParseMetrics(strings.NewReader("sluice_admission_rejected_total{gate=\"g\",reason=\"r\"} 3\n"))
	if s.err != nil || s.rejected[rejKey{gate: "g", reason: "r"}] != 3 || s.cpu != nil {
		t.Errorf("untyped series: %+v", s)
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
