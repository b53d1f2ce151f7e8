// Package calls_test measures what sluice's retry transport and breaker
// cost on the path of a successful call, side by side with a bare
// http.Client and with github.com/sony/gobreaker in one run. It lives in
// the bench module so the main module does not depend on the peers.
package calls_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
	"github.com/sony/gobreaker/v2"
)

// stub answers every request with a fixed 200 without touching the
// network, so the difference between two clients is the transport's own
// cost.
type stub struct{}

func (stub) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

func policy(b *testing.B, cfg retry.Config) *retry.Policy {
	b.Helper()
	p, err := retry.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func run(b *testing.B, c *http.Client, req *http.Request) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkOverhead: a successful call through http.Client, with a stub
// round tripper (the transport's own cost) and over loopback (the cost in
// context). Each row pairs a bare client with the same client wrapped.
func BenchmarkOverhead(b *testing.B) {
	br, _ := breaker.New(breaker.Config{Name: "up"})
	full := policy(b, retry.Config{Name: "up", Breaker: br})
	plain := policy(b, retry.Config{Name: "up"})

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	noDeadline, _ := http.NewRequest(http.MethodGet, "http://upstream/x", nil)
	withDeadline, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream/x", nil)

	b.Run("stub/bare", func(b *testing.B) { run(b, &http.Client{Transport: stub{}}, noDeadline) })
	b.Run("stub/sluice", func(b *testing.B) {
		run(b, &http.Client{Transport: &retry.Transport{Policy: plain, Next: stub{}}}, noDeadline)
	})
	b.Run("stub/sluice+breaker", func(b *testing.B) {
		run(b, &http.Client{Transport: &retry.Transport{Policy: full, Next: stub{}}}, noDeadline)
	})
	b.Run("stub/bare-deadline", func(b *testing.B) { run(b, &http.Client{Transport: stub{}}, withDeadline) })
	b.Run("stub/sluice+breaker-deadline", func(b *testing.B) {
		run(b, &http.Client{Transport: &retry.Transport{Policy: full, Next: stub{}}}, withDeadline)
	})

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	lbNoDeadline, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	lbDeadline, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	b.Run("loopback/bare", func(b *testing.B) { run(b, &http.Client{Transport: tr}, lbNoDeadline) })
	b.Run("loopback/sluice+breaker", func(b *testing.B) {
		run(b, &http.Client{Transport: &retry.Transport{Policy: full, Next: tr}}, lbNoDeadline)
	})
	b.Run("loopback/bare-deadline", func(b *testing.B) { run(b, &http.Client{Transport: tr}, lbDeadline) })
	b.Run("loopback/sluice+breaker-deadline", func(b *testing.B) {
		run(b, &http.Client{Transport: &retry.Transport{Policy: full, Next: tr}}, lbDeadline)
	})
}

// BenchmarkBreaker: one allowed call recorded as a success, sluice's
// breaker against gobreaker's two-step breaker (the nearest equivalent).
func BenchmarkBreaker(b *testing.B) {
	b.Run("sluice", func(b *testing.B) {
		br, _ := breaker.New(breaker.Config{Name: "up", SlowCall: time.Second})
		b.ReportAllocs()
		for b.Loop() {
			c, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			c.Done(breaker.Success)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		br := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "up", Interval: 10 * time.Second, BucketPeriod: time.Second})
		b.ReportAllocs()
		for b.Loop() {
			done, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
}

// BenchmarkPaired measures the transport's overhead robustly on a shared
// machine: each iteration times a block of calls through the bare client
// and then the same block through the wrapped client, back to back, and
// the reported overhead-ns/call is the median of the per-block
// differences (so load that comes and goes hits both halves of a pair).
// extra-allocs/call is the difference of testing.AllocsPerRun.
func BenchmarkPaired(b *testing.B) {
	br, _ := breaker.New(breaker.Config{Name: "up"})
	full := policy(b, retry.Config{Name: "up", Breaker: br})
	plain := policy(b, retry.Config{Name: "up"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	noDeadline, _ := http.NewRequest(http.MethodGet, "http://upstream/x", nil)
	withDeadline, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream/x", nil)
	bare := &http.Client{Transport: stub{}}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	lbNoDeadline, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	lbDeadline, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)

	for _, tc := range []struct {
		name          string
		bare, wrapped *http.Client
		req           *http.Request
		block         int
	}{
		{"stub/sluice", bare, &http.Client{Transport: &retry.Transport{Policy: plain, Next: stub{}}}, noDeadline, 256},
		{"stub/sluice+breaker", bare, &http.Client{Transport: &retry.Transport{Policy: full, Next: stub{}}}, noDeadline, 256},
		{"stub/sluice+breaker-deadline", bare, &http.Client{Transport: &retry.Transport{Policy: full, Next: stub{}}}, withDeadline, 256},
		{"loopback/sluice+breaker", &http.Client{Transport: tr}, &http.Client{Transport: &retry.Transport{Policy: full, Next: tr}}, lbNoDeadline, 16},
		{"loopback/sluice+breaker-deadline", &http.Client{Transport: tr}, &http.Client{Transport: &retry.Transport{Policy: full, Next: tr}}, lbDeadline, 16},
	} {
		b.Run(tc.name, func(b *testing.B) {
			call := func(c *http.Client) {
				resp, err := c.Do(tc.req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%v %v", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			var diffs []float64
			for b.Loop() {
				t0 := time.Now()
				for range tc.block {
					call(tc.bare)
				}
				t1 := time.Now()
				for range tc.block {
					call(tc.wrapped)
				}
				t2 := time.Now()
				diffs = append(diffs, float64(t2.Sub(t1)-t1.Sub(t0))/float64(tc.block))
			}
			slices.Sort(diffs)
			b.ReportMetric(diffs[len(diffs)/2], "overhead-ns/call")
			extra := testing.AllocsPerRun(200, func() { call(tc.wrapped) }) - testing.AllocsPerRun(200, func() { call(tc.bare) })
			b.ReportMetric(extra, "extra-allocs/call")
		})
	}
}

// BenchmarkBreakerPaired times blocks of sluice's breaker and gobreaker
// back to back and reports the median per-call difference (sluice minus
// gobreaker) and both medians, for a shared machine.
func BenchmarkBreakerPaired(b *testing.B) {
	sb, _ := breaker.New(breaker.Config{Name: "up", SlowCall: time.Second})
	gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "up", Interval: 10 * time.Second, BucketPeriod: time.Second})
	const block = 512
	var diffs, sl, gl []float64
	for b.Loop() {
		t0 := time.Now()
		for range block {
			c, err := sb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			c.Done(breaker.Success)
		}
		t1 := time.Now()
		for range block {
			done, err := gb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
		t2 := time.Now()
		s, g := float64(t1.Sub(t0))/block, float64(t2.Sub(t1))/block
		sl, gl, diffs = append(sl, s), append(gl, g), append(diffs, s-g)
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(sl), "sluice-ns/call")
	b.ReportMetric(med(gl), "gobreaker-ns/call")
	b.ReportMetric(med(diffs), "diff-ns/call")
}
