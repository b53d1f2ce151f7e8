package load_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/load"
)

// A constant-rate timetable: arrival i is due at i/rate, whatever the
// server does.
func ExampleConstant() {
	s, _ := load.Constant(1000, 2*time.Second)
	fmt.Println(s.Count(), s.At(0), s.At(1), s.At(1999))
	// Output: 2000 0s 1ms 1.999s
}

// ParseEnvelope reads the gate and reason from a sluice refusal body.
func ExampleParseEnvelope() {
	e, ok := load.ParseEnvelope([]byte(`{"error":"BUSY","gate":"disk","reason":"full"}`))
	fmt.Println(ok, e.Gate, e.Reason)
	// Output: true disk full
}

// RunStep drives an open-loop step and returns reconciled counts.
func ExampleRunStep() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	shape, _ := load.Constant(100, 200*time.Millisecond)
	st, end, err := load.RunStep(context.Background(), load.Config{
		Targets: []load.Target{{URL: srv.URL}}, Shape: shape, Workers: 4,
	})
	c := st.Windows[0].Counts
	fmt.Println(end == load.EndDone, err, c.Scheduled, c.Sent, c.OK, c.Dropped, c.Reconcile())
	// Output: true <nil> 20 20 20 0 <nil>
}

// Judge applies a profile case to a report.
func ExampleJudge() {
	p, _ := load.ParseProfile([]byte(`{"cases":[{"name":"gate","qps_floor":50}]}`))
	c, _ := p.Case("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	shape, _ := load.Constant(100, 200*time.Millisecond)
	r, _ := load.Run(context.Background(), "load", load.Meta{}, []load.Config{{
		Targets: []load.Target{{URL: srv.URL}}, Shape: shape,
		MaxLag: time.Second, MaxCPU: 2, // generous driver limits: a shared test machine
	}})
	fmt.Println(load.Judge(r, &c).Status)
	// Output: PASS
}
