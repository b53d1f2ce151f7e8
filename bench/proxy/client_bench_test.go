package proxybench

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/internal/upstream/upstreamtest"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op: the process's CPU per operation (client and
// canned backend together; the backend's part is the same for every
// client), steadier than ns/op on a shared machine.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkUpstreamClients: the proxy's client toward its upstream
// (internal/upstream), net/http's Transport and fasthttp's HostClient,
// each sending a GET (and a POST of 1 KiB) with the headers a proxy
// forwards to the same canned backend on loopback and reading the
// answer to its end. Run it with -cpu 1 (the proxy's setting in the
// overload runs); cpu-ns/op is the figure to compare.
func BenchmarkUpstreamClients(b *testing.B) {
	for _, tc := range []struct {
		name    string
		method  string
		bodyLen int
	}{{"GET", "GET", 0}, {"POST1KiB", "POST", 1 << 10}} {
		body := strings.Repeat("b", tc.bodyLen)
		hdr := http.Header{"Accept": {"*/*"}, "User-Agent": {"bench"}, "X-Forwarded-For": {"10.0.0.1"}, "X-Request-Id": {"abc"}}
		netHTTP := func(b *testing.B, rt http.RoundTripper) {
			u := "http://" + upstreamtest.Canned(b, tc.bodyLen) + "/bench/path?q=1"
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				var r io.Reader
				if tc.bodyLen > 0 {
					r = strings.NewReader(body)
				}
				req, _ := http.NewRequest(tc.method, u, r)
				req.Header = hdr
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		b.Run(tc.name+"/upstream", func(b *testing.B) {
			c := upstream.New(upstream.Config{})
			defer c.Close()
			netHTTP(b, c)
		})
		b.Run(tc.name+"/nethttp", func(b *testing.B) {
			t := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128}
			defer t.CloseIdleConnections()
			netHTTP(b, t)
		})
		b.Run(tc.name+"/fasthttp", func(b *testing.B) {
			addr := upstreamtest.Canned(b, tc.bodyLen)
			hc := &fasthttp.HostClient{Addr: addr, MaxConns: 128}
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.Header.SetMethod(tc.method)
				req.SetRequestURI("http://" + addr + "/bench/path?q=1")
				for k, vv := range hdr {
					for _, v := range vv {
						req.Header.Add(k, v)
					}
				}
				if tc.bodyLen > 0 {
					req.SetBodyString(body)
				}
				if err := hc.Do(req, resp); err != nil {
					b.Fatal(err)
				}
				_ = resp.Body()
				fasthttp.ReleaseRequest(req)
				fasthttp.ReleaseResponse(resp)
			}
		})
	}
}
