package proxy

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/upstream"
)

// transport is the proxy's default Transport: sluice's own HTTP/1.1
// client (internal/upstream: a keep-alive pool per upstream, one framing
// per request, strict about answers, a quarter of net/http's allocations)
// for http:// upstreams, and net/http's Transport for https:// ones
// (which may speak HTTP/2 to them, as before).
type transport struct {
	plain  *upstream.Client
	secure *http.Transport
}

func newTransport(maxIdle int) *transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdle
	return &transport{plain: upstream.New(upstream.Config{MaxIdlePerHost: maxIdle}), secure: t}
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "https" {
		return t.secure.RoundTrip(r)
	}
	return t.plain.RoundTrip(r)
}

// CloseIdleConnections closes both clients' idle connections.
func (t *transport) CloseIdleConnections() {
	t.plain.CloseIdleConnections()
	t.secure.CloseIdleConnections()
}
