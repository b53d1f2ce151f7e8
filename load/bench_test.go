package load

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkWorkerRequest measures the driver's own cost per request: one
// worker sending to a local keep-alive server and recording the outcome
// (the server's cost is in the figure too; compare runs, not absolutes).
func BenchmarkWorkerRequest(b *testing.B) {
	srv := serve(b, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg, err := (&Config{Targets: []Target{{URL: srv.URL}}, Shape: mustShape(b, 1, time.Second)}).withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	e := &engine{cfg: cfg, base: time.Now()}
	rt, closeRT := cfg.transport()
	defer closeRT()
	e.rt = rt
	wk := e.newWorker(context.Background(), 0)
	w := newWinRec(0, 1, time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		wk.do(arrival{sched: time.Since(e.base), win: w}, w.stripes[0])
	}
	if w.stripes[0].c.OK == 0 {
		b.Fatal("no request succeeded")
	}
}

// BenchmarkRefusalEnvelope is the refusal path's parse: cached after the
// first body, so a flood of identical 503s costs a byte comparison each.
func BenchmarkRefusalEnvelope(b *testing.B) {
	wk := &worker{}
	body := []byte(`{"error":"BUSY","gate":"disk","reason":"full"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := wk.envelope(body); !ok {
			b.Fatal("not parsed")
		}
	}
}

// BenchmarkShapeAt is the pacer's per-arrival timetable cost.
func BenchmarkShapeAt(b *testing.B) {
	s, _ := Stepped([]float64{1000, 2000, 3000, 4000}, 4*time.Second)
	n := s.Count()
	var i int64
	b.ReportAllocs()
	for b.Loop() {
		_ = s.At(i % n)
		i++
	}
}
