package proxybench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy"
)

// BenchmarkProxyClassesPaired measures what the queue rules cost on the
// request path when nothing is overloaded: blocks of 256 requests (8
// clients at once), each carrying X-Priority: sheddable, alternate between
// two sluice proxies in the same process, one plain (MaxInflight 1024, a
// queue of 64) and one whose upstream gate also reads the class from the
// header, serves LIFO and keeps a share for sheddable work. It reports the
// median over blocks of classes-time / plain-time.
func BenchmarkProxyClassesPaired(b *testing.B) {
	u := trivialUpstream(b)
	newProxy := func(q proxy.Queueing) *httptest.Server {
		p, err := proxy.New(proxy.Config{Upstreams: []*url.URL{u}, MaxInflight: 1024, Queue: 64, Queueing: q})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		s := httptest.NewServer(p)
		b.Cleanup(s.Close)
		return s
	}
	plain := newProxy(proxy.Queueing{})
	classes := newProxy(proxy.Queueing{Discipline: "lifo", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=0.1"}})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	block := func(base string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 32 {
					req, _ := http.NewRequest(http.MethodGet, base+"/x", nil)
					req.Header.Set("X-Priority", "sheddable")
					resp, err := c.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	block(plain.URL)
	block(classes.URL)
	var ratios []float64
	b.ReportAllocs()
	for b.Loop() {
		tp := block(plain.URL)
		tc := block(classes.URL)
		ratios = append(ratios, float64(tc)/float64(tp))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "classes/plain")
	b.ReportMetric(0, "ns/op")
}
