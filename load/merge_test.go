package load

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func shortRun(t *testing.T, url string, rate float64) *Report {
	t.Helper()
	r, err := Run(context.Background(), "load", Meta{Command: []string{"sluice", "load"}}, []Config{{
		Targets: []Target{{URL: url}}, Shape: mustShape(t, rate, 200*time.Millisecond), Workers: 4, Windows: 2,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// About 2 s: two real runs (shortRun) to merge.
func TestMergeIsExact(t *testing.T) {
	cs := &classServer{}
	srv := serve(t, cs.ServeHTTP)
	a, b := shortRun(t, srv.URL, 300), shortRun(t, srv.URL, 150)
	m, err := Merge(Meta{Command: []string{"sluice", "report", "merge"}}, []*Report{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(m); err != nil {
		t.Fatalf("merged report invalid: %v", err)
	}
	if m.Kind != "merge" || len(m.Steps) != 1 || len(m.Steps[0].Windows) != 2 || m.Steps[0].Label != "rate=300+rate=150" || m.Steps[0].Rate != 450 {
		t.Fatalf("merged shape: kind %s, %d steps", m.Kind, len(m.Steps))
	}
	for wi := range 2 {
		wa, wb, wm := a.Steps[0].Windows[wi], b.Steps[0].Windows[wi], m.Steps[0].Windows[wi]
		ca, cb, cm := wa.Counts, wb.Counts, wm.Counts
		if cm.Scheduled != ca.Scheduled+cb.Scheduled || cm.OK != ca.OK+cb.OK || cm.Refused != ca.Refused+cb.Refused ||
			cm.HTTPError != ca.HTTPError+cb.HTTPError || cm.TransportError != ca.TransportError+cb.TransportError ||
			cm.Status["200"] != ca.Status["200"]+cb.Status["200"] {
			t.Errorf("window %d counts %+v != %+v + %+v", wi, cm, ca, cb)
		}
		if cm.Scheduled != 90 {
			t.Errorf("window %d scheduled %d, want 60+30", wi, cm.Scheduled)
		}
		pairs := [][3]Dist{
			{wa.Latency.ResponseTime, wb.Latency.ResponseTime, wm.Latency.ResponseTime},
			{wa.Latency.RequestTime, wb.Latency.RequestTime, wm.Latency.RequestTime},
			{wa.Latency.ScheduleWait, wb.Latency.ScheduleWait, wm.Latency.ScheduleWait},
			{wa.Latency.OKResponseTime, wb.Latency.OKResponseTime, wm.Latency.OKResponseTime},
			{wa.Driver.ScheduleLag, wb.Driver.ScheduleLag, wm.Driver.ScheduleLag},
		}
		for i, p := range pairs {
			ha, _ := histOf(p[0])
			hb, _ := histOf(p[1])
			hm, err := histOf(p[2])
			if err != nil {
				t.Fatal(err)
			}
			ha.Merge(hb)
			if !ha.Equals(hm) {
				t.Errorf("window %d dist %d: merged histogram differs from the union", wi, i)
			}
			want := distOf(ha)
			if p[2].P99 != want.P99 || p[2].P50 != want.P50 || p[2].Max != want.Max || p[2].Count != p[0].Count+p[1].Count {
				t.Errorf("window %d dist %d: %+v, want %+v", wi, i, p[2], want)
			}
		}
		if wm.Rates.Offered != wa.Rates.Offered+wb.Rates.Offered {
			t.Errorf("offered rate %v != %v + %v", wm.Rates.Offered, wa.Rates.Offered, wb.Rates.Offered)
		}
	}
	// Merging is associative in its counts: (a+b)+a == a+(b+a).
	m2, err := Merge(Meta{}, []*Report{m, a})
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.Steps[0].Windows[0].Counts.Sent; got != 2*a.Steps[0].Windows[0].Counts.Sent+b.Steps[0].Windows[0].Counts.Sent {
		t.Errorf("sent after a second merge %d", got)
	}
}

// Over a second: real runs of different shapes to merge.
func TestMergeRefusesMismatches(t *testing.T) {
	srv := serve(t, (&classServer{}).ServeHTTP)
	a := shortRun(t, srv.URL, 100)
	b, err := Run(context.Background(), "load", Meta{}, []Config{{
		Targets: []Target{{URL: srv.URL}}, Concurrency: 1, Duration: 100 * time.Millisecond, Windows: 2,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(Meta{}, []*Report{a, b}); !errors.Is(err, ErrMerge) {
		t.Errorf("open and closed loop merged: %v", err)
	}
	if _, err := Merge(Meta{}, []*Report{a}); !errors.Is(err, ErrMerge) {
		t.Errorf("one report merged: %v", err)
	}
	c := *a
	c.Steps = append([]Step{}, a.Steps...)
	c.Steps[0].Windows = c.Steps[0].Windows[:1]
	if _, err := Merge(Meta{}, []*Report{a, &c}); !errors.Is(err, ErrMerge) {
		t.Errorf("different window counts merged: %v", err)
	}
}

// TestMergeRefusesDuplicateInputs: the same run twice, whether the same
// pointer or a copy read back from its file, would double every count.
// About 2 s: real runs (shortRun) to merge.
func TestMergeRefusesDuplicateInputs(t *testing.T) {
	srv := serve(t, (&classServer{}).ServeHTTP)
	a := shortRun(t, srv.URL, 100)
	b, _ := marshalReport(a)
	again, err := ParseReport(b)
	if err != nil {
		t.Fatal(err)
	}
	for name, rs := range map[string][]*Report{"same": {a, a}, "copy": {a, again}} {
		_, err := Merge(Meta{}, rs)
		if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "same run") {
			t.Errorf("%s: err %v, want ErrMerge naming the duplicate", name, err)
		}
	}
	other := shortRun(t, srv.URL, 100)
	if _, err := Merge(Meta{}, []*Report{a, other, again}); !errors.Is(err, ErrMerge) {
		t.Errorf("duplicate among three merged: %v", err)
	}
	if _, err := Merge(Meta{}, []*Report{a, other}); err != nil {
		t.Errorf("two distinct runs refused: %v", err)
	}
}
