package load

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// Over a second: the report comes from a real run (realReport).
func TestReportRoundTrip(t *testing.T) {
	r := realReport(t)
	p := filepath.Join(t.TempDir(), DefaultReportName(r.Started))
	if err := WriteReport(p, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(p)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := marshalReport(r)
	b2, _ := marshalReport(back)
	if !bytes.Equal(b1, b2) {
		t.Error("report changed in a write/read round trip")
	}
	if !strings.HasPrefix(filepath.Base(p), "load-report-") || !strings.HasSuffix(p, "Z.json") {
		t.Errorf("default name %s", p)
	}
}

// Seconds: it edits a report from a real run (realReport) once per case.
func TestParseReportRejects(t *testing.T) {
	r := realReport(t)
	good, _ := marshalReport(r)
	mutate := func(f func(*Report)) []byte {
		c, _ := ParseReport(good)
		f(c)
		b, _ := marshalReport(c)
		return b
	}
	cases := map[string][]byte{
		"not json":       []byte("{"),
		"empty":          []byte(""),
		"trailing":       append(append([]byte{}, good...), []byte("{}")...),
		"unknown field":  bytes.Replace(good, []byte(`"schema"`), []byte(`"extra": 1, "schema"`), 1),
		"wrong schema":   mutate(func(c *Report) { c.Schema = "other/v9" }),
		"bad kind":       mutate(func(c *Report) { c.Kind = "party" }),
		"bad verdict":    mutate(func(c *Report) { c.Verdict.Status = "MAYBE" }),
		"no reconcile":   mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.OK++ }),
		"sent mismatch":  mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.Sent++ }),
		"histogram lies": mutate(func(c *Report) { c.Steps[0].Windows[0].Latency.ResponseTime.Count++ }),
		"histogram junk": mutate(func(c *Report) { c.Steps[0].Windows[0].Latency.RequestTime.Hist = "bm90IGEgaGlzdG9ncmFt" }),
		"timeline lies":  mutate(func(c *Report) { c.Steps[0].Windows[0].Timeline[0].Scheduled++ }),
		"bad mode":       mutate(func(c *Report) { c.Steps[0].Mode = "ajar" }),
		"refusals lie":   mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.Refusals = nil }),
		"drops lie":      mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.DropReasons["queue_full"] = 3 }),
		"kinds lie":      mutate(func(c *Report) { c.Steps[0].Windows[0].Counts.TransportErrors["other"] = 2 }),
		"no steps":       mutate(func(c *Report) { c.Steps = nil }),
	}
	for name, b := range cases {
		if _, err := ParseReport(b); !errors.Is(err, ErrBadReport) {
			t.Errorf("%s: err = %v, want ErrBadReport", name, err)
		}
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, ErrBadReport) {
		t.Errorf("missing file: %v", err)
	}
}

// TestParseReportRefusesEditedSummaries edits, one at a time, each stored
// figure a verdict reads, leaving the histograms and counts alone. Every
// edit must be refused with an error naming the field: a report whose p99
// was lowered by hand must not pass a release check.
// Seconds: it parses and re-encodes a report from a real run (realReport)
// once per edited field.
func TestParseReportRefusesEditedSummaries(t *testing.T) {
	r := realReport(t)
	good, _ := marshalReport(r)
	if _, err := ParseReport(good); err != nil {
		t.Fatalf("the untouched report is refused: %v", err)
	}
	mutate := func(f func(w *Window)) []byte {
		c, _ := ParseReport(good)
		f(&c.Steps[0].Windows[1])
		b, _ := marshalReport(c)
		return b
	}
	cases := []struct {
		field string
		edit  func(w *Window)
	}{
		{"latency.response_time.p99_ms", func(w *Window) { w.Latency.ResponseTime.P99 /= 2 }},
		{"latency.response_time.p50_ms", func(w *Window) { w.Latency.ResponseTime.P50 += 1 }},
		{"latency.ok_response_time.max_ms", func(w *Window) { w.Latency.OKResponseTime.Max = 0 }},
		{"latency.request_time.p99_ms", func(w *Window) { w.Latency.RequestTime.P99 = 0.001 }},
		{"driver.schedule_lag.p99_ms", func(w *Window) { w.Driver.ScheduleLag.P99 = 0 }},
		{"rates.ok", func(w *Window) { w.Rates.OK *= 10 }},
		{"rates.offered", func(w *Window) { w.Rates.Offered++ }},
		{"driver.cpu_utilization", func(w *Window) { w.Driver.CPUUtilization = 0; w.Driver.CPUSeconds = 1 }},
		{"timeline ok", func(w *Window) { w.Timeline[0].OK++ }},
		{"timeline refused", func(w *Window) { w.Timeline[0].Refused-- }},
		{"metrics attribution", func(w *Window) { w.Metrics.Unattributed++ }},
	}
	for _, c := range cases {
		_, err := ParseReport(mutate(c.edit))
		if !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s edited: err %v, want ErrBadReport naming the field", c.field, err)
		}
	}
}
