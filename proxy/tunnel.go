package proxy

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// Upgrades (WebSocket and the like) become tunnels: after the upstream's
// 101 the proxy copies bytes both ways until either side closes. A tunnel
// lives for minutes or hours, so it must not hold a request slot:
//
//   - a request asking to upgrade is refused (403 UPGRADE_REFUSED) unless
//     the route it matches lists the protocol in Route.Upgrades;
//   - an allowed one takes a slot of the gate "tunnels" (Config.MaxTunnels)
//     instead of the route's and the upstream gate, for the tunnel's whole
//     life, handshake included (it still passes the route's quota);
//   - a tunnel with no byte either way for Config.TunnelIdleTimeout is
//     closed;
//   - at shutdown the tunnels still open are cut and counted
//     (CloseTunnels): the drain waits for requests, not for tunnels;
//   - an h2c upgrade is never forwarded: the request is served as the
//     plain HTTP/1.1 request it also is (RFC 9113 lets a server ignore the
//     offer), so HTTP/2 streams cannot slip past the gates inside one.

// isUpgrade reports whether h asks for a protocol upgrade: an Upgrade
// header and the upgrade token in Connection, as net/http/httputil reads
// it (without the token, Upgrade is an ordinary hop-by-hop header and is
// dropped).
func isUpgrade(h http.Header) bool {
	up, ok := h["Upgrade"]
	return ok && len(up) > 0 && up[0] != "" && httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade")
}

// upgradeProtocols returns the protocols an Upgrade header offers, lower
// case, versions dropped ("websocket", "h2c").
func upgradeProtocols(h http.Header) []string {
	var out []string
	for _, v := range h["Upgrade"] {
		for p := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), "/")
			if name != "" {
				out = append(out, strings.ToLower(name))
			}
		}
	}
	return out
}

// upgradeDecision is what the proxy does with a request that asks to
// upgrade to offered (see upgradeProtocols) on a route allowing allowed:
// serve it as a plain request (it offers h2c, never tunnelled), tunnel it
// (every protocol offered is allowed), or refuse it.
type upgradeDecision uint8

const (
	upgradePlain upgradeDecision = iota
	upgradeTunnel
	upgradeRefuse
)

func decideUpgrade(offered, allowed []string) upgradeDecision {
	if len(offered) == 0 {
		return upgradePlain
	}
	for _, p := range offered {
		if p == protoH2C {
			return upgradePlain
		}
	}
	for _, p := range offered {
		ok := false
		for _, a := range allowed {
			if strings.EqualFold(a, p) {
				ok = true
				break
			}
		}
		if !ok {
			return upgradeRefuse
		}
	}
	return upgradeTunnel
}

// protoH2C is cleartext HTTP/2's upgrade token.
const protoH2C = "h2c"

// Defaults for tunnels.
const (
	DefaultMaxTunnels        = 1024
	DefaultTunnelIdleTimeout = 5 * time.Minute
)

// codeUpgradeRefused is the error code of a refused upgrade.
const codeUpgradeRefused = "UPGRADE_REFUSED"

// refuseUpgrade answers an upgrade no route allows.
func refuseUpgrade(w http.ResponseWriter, offered []string) {
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusForbidden, `{"error":"`+codeUpgradeRefused+`","upgrade":"`+jsonSafe(strings.Join(offered, ","))+`"}`+"\n")
}

// jsonSafe keeps only bytes that need no escaping in a JSON string.
func jsonSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '?'
		}
		return r
	}, s)
}

// tunnels is the set of open tunnels and their gate.
type tunnels struct {
	gates  *gateSet
	mw     *httpgate.Middleware // refuses without a stale page or a Request-Timeout
	idle   time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	open   map[*tunnel]struct{}
	closed bool // shut down: every new tunnel is cut at once

	idleClosed, shutdownCut atomic.Uint64
}

// tunnel is one upgraded connection pair.
type tunnel struct {
	set     *tunnels
	client  net.Conn           // the hijacked client connection
	backend io.ReadWriteCloser // the upstream's side
	last    atomic.Int64       // unix nanoseconds of the last byte either way
	timer   *time.Timer
	cut     atomic.Uint32 // why it was cut: 0 not, cutIdle, cutShutdown
}

const (
	cutIdle = 1 + iota
	cutShutdown
)

// touch notes traffic.
func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// start registers a tunnel whose both sides are connected and starts its
// idle timer; after shutdown it is cut at once.
func (s *tunnels) start(t *tunnel) {
	t.touch()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		t.close(cutShutdown)
		return
	}
	if s.open == nil {
		s.open = map[*tunnel]struct{}{}
	}
	s.open[t] = struct{}{}
	if s.idle > 0 {
		t.timer = time.AfterFunc(s.idle, t.checkIdle)
	}
	s.mu.Unlock()
}

// end unregisters t once its copying is over.
func (s *tunnels) end(t *tunnel) {
	s.mu.Lock()
	delete(s.open, t)
	if t.timer != nil {
		t.timer.Stop()
	}
	s.mu.Unlock()
}

// checkIdle cuts the tunnel if it has been quiet for the idle timeout,
// else waits for the rest of it.
func (t *tunnel) checkIdle() {
	quiet := time.Since(time.Unix(0, t.last.Load()))
	if quiet >= t.set.idle {
		t.close(cutIdle)
		return
	}
	t.set.mu.Lock()
	if _, open := t.set.open[t]; open {
		t.timer.Reset(t.set.idle - quiet)
	}
	t.set.mu.Unlock()
}

// close cuts both sides, once, and counts why.
func (t *tunnel) close(why uint32) {
	if !t.cut.CompareAndSwap(0, why) {
		return
	}
	switch why {
	case cutIdle:
		t.set.idleClosed.Add(1)
	case cutShutdown:
		t.set.shutdownCut.Add(1)
	}
	if t.client != nil {
		_ = t.client.Close()
	}
	if t.backend != nil {
		_ = t.backend.Close()
	}
}

// outcome is how a finished tunnel's slot is recorded: canceled when the
// proxy cut it (idle, shutdown), else by how its handshake went.
func (t *tunnel) outcome() (admit.Outcome, bool) {
	if t.cut.Load() != 0 {
		return admit.OutcomeCanceled, true
	}
	return 0, false
}

// CloseTunnels cuts every open tunnel and refuses to keep new ones, for
// shutdown: http.Server.Shutdown neither waits for nor closes hijacked
// connections. It logs and returns how many it cut. Safe to call more
// than once (later calls cut the tunnels that opened since) and when no
// route allows upgrades (it cuts nothing).
func (p *Proxy) CloseTunnels() int {
	s := p.tunnels
	if s == nil {
		return 0
	}
	s.mu.Lock()
	s.closed = true
	open := make([]*tunnel, 0, len(s.open))
	for t := range s.open {
		open = append(open, t)
	}
	s.mu.Unlock()
	for _, t := range open {
		t.close(cutShutdown)
	}
	if len(open) > 0 && s.logger != nil {
		s.logger.Warn("cut upgrade tunnels at shutdown", "tunnels", len(open))
	}
	return len(open)
}

// forwardTunnel proxies an allowed upgrade, holding a slot of the tunnels
// gate (taken by the caller's Guard) for the tunnel's life.
func (p *Proxy) forwardTunnel(w http.ResponseWriter, r *http.Request, rt *route) {
	// No call deadline: the upstream would read the Request-Timeout it
	// propagates as the tunnel's lifetime. The handshake waits at most
	// HeaderTimeout per attempt.
	c := newCall(r, rt, 0, p.now())
	t := &tunnel{set: p.tunnels}
	c.tunnel = t
	returned := false
	defer func() {
		c.returned.Store(true)
		p.tunnels.end(t)
		if o, ok := t.outcome(); ok {
			httpgate.SetOutcome(r.Context(), o)
		} else if o, ok := c.abortOutcome(); ok && !returned {
			httpgate.SetOutcome(r.Context(), o) // an answer (not a 101) aborted midway
		}
	}()
	p.rp.ServeHTTP(&tunnelWriter{ResponseWriter: w, t: t}, r.WithContext(c))
	returned = true
}

// tunnelWriter hands the ReverseProxy the client's connection, wrapped to
// note traffic, when it switches protocols.
type tunnelWriter struct {
	http.ResponseWriter
	t *tunnel
}

func (tw *tunnelWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(tw.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	tw.t.client = conn
	tw.t.set.start(tw.t)
	return &tunnelConn{Conn: conn, t: tw.t}, brw, nil
}

func (tw *tunnelWriter) Unwrap() http.ResponseWriter { return tw.ResponseWriter }

// tunnelConn is the client's side of a tunnel.
type tunnelConn struct {
	net.Conn
	t *tunnel
}

func (c *tunnelConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.t.touch()
	}
	return n, err
}

func (c *tunnelConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.t.touch()
	}
	return n, err
}

// CloseWrite passes the upstream's end of stream on to the client when
// the connection can half-close.
func (c *tunnelConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

var errNoHalfClose = errors.New("proxy: the client connection cannot half-close")

// tunnelBackend is the upstream's side of a tunnel.
type tunnelBackend struct {
	io.ReadWriteCloser
	t *tunnel
}

func (b *tunnelBackend) Read(p []byte) (int, error) {
	n, err := b.ReadWriteCloser.Read(p)
	if n > 0 {
		b.t.touch()
	}
	return n, err
}

func (b *tunnelBackend) Write(p []byte) (int, error) {
	n, err := b.ReadWriteCloser.Write(p)
	if n > 0 {
		b.t.touch()
	}
	return n, err
}

// TunnelState is the tunnels' part of /state.
type TunnelState struct {
	Gate GateState `json:"gate"`
	Open int       `json:"open"`
	// IdleClosed counts tunnels closed after TunnelIdleTimeout without
	// traffic; ShutdownCut those cut at shutdown.
	IdleClosed         uint64  `json:"idle_closed"`
	ShutdownCut        uint64  `json:"shutdown_cut"`
	IdleTimeoutSeconds float64 `json:"idle_timeout_seconds"`
}

func (s *tunnels) state() *TunnelState {
	s.mu.Lock()
	n := len(s.open)
	s.mu.Unlock()
	return &TunnelState{Gate: gateState(s.gates), Open: n, IdleClosed: s.idleClosed.Load(), ShutdownCut: s.shutdownCut.Load(),
		IdleTimeoutSeconds: s.idle.Seconds()}
}

// checkStreams checks a route's Upgrades and Streaming.
func (rt *Route) checkStreams() error {
	if len(rt.Upgrades) > 16 {
		return errors.New("upgrades: at most 16 protocols")
	}
	for _, u := range rt.Upgrades {
		if u == "" || strings.Contains(u, "/") || !validMethod(u) {
			return errors.New("upgrades: want protocol names such as websocket (an Upgrade header's tokens, without versions)")
		}
		if strings.EqualFold(u, protoH2C) {
			return errors.New("upgrades: h2c is never tunnelled: its HTTP/2 streams would pass no gate or quota")
		}
	}
	if rt.Streaming && rt.MaxInflight == 0 {
		return errors.New("streaming needs max_inflight: the route's own gate is the one its long answers hold")
	}
	return nil
}
