package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
)

// headerWriter is the least a ResponseWriter can be: a header map reused
// across requests, so the benchmark counts what the proxy allocates.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkRefusal is the proxy's own cost of refusing a request at a full
// upstream gate (net/http's parsing and writing are not in it): under a
// flood that is most of what the proxy answers.
func BenchmarkRefusal(b *testing.B) {
	u, _ := url.Parse("http://127.0.0.1:1")
	p, err := New(Config{Upstreams: []*url.URL{u}, MaxInflight: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	held, err := p.Gates()[0].TryAcquire()
	if err != nil {
		b.Fatal(err)
	}
	defer held.Done(admit.OutcomeOK)
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	w := &headerWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		p.ServeHTTP(w, r)
		if w.code != http.StatusServiceUnavailable {
			b.Fatalf("status %d, want 503", w.code)
		}
	}
}

// cannedTransport answers every attempt with a small 200, so that a
// benchmark counts the proxy's own work on a proxied request (routing,
// gates, the call and attempt bookkeeping, the ReverseProxy), not a
// socket's.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, ContentLength: 2,
		Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// BenchmarkProxied is the proxy's own cost of passing one admitted GET to
// the upstream and its answer back.
func BenchmarkProxied(b *testing.B) {
	u, _ := url.Parse("http://127.0.0.1:1")
	p, err := New(Config{Upstreams: []*url.URL{u}, Transport: cannedTransport{}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	w := &headerWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		p.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			b.Fatalf("status %d, want 200", w.code)
		}
	}
}

// BenchmarkForwardedHeaders is the cost of writing the client address
// chain on an outbound request (a trusted balancer's chain kept, this hop
// appended to X-Forwarded-For and Forwarded) beside httputil's
// SetXForwarded, which writes X-Forwarded-* only.
func BenchmarkForwardedHeaders(b *testing.B) {
	u, _ := url.Parse("http://127.0.0.1:1")
	p, err := New(Config{Upstreams: []*url.URL{u}, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	in := httptest.NewRequest(http.MethodGet, "http://shop.example/x", nil)
	in.RemoteAddr = "10.1.2.3:40000"
	in.Header.Set("X-Forwarded-For", "203.0.113.9")
	in.Header.Set("Forwarded", "for=203.0.113.9;proto=https")
	for _, bc := range []struct {
		name string
		set  func(*httputil.ProxyRequest)
	}{
		{"httputil.SetXForwarded", func(pr *httputil.ProxyRequest) { pr.SetXForwarded() }},
		{"chain", p.setForwarded},
	} {
		b.Run(bc.name, func(b *testing.B) {
			out := in.Clone(in.Context())
			pr := &httputil.ProxyRequest{In: in, Out: out}
			b.ReportAllocs()
			for b.Loop() {
				clear(out.Header)
				bc.set(pr)
			}
		})
	}
}
