package load

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkWorkerRequest measures the driver's own cost per request: one
// worker sending to a local keep-alive server and recording the outcome,
// with the HTTP/1.1 client and with net/http. The in-process server's
// cost and allocations are in the figures too (about 25 allocations); the
// difference between the two is the driver's.
func BenchmarkWorkerRequest(b *testing.B) {
	srv := serve(b, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	for _, name := range []string{"h1", "nethttp"} {
		b.Run(name, func(b *testing.B) {
			cfg, err := (&Config{Targets: []Target{{URL: srv.URL}}, Shape: mustShape(b, 1, time.Second)}).withDefaults()
			if err != nil {
				b.Fatal(err)
			}
			e := &engine{cfg: cfg, base: time.Now()}
			rt, closeRT := cfg.transport()
			defer closeRT()
			e.rt = rt
			if name == "h1" {
				e.h1t, e.h1hosts, _ = h1Targets(cfg)
				e.h1 = &h1{timeout: time.Second, keepAlive: true}
			}
			wk := e.newWorker(context.Background(), 0)
			if wk.h1 != nil {
				defer wk.h1.closeAll()
			}
			w := newWinRec(0, 1, time.Hour, nil)
			b.ReportAllocs()
			for b.Loop() {
				wk.do(arrival{sched: time.Since(e.base), win: w}, w.stripes[0])
			}
			if w.stripes[0].c.OK == 0 || w.stripes[0].c.TransportError > 0 {
				b.Fatalf("counts %+v", w.stripes[0].c)
			}
		})
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
