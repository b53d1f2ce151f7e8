package httpgate

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Fields are a request's header fields as a quota key reads them,
// whatever front end parsed the request. http.Header has both methods;
// so does the view of a request that sluice's own HTTP/1.1 engine hands
// its fast path. Names are given in canonical form and matched without
// regard to case.
type Fields interface {
	// Get returns the first value of the named field, or "".
	Get(name string) string
	// Values returns every value of the named field, in order.
	Values(name string) []string
}

// A RequestKey names the bucket a request spends from, from the peer's
// address (host:port, as http.Request.RemoteAddr has it) and the
// request's header fields: the form of a KeyFunc for a front end that
// builds no *http.Request. HeaderKey and ClientIPKey are the rules
// KeyHeader and KeyClientIP apply, written once for both forms.
type RequestKey func(remoteAddr string, h Fields) string

// Func returns k as a KeyFunc, reading the request's RemoteAddr and
// Header.
func (k RequestKey) Func() KeyFunc {
	return func(r *http.Request) string { return k(r.RemoteAddr, r.Header) }
}

// HeaderKey is KeyHeader's rule: the first value of the named field, ""
// (one shared bucket) without it. It panics if name is not a valid
// header field name.
func HeaderKey(name string) RequestKey {
	if !httpguts.ValidHeaderFieldName(name) {
		panic("httpgate: KeyHeader: invalid header field name " + strconv.Quote(name))
	}
	name = http.CanonicalHeaderKey(name)
	return func(_ string, h Fields) string { return h.Get(name) }
}

// ClientIPKey is KeyClientIP's rule: the peer's address, or, for a peer
// in trusted, the rightmost X-Forwarded-For address that is not.
func ClientIPKey(trusted []netip.Prefix) RequestKey {
	trusted = append([]netip.Prefix(nil), trusted...)
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(remoteAddr string, h Fields) string {
		peer, ok := parseHostAddr(remoteAddr)
		if !ok {
			return remoteAddr
		}
		if len(trusted) == 0 || !isTrusted(peer) {
			return peer.String()
		}
		client := peer
		vals := h.Values("X-Forwarded-For")
		for i := len(vals) - 1; i >= 0; i-- {
			parts := strings.Split(vals[i], ",")
			for j := len(parts) - 1; j >= 0; j-- {
				a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
				if err != nil {
					return client.String()
				}
				client = a.Unmap()
				if !isTrusted(client) {
					return client.String()
				}
			}
		}
		return client.String()
	}
}
