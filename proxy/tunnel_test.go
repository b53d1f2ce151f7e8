package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

const wsHandshake = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

// echoUpgrader is a raw upstream that accepts any upgrade it is asked
// for (h2c included) with 101 and then echoes bytes, and answers a plain
// request 200 "plain". It counts the upgrades it was asked for, and those
// that came with a Request-Timeout.
func echoUpgrader(t *testing.T, asked *atomic.Int64, budgeted ...*atomic.Int64) *url.URL {
	return rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if up := req.Header.Get("Upgrade"); up != "" {
			asked.Add(1)
			if req.Header.Get("Request-Timeout") != "" && len(budgeted) > 0 {
				budgeted[0].Add(1)
			}
			fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", up)
			_, _ = io.Copy(c, br)
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nplain")
	})
}

// dialTunnel opens a WebSocket-style tunnel through the proxy at base and
// returns the connection, past the 101.
func dialTunnel(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, wsHandshake)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("handshake: %d %q; want 101", resp.StatusCode, body)
	}
	return c, br
}

func echo(t *testing.T, c net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	fmt.Fprint(c, msg)
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo through the tunnel: %q %v", buf, err)
	}
}

// TestUpgradeRefusedUnlessRouteAllows: an upgrade no route allows is
// refused before it reaches the upstream, as is one to a protocol the
// route does not list.
func TestUpgradeRefusedUnlessRouteAllows(t *testing.T) {
	var asked atomic.Int64
	up := echoUpgrader(t, &asked)
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, Routes: []Route{{Name: "ws", PathPrefix: "/ws", Upgrades: []string{"websocket"}}}})
	base, _ := front(t, p)
	for _, raw := range []string{
		strings.Replace(wsHandshake, "/ws", "/other", 1),                // no route allows it
		strings.Replace(wsHandshake, "websocket", "custom-protocol", 1), // not listed
	} {
		resp, body := rawRequest(t, base, raw)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, codeUpgradeRefused) {
			t.Fatalf("%q: %d %q; want 403 %s", raw, resp.StatusCode, body, codeUpgradeRefused)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the upstream was asked to upgrade %d times", n)
	}
}

// TestTunnelOnItsOwnGate: an allowed tunnel holds a slot of the tunnels
// gate, not the upstream gate; the gate is bounded; a quiet tunnel is
// closed after the idle timeout; CloseTunnels cuts the rest and says how
// many.
func TestTunnelOnItsOwnGate(t *testing.T) {
	var asked, budgeted atomic.Int64
	up := echoUpgrader(t, &asked, &budgeted)
	// An idle timeout long enough that a loaded machine's stall does not
	// cut the tunnel kept busy.
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 1, MaxTunnels: 2, TunnelIdleTimeout: time.Second,
		Routes: []Route{{Name: "ws", PathPrefix: "/ws", MaxInflight: 1, Upgrades: []string{"WebSocket"}}}})
	base, c := front(t, p)
	t1, br1 := dialTunnel(t, base)
	echo(t, t1, br1, "ping")
	t2, br2 := dialTunnel(t, base)
	echo(t, t2, br2, "pong")
	st := p.State()
	if st.Tunnels == nil || st.Tunnels.Open != 2 || st.Tunnels.Gate.Inflight != 2 || st.Upstream.Inflight != 0 || st.Routes[0].Gate.Inflight != 0 {
		t.Fatalf("two tunnels open: tunnels %+v, upstream gate %d, route gate %d; want 2 tunnel slots and no request slot",
			st.Tunnels, st.Upstream.Inflight, st.Routes[0].Gate.Inflight)
	}
	// Requests still pass while tunnels are open.
	if code, _, _, body := get(t, c, base+"/"); code != 200 || body != "plain" {
		t.Fatalf("a request beside two tunnels: %d %q", code, body)
	}
	resp, body := rawRequest(t, base, wsHandshake)
	if resp.StatusCode != 503 || !strings.Contains(body, `"gate":"tunnels"`) || !strings.Contains(body, `"reason":"full"`) {
		t.Fatalf("a third tunnel: %d %q; want 503 from gate tunnels, full", resp.StatusCode, body)
	}
	// t1 goes quiet and is closed; t2 keeps talking and stays.
	deadline := time.Now().Add(5 * time.Second)
	for p.State().Tunnels.IdleClosed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a quiet tunnel was not closed")
		}
		echo(t, t2, br2, "tick")
		time.Sleep(100 * time.Millisecond)
	}
	_ = t1.SetReadDeadline(time.Now().Add(2 * time.Second))
	var ne net.Error
	if _, err := br1.ReadByte(); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("the quiet tunnel: %v; want it closed", err)
	}
	echo(t, t2, br2, "still here")
	if n := p.CloseTunnels(); n != 1 {
		t.Fatalf("CloseTunnels cut %d, want 1", n)
	}
	_ = t2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br2.ReadByte(); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("a tunnel cut at shutdown: %v; want it closed", err)
	}
	waitIdle(t, p, 5*time.Second)
	g := gateByName(p, GateTunnels)
	if s := g.Stats(); s.Completed[admit.OutcomeCanceled] != 2 || s.Completed[admit.OutcomePanic] != 0 {
		t.Fatalf("tunnels gate completions %v; want both cut tunnels canceled", s.Completed)
	}
	if st := p.State().Tunnels; st.ShutdownCut != 1 || st.IdleClosed != 1 || st.Open != 0 {
		t.Fatalf("tunnels %+v", st)
	}
	if n := budgeted.Load(); n != 0 {
		t.Fatalf("%d handshakes carried a Request-Timeout, which the upstream would apply to the tunnel", n)
	}
}

// TestH2CUpgradeNeverForwarded: an h2c upgrade is served as the plain
// HTTP/1.1 request it also is, even by an upstream that would accept it
// and on a route that tunnels WebSockets.
func TestH2CUpgradeNeverForwarded(t *testing.T) {
	var asked atomic.Int64
	up := echoUpgrader(t, &asked)
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, Routes: []Route{{Name: "ws", PathPrefix: "/ws", Upgrades: []string{"websocket"}}}})
	base, _ := front(t, p)
	for _, path := range []string{"/", "/ws"} {
		resp, body := rawRequest(t, base, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"+
			"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
		if resp.StatusCode != 200 || body != "plain" {
			t.Fatalf("h2c offer to %s: %d %q; want the plain answer", path, resp.StatusCode, body)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the upstream was offered h2c %d times", n)
	}
}

func TestDecideUpgrade(t *testing.T) {
	ws := []string{"websocket"}
	for _, tc := range []struct {
		offered, allowed []string
		want             upgradeDecision
	}{
		{nil, ws, upgradePlain},
		{[]string{"websocket"}, ws, upgradeTunnel},
		{[]string{"websocket"}, nil, upgradeRefuse},
		{[]string{"h2c"}, []string{"h2c"}, upgradePlain},
		{[]string{"websocket", "h2c"}, ws, upgradePlain},
		{[]string{"websocket", "irc"}, ws, upgradeRefuse},
	} {
		if got := decideUpgrade(tc.offered, tc.allowed); got != tc.want {
			t.Errorf("decideUpgrade(%v, %v) = %d, want %d", tc.offered, tc.allowed, got, tc.want)
		}
	}
	h := http.Header{"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"WebSocket/13, h2c"}}
	if !isUpgrade(h) || strings.Join(upgradeProtocols(h), " ") != "websocket h2c" {
		t.Fatalf("isUpgrade %v, protocols %v", isUpgrade(h), upgradeProtocols(h))
	}
	if isUpgrade(http.Header{"Upgrade": {"websocket"}}) {
		t.Fatal("an Upgrade header without the Connection token is an upgrade")
	}
}

// TestStreamingRouteHoldsOnlyItsGate: a streaming route's long answers
// hold the route's own gate, never the shared upstream gate, so short
// requests keep every upstream slot.
func TestStreamingRouteHoldsOnlyItsGate(t *testing.T) {
	b := newBlock()
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			b.ServeHTTP(w, r)
			return
		}
		_, _ = io.WriteString(w, "short")
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 1,
		Routes: []Route{{Name: "events", PathPrefix: "/events", MaxInflight: 2, Streaming: true}}})
	base, c := front(t, p)
	waits := []func(){background(c, http.MethodGet, base+"/events"), background(c, http.MethodGet, base+"/events")}
	b.next(t)
	b.next(t)
	if st := p.State(); st.Routes[0].Gate.Inflight != 2 || st.Upstream.Inflight != 0 {
		t.Fatalf("two streams: route gate %d, upstream gate %d; want 2 and 0", st.Routes[0].Gate.Inflight, st.Upstream.Inflight)
	}
	if code, _, _, body := get(t, c, base+"/short"); code != 200 || body != "short" {
		t.Fatalf("a short request beside two streams: %d %q", code, body)
	}
	if code, rb, _, _ := get(t, c, base+"/events"); code != 503 || rb.Gate != "events" {
		t.Fatalf("a third stream: %d %+v; want 503 from its route's gate", code, rb)
	}
	close(b.release)
	for _, w := range waits {
		w()
	}
}

// FuzzUpgradeAndCacheHeaders: the request path's header parsers never
// panic, an h2c offer is never tunnelled whatever a route allows, and an
// answer whose Cache-Control names private is never stored.
func FuzzUpgradeAndCacheHeaders(f *testing.F) {
	f.Add("Upgrade", "websocket", "max-age=60", "Accept-Encoding")
	f.Add("keep-alive, Upgrade", "h2c, websocket/13", "Private", "*")
	f.Add("upgrade", "", "no-store,", ",,")
	f.Add("Upgrade", "\x00h2c", "private=\"x\"", "Accept-Language, Cookie")
	f.Fuzz(func(t *testing.T, connection, upgrade, cacheControl, vary string) {
		h := http.Header{"Connection": {connection}, "Upgrade": {upgrade}}
		offered := upgradeProtocols(h)
		_ = isUpgrade(h)
		for _, allowed := range [][]string{nil, {"websocket"}, offered} {
			if d := decideUpgrade(offered, allowed); d == upgradeTunnel {
				for _, p := range offered {
					if p == protoH2C {
						t.Fatalf("offer %q tunnelled on a route allowing %q", upgrade, allowed)
					}
				}
			}
		}
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Cache-Control": {cacheControl}, "Vary": {vary}}}
		if storable(r, resp, 1<<20) {
			for _, d := range directives([]string{cacheControl}) {
				if d == "private" || d == "no-store" || d == "no-cache" {
					t.Fatalf("stored with Cache-Control %q", cacheControl)
				}
			}
		}
		_ = varyValues(r, varyNames(resp.Header))
	})
}
