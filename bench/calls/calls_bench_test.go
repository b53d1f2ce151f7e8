// Package calls_test measures what sluice's retry transport and breaker
// cost on the path of a successful call, side by side with a bare
// http.Client and with github.com/sony/gobreaker in one run. It lives in
// the bench module so the main module does not depend on the peers.
package calls_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
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

func run(b *testing.B, c *http.Client, req *http.Request, prepare func(*http.Request)) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		if prepare != nil {
			prepare(req)
		}
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

// handDeadline is what a caller without sluice writes to propagate its
// deadline: set Request-Timeout on its own request before each call, with
// the same margin as sluice's default. It is the fair baseline for the
// deadline rows, since the bare client sends less.
func handDeadline(req *http.Request) {
	if dl, ok := req.Context().Deadline(); ok {
		req.Header.Set("Request-Timeout", retry.FormatTimeout(time.Until(dl)-5*time.Millisecond))
	}
}

// rawServer is a loopback HTTP/1.1 server that answers every request with
// a canned 200 without parsing it (it only finds each request's end, the
// blank line), reusing one buffer per connection. It allocates nothing
// per request, so a benchmark's allocation count is the client's alone,
// unlike httptest.Server's, which parses every header the client sends in
// the same process.
func rawServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				seen := 0 // how much of "\r\n\r\n" was just read
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					for _, ch := range buf[:n] {
						switch {
						case ch == '\r' && seen%2 == 0:
							seen++
						case ch == '\n' && seen%2 == 1:
							seen++
						case ch == '\r':
							seen = 1
						default:
							seen = 0
						}
						if seen == 4 {
							seen = 0
							if _, err := c.Write(answer); err != nil {
								return
							}
						}
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/x"
}

// BenchmarkOverhead: a successful call through http.Client, with a stub
// round tripper (the transport's own cost) and over loopback to a canned
// raw server (the cost in context, allocations the client's only). Each
// group pairs a bare client with the same client wrapped; the deadline
// rows add a bare client that propagates the deadline by hand.
func BenchmarkOverhead(b *testing.B) {
	br, _ := breaker.New(breaker.Config{Name: "up"})
	full := policy(b, retry.Config{Name: "up", Breaker: br})
	plain := policy(b, retry.Config{Name: "up"})

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	raw := rawServer(b)
	for _, up := range []struct {
		name string
		next http.RoundTripper
		url  string
	}{{"stub", stub{}, "http://upstream/x"}, {"raw", tr, raw}} {
		noDeadline, _ := http.NewRequest(http.MethodGet, up.url, nil)
		withDeadline, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.url, nil)
		handReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.url, nil)
		bare := &http.Client{Transport: up.next}
		b.Run(up.name+"/bare", func(b *testing.B) { run(b, bare, noDeadline, nil) })
		if up.name == "stub" {
			b.Run(up.name+"/sluice", func(b *testing.B) {
				run(b, &http.Client{Transport: &retry.Transport{Policy: plain, Next: up.next}}, noDeadline, nil)
			})
		}
		b.Run(up.name+"/sluice+breaker", func(b *testing.B) {
			run(b, &http.Client{Transport: &retry.Transport{Policy: full, Next: up.next}}, noDeadline, nil)
		})
		b.Run(up.name+"/bare-deadline", func(b *testing.B) { run(b, bare, withDeadline, nil) })
		b.Run(up.name+"/hand-deadline", func(b *testing.B) { run(b, bare, handReq, handDeadline) })
		b.Run(up.name+"/sluice+breaker-deadline", func(b *testing.B) {
			run(b, &http.Client{Transport: &retry.Transport{Policy: full, Next: up.next}}, withDeadline, nil)
		})
	}
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
// machine: each iteration times a block of calls through each baseline
// client and then the same block through the wrapped client, back to
// back, and reports the median of the per-block differences (so load that
// comes and goes hits both halves of a pair) and the difference of
// testing.AllocsPerRun. Baselines: "bare" (a plain http.Client) and, for
// the deadline rows, "hand" (a plain http.Client whose caller sets
// Request-Timeout on its request before each call, as it would have to
// without sluice). Metrics are named <what>-vs-<baseline>.
//
// "stub" answers without the network; "raw" is a loopback server that
// answers a canned 200 without parsing, so the allocations are the
// client's; "httptest" is a real net/http server in the same process, so
// its allocation figures include the server parsing the extra header.
func BenchmarkPaired(b *testing.B) {
	br, _ := breaker.New(breaker.Config{Name: "up"})
	full := policy(b, retry.Config{Name: "up", Breaker: br})
	plain := policy(b, retry.Config{Name: "up"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	raw := rawServer(b)

	type client struct {
		name    string
		c       *http.Client
		req     *http.Request
		prepare func(*http.Request)
	}
	type row struct {
		name      string
		baselines []client
		wrapped   client
		block     int
	}
	var rows []row
	for _, up := range []struct {
		name  string
		next  http.RoundTripper
		url   string
		block int
	}{{"stub", stub{}, "http://upstream/x", 256}, {"raw", tr, raw, 32}, {"httptest", tr, srv.URL, 16}} {
		noDeadline, _ := http.NewRequest(http.MethodGet, up.url, nil)
		withDeadline, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.url, nil)
		handReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.url, nil)
		bare := &http.Client{Transport: up.next}
		wrapped := func(p *retry.Policy) *http.Client {
			return &http.Client{Transport: &retry.Transport{Policy: p, Next: up.next}}
		}
		if up.name == "stub" {
			rows = append(rows, row{up.name + "/sluice", []client{{"bare", bare, noDeadline, nil}}, client{"sluice", wrapped(plain), noDeadline, nil}, up.block})
		}
		rows = append(rows,
			row{up.name + "/sluice+breaker", []client{{"bare", bare, noDeadline, nil}}, client{"sluice", wrapped(full), noDeadline, nil}, up.block},
			row{up.name + "/sluice+breaker-deadline", []client{{"bare", bare, withDeadline, nil}, {"hand", bare, handReq, handDeadline}},
				client{"sluice", wrapped(full), withDeadline, nil}, up.block})
	}
	for _, tc := range rows {
		b.Run(tc.name, func(b *testing.B) {
			call := func(c client) {
				if c.prepare != nil {
					c.prepare(c.req)
				}
				resp, err := c.c.Do(c.req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%v %v", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			block := func(c client) time.Duration {
				t0 := time.Now()
				for range tc.block {
					call(c)
				}
				return time.Since(t0)
			}
			diffs := make([][]float64, len(tc.baselines))
			for b.Loop() {
				for i, base := range tc.baselines {
					tb := block(base)
					tw := block(tc.wrapped)
					diffs[i] = append(diffs[i], float64(tw-tb)/float64(tc.block))
				}
			}
			wrappedAllocs := testing.AllocsPerRun(200, func() { call(tc.wrapped) })
			for i, base := range tc.baselines {
				slices.Sort(diffs[i])
				b.ReportMetric(diffs[i][len(diffs[i])/2], "overhead-ns-vs-"+base.name+"/call")
				b.ReportMetric(wrappedAllocs-testing.AllocsPerRun(200, func() { call(base) }), "extra-allocs-vs-"+base.name+"/call")
			}
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

// BenchmarkGroupPaired: what a per-upstream breaker costs over a single
// one: blocks of Allow+Done on one breaker, then on Group.Get(host) of a
// group holding 16 hosts, alternated; median per-call difference and
// allocations of the group path.
func BenchmarkGroupPaired(b *testing.B) {
	single, _ := breaker.New(breaker.Config{Name: "up"})
	g, _ := breaker.NewGroup(breaker.GroupConfig{Breaker: breaker.Config{Name: "up"}})
	hosts := make([]string, 16)
	for i := range hosts {
		hosts[i] = "10.0.0." + strconv.Itoa(i) + ":8080"
		g.Get(hosts[i])
	}
	one := func(br *breaker.Breaker) {
		c, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		c.Done(breaker.Success)
	}
	const block = 512
	var diffs []float64
	for b.Loop() {
		t0 := time.Now()
		for range block {
			one(single)
		}
		t1 := time.Now()
		for i := range block {
			one(g.Get(hosts[i%len(hosts)]))
		}
		t2 := time.Now()
		diffs = append(diffs, float64(t2.Sub(t1)-t1.Sub(t0))/block)
	}
	slices.Sort(diffs)
	b.ReportMetric(diffs[len(diffs)/2], "group-extra-ns/call")
	b.ReportMetric(testing.AllocsPerRun(200, func() { one(g.Get(hosts[3])) }), "group-allocs/call")
}
