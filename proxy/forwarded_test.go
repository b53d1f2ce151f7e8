package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// seen is what an upstream received: the Host and the forwarding headers.
type seen struct {
	host, xff, fwd, xfHost, xfProto string
	xffLines                        int
}

// recorder is an upstream that keeps the last request's forwarding view.
func recorder(t *testing.T) (*url.URL, func() seen) {
	t.Helper()
	var mu sync.Mutex
	var last seen
	u := backend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = seen{host: r.Host, xff: r.Header.Get(headerXFF), fwd: strings.Join(r.Header.Values(headerForwarded), " | "),
			xfHost: r.Header.Get(headerXFHost), xfProto: r.Header.Get(headerXFProto), xffLines: len(r.Header.Values(headerXFF))}
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	return u, func() seen { mu.Lock(); defer mu.Unlock(); return last }
}

// rawGet sends a GET with the given header lines (repeated names allowed)
// on a fresh TCP connection from a known local port to addr, and returns
// the status and the client's own address.
func rawGet(t *testing.T, network, addr, host string, lines ...string) (int, netip.AddrPort) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET /x HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n"
	for _, l := range lines {
		req += l + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, netip.MustParseAddrPort(c.LocalAddr().String())
}

// TestForwardedChain: the upstream sees the client address chain a
// balancer in front built, with this hop appended, when the peer is
// trusted; and only this hop (the peer's address) when it is not, however
// the client forged its headers. Forwarded (RFC 7239) goes with
// X-Forwarded-For, its for= quoted with the port.
func TestForwardedChain(t *testing.T) {
	up, last := recorder(t)
	forged := []string{
		"X-Forwarded-For: 203.0.113.9",
		"X-Forwarded-For: 198.51.100.2",
		"Forwarded: for=203.0.113.9;proto=https",
		"Forwarded: for=198.51.100.2",
		"X-Forwarded-Host: shop.example",
		"X-Forwarded-Proto: https",
	}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		want    func(peer netip.AddrPort, front string) seen
	}{
		{"untrusted peer: the chain is replaced", nil, func(peer netip.AddrPort, front string) seen {
			return seen{xff: "127.0.0.1", fwd: fmt.Sprintf(`for="%s";host="%s";proto=http`, peer, front), xfHost: front, xfProto: "http", xffLines: 1}
		}},
		{"trusted peer: the chain is kept and the peer appended", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, func(peer netip.AddrPort, front string) seen {
			return seen{xff: "203.0.113.9, 198.51.100.2, 127.0.0.1",
				fwd:    fmt.Sprintf(`for=203.0.113.9;proto=https, for=198.51.100.2, for="%s";host="%s";proto=http`, peer, front),
				xfHost: "shop.example", xfProto: "https", xffLines: 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, Config{Upstreams: []*url.URL{up}, TrustedProxies: tc.trusted})
			base, _ := front(t, p)
			addr := strings.TrimPrefix(base, "http://")
			code, peer := rawGet(t, "tcp", addr, addr, forged...)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			got, want := last(), tc.want(peer, addr)
			want.host = up.Host // rewritten by default
			if got != want {
				t.Fatalf("upstream saw\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

// TestForwardedIPv6: a client on IPv6 is a bracketed, quoted for= node.
func TestForwardedIPv6(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	up, last := recorder(t)
	p := mustNew(t, Config{Upstreams: []*url.URL{up}})
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); p.Close() })
	code, peer := rawGet(t, "tcp6", l.Addr().String(), "v6.example")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	got := last()
	if want := fmt.Sprintf(`for="[::1]:%d";host=v6.example;proto=http`, peer.Port()); got.fwd != want || got.xff != "::1" {
		t.Fatalf("upstream saw Forwarded %q, X-Forwarded-For %q; want %q and ::1", got.fwd, got.xff, want)
	}
}

// TestPreserveHost: by default the upstream sees its own host; with
// PreserveHost, the client's, on every instance of the pool.
func TestPreserveHost(t *testing.T) {
	upA, lastA := recorder(t)
	upB, lastB := recorder(t)
	for _, preserve := range []bool{false, true} {
		p := mustNew(t, Config{Upstreams: []*url.URL{upA, upB}, PreserveHost: preserve})
		base, c := front(t, p)
		for range 2 { // round-robin: one request to each instance
			if code, _, _, _ := get(t, c, base+"/x", "Host", "tenant-a.example"); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
		}
		for i, got := range []seen{lastA(), lastB()} {
			want := []string{upA.Host, upB.Host}[i]
			if preserve {
				want = "tenant-a.example"
			}
			if got.host != want || got.xfHost != "tenant-a.example" {
				t.Errorf("preserve=%v, instance %d saw Host %q, X-Forwarded-Host %q; want %q and tenant-a.example", preserve, i, got.host, got.xfHost, want)
			}
		}
	}
}

func TestForwardedElement(t *testing.T) {
	for _, tc := range []struct {
		peer  string
		port  uint16
		known bool
		host  string
		want  string
	}{
		{"192.0.2.43", 0, true, "example.com", "for=192.0.2.43;host=example.com;proto=http"},
		{"192.0.2.43", 47011, true, "example.com:8080", `for="192.0.2.43:47011";host="example.com:8080";proto=http`},
		{"2001:db8:cafe::17", 0, true, "", `for="[2001:db8:cafe::17]";proto=http`},
		{"2001:db8:cafe::17", 4711, true, "[2001:db8::1]:80", `for="[2001:db8:cafe::17]:4711";host="[2001:db8::1]:80";proto=http`},
		{"", 0, false, `a"b\c`, `for=unknown;host="a\"b\\c";proto=http`},
	} {
		var a netip.Addr
		if tc.known {
			a = netip.MustParseAddr(tc.peer)
		}
		if got := forwardedElement(a, tc.port, tc.known, tc.host, "http"); got != tc.want {
			t.Errorf("%s port %d host %q: %s, want %s", tc.peer, tc.port, tc.host, got, tc.want)
		}
	}
}
