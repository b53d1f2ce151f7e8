package proxy

import (
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"unsafe"

	"golang.org/x/net/http/httpguts"
)

// Forwarding headers the proxy writes on every outbound request.
const (
	headerXFF          = "X-Forwarded-For"
	headerXFHost       = "X-Forwarded-Host"
	headerXFProto      = "X-Forwarded-Proto"
	headerForwarded    = "Forwarded"
	forwardedForUnkown = "unknown" // RFC 7239 section 6.2: a peer whose address is not known
)

// setForwarded writes the client address chain on the outbound request.
// httputil.ReverseProxy has removed the inbound forwarding headers from
// pr.Out before Rewrite runs; they are read from pr.In.
func (p *Proxy) setForwarded(pr *httputil.ProxyRequest) {
	p.writeForwarded(httpInbound{pr.In}, pr.In.Host, pr.Out.Header)
}

// inbound is what the forwarding rules read of an inbound request: the
// bridge's *http.Request and the engine's parsed head both provide it,
// so that both front ends forward by the same rules (writeForwarded).
type inbound interface {
	// peer is the client's address (unmapped, no zone) and port;
	// known is false when it is not an IP address.
	peer() (addr netip.Addr, port uint16, known bool)
	secure() bool // it came over TLS
	// values is every value of a field (name canonical), nil when absent.
	values(name string) []string
}

// httpInbound is an *http.Request as an inbound.
type httpInbound struct{ r *http.Request }

func (h httpInbound) peer() (netip.Addr, uint16, bool) { return peerAddr(h.r.RemoteAddr) }
func (h httpInbound) secure() bool                     { return h.r.TLS != nil }
func (h httpInbound) values(name string) []string      { return h.r.Header[name] }

// forwardedValues are the four forwarding headers' values for one
// request (an empty xff or host: that header is not written).
type forwardedValues struct{ xff, host, proto, fwd string }

// writeForwarded writes the forwarding headers of in, whose host (as
// net/http reads it) is inHost, on out, from which the inbound ones
// have been removed (see forwarded for the rules).
func (p *Proxy) writeForwarded(in inbound, inHost string, out http.Header) {
	fv := p.forwarded(in, inHost, nil)
	// The four headers' values share one array (one allocation, not
	// four), and the names are canonical constants, so the map is
	// written directly, without Header.Set's canonicalisation.
	vals := make([]string, 4)
	vals[0], vals[1], vals[2], vals[3] = fv.xff, fv.host, fv.proto, fv.fwd
	if fv.xff != "" {
		out[headerXFF] = vals[0:1:1]
	}
	if fv.host != "" {
		out[headerXFHost] = vals[1:2:2]
	}
	out[headerXFProto] = vals[2:3:3]
	out[headerForwarded] = vals[3:4:4]
}

// forwarded returns the forwarding headers' values of in, whose host (as
// net/http reads it) is inHost. Their bytes are in room when it has
// space for them (the native path's storage), else in a buffer of
// their own.
//
// A peer in Config.TrustedProxies is a proxy in front of this one, so its
// chain is kept and the peer appended: X-Forwarded-For gets ", <peer>",
// Forwarded gets a new element, and its X-Forwarded-Host and
// X-Forwarded-Proto (what the first proxy saw) pass unchanged. Any other
// peer is the client itself: whatever chain it sent is a claim nobody
// vouches for, so it is replaced by the peer's address alone.
func (p *Proxy) forwarded(in inbound, inHost string, room []byte) forwardedValues {
	peer, port, known := in.peer()
	trusted := known && p.trusted(peer)
	proto := "http"
	if in.secure() {
		proto = "https"
	}
	host, xproto := inHost, proto
	var priorXFF, priorFwd string
	if trusted {
		priorXFF, priorFwd = joined(in.values(headerXFF)), joined(in.values(headerForwarded))
		if h := first(in.values(headerXFHost)); h != "" {
			host = h
		}
		if x := first(in.values(headerXFProto)); x != "" {
			xproto = x
		}
	}
	// Both chains are built in one buffer, which is the values' string
	// (see frozen): a forwarded request pays one allocation here, or
	// none, not one per piece.
	buf := room[:0] // the native path's storage, written here once
	if n := len(priorXFF) + len(priorFwd) + 2*len(inHost) + 96; cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	buf = appendPrior(buf, priorXFF)
	if known {
		buf = peer.AppendTo(buf)
	}
	xffEnd := len(buf)
	buf = appendPrior(buf, priorFwd)
	buf = appendForwardedElement(buf, peer, port, known, inHost, proto)
	chains := frozen(buf)
	return forwardedValues{xff: chains[:xffEnd], host: host, proto: xproto, fwd: chains[xffEnd:]}
}

// appendPrior appends a chain received from a trusted proxy and the list
// separator before this hop's entry; nothing for an empty chain.
func appendPrior(b []byte, prior string) []byte {
	if prior == "" {
		return b
	}
	return append(append(b, prior...), ", "...)
}

// first is a field's first value, "" when absent.
func first(vs []string) string {
	if len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// trusted reports whether a is one of Config.TrustedProxies.
func (p *Proxy) trusted(a netip.Addr) bool {
	for _, pf := range p.cfg.TrustedProxies {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr parses a RemoteAddr ("192.0.2.1:4711", "[2001:db8::1]:4711"):
// the address, IPv4-mapped IPv6 unmapped and any zone dropped, and the
// port (0 when absent).
func peerAddr(remote string) (netip.Addr, uint16, bool) {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone(""), ap.Port(), true
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap().WithZone(""), 0, true
	}
	return netip.Addr{}, 0, false
}

// joined is every value of a field, joined as one comma-separated list
// (RFC 9110 section 5.3), or "".
func joined(vs []string) string {
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return strings.TrimSpace(vs[0])
	}
	return strings.Join(vs, ", ")
}

// forwardedElement is this hop's RFC 7239 element:
// for=<peer>;host=<Host>;proto=<http|https>. A node with a port, and any
// IPv6 node (bracketed), is a quoted string, as section 6 requires.
func forwardedElement(peer netip.Addr, port uint16, known bool, host, proto string) string {
	return string(appendForwardedElement(nil, peer, port, known, host, proto))
}

func appendForwardedElement(b []byte, peer netip.Addr, port uint16, known bool, host, proto string) []byte {
	b = append(b, "for="...)
	switch {
	case !known:
		b = append(b, forwardedForUnkown...)
	case port != 0: // an address and a port hold no '"' or '\\' to escape
		b = append(netip.AddrPortFrom(peer, port).AppendTo(append(b, '"')), '"')
	case peer.Is6():
		b = append(peer.AppendTo(append(b, `"[`...)), `]"`...)
	default:
		b = peer.AppendTo(b)
	}
	if host != "" {
		b = appendForwardedValue(append(b, ";host="...), host)
	}
	return append(append(b, ";proto="...), proto...)
}

// appendForwardedValue appends v as an RFC 7239 value: a token as it is,
// anything else as an RFC 9110 quoted-string, '"' and '\\' escaped with a
// backslash.
func appendForwardedValue(b []byte, v string) []byte {
	token := v != ""
	for i := 0; i < len(v) && token; i++ {
		token = httpguts.IsTokenRune(rune(v[i]))
	}
	if token {
		return append(b, v...)
	}
	b = append(b, '"')
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, v[i])
	}
	return append(b, '"')
}

// frozen returns b's bytes as a string without copying them. The caller
// gives b up: nothing writes to its array again (each use here builds a
// buffer for one request's outbound header, converts it once and drops
// the slice), which is what makes sharing the memory safe. The string
// keeps the array alive for as long as the header does.
func frozen(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
