package connlimit

import (
	"context"
	"net"
	"net/http"
	"time"
)

// ConnState is an http.ConnState hook that counts HTTP/1.x connections
// the server closes because they sat idle past the server's IdleTimeout
// (Stats.ClosedIdle) or did not deliver a request's headers within its
// ReadHeaderTimeout (Stats.ClosedHeaderTimeout). ConfigureServer
// installs it; install it yourself when you build the http.Server
// another way. Connections that did not come from this Listener (or a
// *tls.Conn over one) are ignored.
//
// How a close is told apart: net/http waits for a keep-alive
// connection's next request under the idle deadline while the state is
// still StateIdle, reads the request's headers under the header
// deadline, and switches to StateActive as soon as any byte of a request
// was read, even when the read then failed. So, with the last read ended
// by a deadline:
//
//   - StateIdle -> StateClosed, no byte since idle: an idle timeout;
//   - StateIdle -> StateClosed, some bytes but fewer than a request line's
//     start: a header timeout;
//   - StateNew -> StateClosed (nothing sent at all): a header timeout;
//   - StateActive -> StateClosed where the deadline hit before the switch
//     to StateActive: a header timeout. A deadline after the switch is
//     the handler's business (ReadTimeout, net/http's own background
//     read) and is not counted.
//
// A client that closes an idle connection ends the read with EOF, and
// Server.Shutdown closes it without a deadline: neither counts. HTTP/2
// connections manage their own idle timer and are not counted.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c := l.ownConn(nc)
	if c == nil {
		return
	}
	switch state {
	case http.StateNew, http.StateIdle:
		c.readSinceIdle.Store(false)
		c.readTimedOut.Store(false)
		c.bodyDeadline.Store(0)
	case http.StateActive:
		c.timedOutToActive.Store(c.readTimedOut.Load())
	case http.StateClosed:
		if !c.closeCounted.CompareAndSwap(false, true) {
			break
		}
		switch http.ConnState(c.httpState.Load()) {
		case http.StateIdle:
			switch {
			case !c.readTimedOut.Load():
			case c.readSinceIdle.Load():
				l.c.closedHeaderTimeout.Add(1)
			default:
				l.c.closedIdle.Add(1)
			}
		case http.StateNew:
			if c.readTimedOut.Load() {
				l.c.closedHeaderTimeout.Add(1)
			}
		case http.StateActive:
			if c.timedOutToActive.Load() {
				l.c.closedHeaderTimeout.Add(1)
			}
		}
	}
	c.httpState.Store(int32(state))
}

// ownConn unwraps nc (through *tls.Conn and anything else with NetConn)
// to the *Conn this Listener returned, or nil.
func (l *Listener) ownConn(nc net.Conn) *Conn {
	for nc != nil {
		if c, ok := nc.(*Conn); ok {
			if c.l == l {
				return c
			}
			return nil
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = u.NetConn()
	}
	return nil
}

// Timeouts are a Listener's HTTP timeouts with the defaults filled in;
// zero means none. For an HTTP server other than net/http, which applies
// them itself (ConfigureServer does it for net/http).
type Timeouts struct {
	ReadHeader, Idle, Send, Body time.Duration
}

// Timeouts returns the Listener's HTTP timeouts (Config.ReadHeaderTimeout,
// IdleTimeout, SendTimeout, BodyTimeout, defaults filled in).
func (l *Listener) Timeouts() Timeouts {
	pos := func(d time.Duration) time.Duration { return max(d, 0) }
	return Timeouts{
		ReadHeader: pos(l.cfg.readHeaderTimeout),
		Idle:       pos(l.cfg.idleTimeout),
		Send:       pos(l.cfg.sendTimeout),
		Body:       pos(l.cfg.bodyTimeout),
	}
}

// ConfigureServer sets srv.ReadHeaderTimeout and srv.IdleTimeout from
// the Config (defaults filled in; negative means none, as in
// http.Server), chains ConnState in front of any hook srv already has,
// and wraps srv.Handler (nil means http.DefaultServeMux) so that each
// response runs under SendTimeout and each declared request body under
// BodyTimeout, both renewed on progress. Call it once, after setting
// srv.Handler and before srv.Serve(l).
func (l *Listener) ConfigureServer(srv *http.Server) {
	srv.ReadHeaderTimeout = l.cfg.readHeaderTimeout
	srv.IdleTimeout = l.cfg.idleTimeout
	next := srv.ConnState
	srv.ConnState = func(nc net.Conn, state http.ConnState) {
		l.ConnState(nc, state)
		if next != nil {
			next(nc, state)
		}
	}
	handler := srv.Handler
	if handler == nil {
		handler = http.DefaultServeMux
	}
	srv.Handler = l.withDeadlines(handler)
	prevCtx := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		if prevCtx != nil {
			ctx = prevCtx(ctx, nc)
		}
		return l.connContext(ctx, nc)
	}
}
