package load

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestWriteSummaryAndCliffTable(t *testing.T) {
	r := realReport(t)
	var b bytes.Buffer
	WriteSummary(&b, r)
	out := b.String()
	for _, want := range []string{SchemaV1, "steps=100,300", "ok p50", "ok p99", "all p99", "sched wait p99", "pacer lag p99", "refused", "by disk/full (503)",
		"by quota/rate (429)", "attributed 1", "server CPU", "verdict: PASS (case c)", "window 0 by step:", "window 1 by step:"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	WriteCliffTable(&b, r)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.Contains(lines[0], "refused %") || !strings.Contains(lines[0], "p99") || len(lines) < 3 {
		t.Errorf("cliff table:\n%s", b.String())
	}
}

func TestSweepReportAndHTML(t *testing.T) {
	cs := &classServer{}
	srv := serve(t, cs.ServeHTTP)
	var steps []Config
	for _, c := range []int{1, 2, 4} {
		steps = append(steps, Config{Targets: []Target{{URL: srv.URL}}, Concurrency: c, Duration: 100 * time.Millisecond})
	}
	r, err := Run(context.Background(), "sweep", Meta{Command: []string{"sluice", "sweep"}}, steps)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 3 || r.Steps[2].Label != "c=4" {
		t.Fatalf("steps %d", len(r.Steps))
	}
	var b bytes.Buffer
	WriteCliffTable(&b, r)
	for _, want := range []string{"c=1", "c=2", "c=4", "%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("cliff table lacks %q:\n%s", want, b.String())
		}
	}
	page := string(RenderHTML([]*Report{r, r}, []string{"a.json", "b<script>.json"}))
	for _, want := range []string{"<svg", "Response time percentiles", "OK requests/s per step", "Refused % per step", "stroke-dasharray", "A p99", "B p99", "b&lt;script&gt;.json"} {
		if !strings.Contains(page, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") && strings.Contains(page, "src=") {
		t.Error("html is not self-contained or not escaped")
	}
	if n := strings.Count(page, "<svg"); n != 3 {
		t.Errorf("%d charts, want 3", n)
	}
}

func TestFormatProgress(t *testing.T) {
	s := FormatProgress(Progress{Step: 1, Window: 2, Elapsed: 3 * time.Second, Sent: 10, OK: 7, Refused: 2, Dropped: 1, Rate: 9.5, P99: 1500 * time.Microsecond})
	for _, want := range []string{"step 1", "window 2", "sent 10", "ok 7", "refused 2", "dropped 1", "10 req/s", "p99 1.5ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

func TestLiveProgressLines(t *testing.T) {
	srv := serve(t, (&classServer{}).ServeHTTP)
	var lines []Progress
	done := make(chan struct{})
	runOne(t, context.Background(), Config{
		Targets: []Target{{URL: srv.URL}}, Shape: mustShape(t, 100, 1200*time.Millisecond),
		Live: func(p Progress) {
			select {
			case <-done:
			default:
				lines = append(lines, p)
			}
		},
	})
	close(done)
	if len(lines) != 1 {
		t.Fatalf("%d live lines in 1.2 s, want 1", len(lines))
	}
	if p := lines[0]; p.Sent < 50 || p.Sent > 120 || p.Rate < 40 || p.Rate > 140 {
		t.Errorf("progress %+v", p)
	}
}
