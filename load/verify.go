package load

import (
	"fmt"
	"math"
)

// verifyWindow recomputes every figure of w that a verdict or a driver limit
// reads — latency summaries from their histograms, rates from counts and
// duration, timeline totals, the driver's CPU use, the attribution of
// refusals — and returns an error naming the first stored field that
// disagrees. A report is a record: a hand-edited p99 must not turn a FAIL
// into a PASS.
func verifyWindow(w Window, host Host, kind string) error {
	for _, f := range []struct {
		name string
		d    Dist
	}{
		{"latency.schedule_wait", w.Latency.ScheduleWait}, {"latency.request_time", w.Latency.RequestTime},
		{"latency.response_time", w.Latency.ResponseTime}, {"latency.first_byte", w.Latency.FirstByte},
		{"latency.ok_response_time", w.Latency.OKResponseTime}, {"driver.schedule_lag", w.Driver.ScheduleLag},
	} {
		h, err := histOf(f.d)
		if err != nil {
			return fmt.Errorf("%s: %v", f.name, err)
		}
		want := distOf(h)
		for _, v := range []struct {
			field     string
			got, want float64
		}{
			{"min_ms", f.d.Min, want.Min}, {"mean_ms", f.d.Mean, want.Mean}, {"p50_ms", f.d.P50, want.P50},
			{"p90_ms", f.d.P90, want.P90}, {"p99_ms", f.d.P99, want.P99}, {"p999_ms", f.d.P999, want.P999},
			{"max_ms", f.d.Max, want.Max},
		} {
			if !same(v.got, v.want) {
				return fmt.Errorf("%s.%s is %v but its histogram says %v", f.name, v.field, v.got, v.want)
			}
		}
	}
	c := w.Counts
	if w.Latency.ResponseTime.Count != c.OK+c.Refused+c.HTTPError {
		return fmt.Errorf("latency.response_time.count %d, want ok+refused+http_error = %d", w.Latency.ResponseTime.Count, c.OK+c.Refused+c.HTTPError)
	}
	if w.Latency.OKResponseTime.Count != c.OK {
		return fmt.Errorf("latency.ok_response_time.count %d, want ok = %d", w.Latency.OKResponseTime.Count, c.OK)
	}
	if !(w.DurationS > 0) && c.Scheduled > 0 {
		return fmt.Errorf("duration_s %v with %d scheduled", w.DurationS, c.Scheduled)
	}
	want := ratesOf(c, w.DurationS)
	for _, v := range []struct {
		field     string
		got, want float64
	}{{"rates.offered", w.Rates.Offered, want.Offered}, {"rates.sent", w.Rates.Sent, want.Sent}, {"rates.ok", w.Rates.OK, want.OK}} {
		if !same(v.got, v.want) {
			return fmt.Errorf("%s is %v but the counts over duration_s say %v", v.field, v.got, v.want)
		}
	}
	var tl Second
	for _, s := range w.Timeline {
		tl.Scheduled += s.Scheduled
		tl.Dropped += s.Dropped
		tl.OK += s.OK
		tl.Refused += s.Refused
		tl.Errors += s.Errors
	}
	errs := c.HTTPError + c.TransportError + c.Unfinished
	for _, v := range []struct {
		field     string
		got, want int64
	}{{"scheduled", tl.Scheduled, c.Scheduled}, {"dropped", tl.Dropped, c.Dropped}, {"ok", tl.OK, c.OK},
		{"refused", tl.Refused, c.Refused}, {"errors", tl.Errors, errs}} {
		if v.got != v.want {
			return fmt.Errorf("timeline %s adds to %d, counts say %d", v.field, v.got, v.want)
		}
	}
	// A merged window's CPU use is the busiest driver's, which the merged
	// report cannot recompute; a single driver's is CPU over elapsed time.
	if kind != "merge" && host.GOMAXPROCS > 0 && w.ElapsedS > 0 {
		u := w.Driver.CPUSeconds / (w.ElapsedS * float64(host.GOMAXPROCS))
		if !same(w.Driver.CPUUtilization, u) {
			return fmt.Errorf("driver.cpu_utilization is %v but cpu_seconds over elapsed_s × GOMAXPROCS say %v", w.Driver.CPUUtilization, u)
		}
	}
	if len(w.Phases) > 0 {
		var sum PhaseCounts
		for i, p := range w.Phases {
			addPhaseCounts(&sum, p.Counts)
			for _, f := range []struct {
				name string
				d    Dist
			}{{"response_time", p.ResponseTime}, {"ok_response_time", p.OKResponseTime}} {
				h, err := histOf(f.d)
				if err != nil {
					return fmt.Errorf("phases[%d].%s: %v", i, f.name, err)
				}
				if want := distOf(h); !same(want.P50, f.d.P50) || !same(want.P99, f.d.P99) || !same(want.Max, f.d.Max) {
					return fmt.Errorf("phases[%d].%s percentiles disagree with its histogram", i, f.name)
				}
			}
			if want := ratesOf(Counts{Scheduled: p.Counts.Scheduled, Sent: p.Counts.Sent, OK: p.Counts.OK}, p.EndS-p.StartS); !same(want.OK, p.Rates.OK) || !same(want.Offered, p.Rates.Offered) {
				return fmt.Errorf("phases[%d].rates disagree with its counts", i)
			}
		}
		if want := (PhaseCounts{Scheduled: c.Scheduled, Sent: c.Sent, Dropped: c.Dropped, OK: c.OK, Refused: c.Refused, Errors: errs}); sum != want {
			return fmt.Errorf("phases add to %+v, counts say %+v", sum, want)
		}
	}
	if m := w.Metrics; m != nil {
		re := *m
		if m.Error == "" {
			attributeRefusals(&re, c)
		} else {
			re.Attributed, re.Unattributed = 0, c.Refused
		}
		if re.Attributed != m.Attributed || re.Unattributed != m.Unattributed || !same(re.RejectedTotal, m.RejectedTotal) {
			return fmt.Errorf("metrics attribution (attributed %d, unattributed %d, rejected_total %v) disagrees with the rejections and refusals (%d, %d, %v)",
				m.Attributed, m.Unattributed, m.RejectedTotal, re.Attributed, re.Unattributed, re.RejectedTotal)
		}
		if m.ServerCPUSeconds != nil && m.ServerCPUPerOKMillis != nil && c.OK > 0 {
			if per := *m.ServerCPUSeconds / float64(c.OK) * 1000; !same(per, *m.ServerCPUPerOKMillis) {
				return fmt.Errorf("metrics.server_cpu_per_ok_ms is %v but server_cpu_seconds over ok say %v", *m.ServerCPUPerOKMillis, per)
			}
		}
	}
	return nil
}

// same compares a stored float with its recomputation. JSON keeps a float64
// exactly, so only rounding in the arithmetic is forgiven.
func same(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
