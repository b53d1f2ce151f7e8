package proxybench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy"
)

// BenchmarkProxy sends GETs through a proxy to a trivial upstream, all on
// loopback in this process: a bare httputil.ReverseProxy and sluice's
// proxy (one upstream gate, the retry transport with its budget and
// breaker, passive health, the send and body timeouts), side by side in
// the same run. Compare the two with benchstat; the difference is what
// sluice's gates and accounting cost per request.
func BenchmarkProxy(b *testing.B) {
	u := trivialUpstream(b)
	upT := http.DefaultTransport.(*http.Transport).Clone()
	upT.MaxIdleConnsPerHost = 64
	bare := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, Transport: upT}
	sl, err := proxy.New(proxy.Config{Upstreams: []*url.URL{u}, MaxInflight: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer sl.Close()
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"sluice", sl}} {
		b.Run(tc.name, func(b *testing.B) {
			front := httptest.NewServer(tc.h)
			defer front.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Get(front.URL + "/x")
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

// BenchmarkProxyPaired alternates blocks of 256 requests (8 clients at
// once) through the bare proxy and through sluice's, in the same process
// and the same instant, and reports the median over blocks of
// sluice-time / bare-time: load that comes and goes on a shared machine
// hits both halves of a pair.
func BenchmarkProxyPaired(b *testing.B) {
	u := trivialUpstream(b)
	upT := http.DefaultTransport.(*http.Transport).Clone()
	upT.MaxIdleConnsPerHost = 64
	bare := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, Transport: upT})
	defer bare.Close()
	p, err := proxy.New(proxy.Config{Upstreams: []*url.URL{u}, MaxInflight: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	sl := httptest.NewServer(p)
	defer sl.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	block := func(base string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 32 {
					resp, err := c.Get(base + "/x")
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	block(bare.URL)
	block(sl.URL)
	var ratios []float64
	b.ReportAllocs()
	for b.Loop() {
		tb := block(bare.URL)
		ts := block(sl.URL)
		ratios = append(ratios, float64(ts)/float64(tb))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "sluice/bare")
	b.ReportMetric(0, "ns/op")
}

// trivialUpstream starts a loopback server that answers "ok" at once,
// closed when the benchmark ends, and returns its URL.
func trivialUpstream(b *testing.B) *url.URL {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}
