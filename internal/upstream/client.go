package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/hfield"
)

// Defaults for zero Config fields.
const (
	// DefaultMaxIdlePerHost is how many idle keep-alive connections are
	// kept per upstream: a proxy's gate bounds its requests in flight to
	// tens, and every one of them finds a warm connection.
	DefaultMaxIdlePerHost = 128
	// DefaultDialTimeout bounds a connection attempt (net/http's
	// DefaultTransport: 30 s; an upstream on the same network answers a
	// SYN in milliseconds or not at all).
	DefaultDialTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a pooled connection idle this long,
	// before most servers close theirs (nginx: 75 s, net/http: none).
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxResponseHeaderBytes bounds a response head.
	DefaultMaxResponseHeaderBytes = 1 << 20
)

// Config configures a Client. The zero Config is valid: every field says
// what zero and negative mean.
type Config struct {
	// MaxIdlePerHost bounds the idle keep-alive connections kept per
	// upstream (scheme, host and port); a connection released beyond it
	// is closed. The connections in use are bounded by the caller (the
	// proxy's gates): open connections are at most those in use plus
	// MaxIdlePerHost. 0 means DefaultMaxIdlePerHost; negative keeps
	// none (a connection per request).
	MaxIdlePerHost int
	// DialTimeout bounds the connection (and, for https, the TLS
	// handshake). 0 means DefaultDialTimeout; negative means none (the
	// request's context still bounds it).
	DialTimeout time.Duration
	// HeaderTimeout bounds the wait for the response's head once the
	// request's head is written. 0 or negative means none.
	HeaderTimeout time.Duration
	// BodyIdleTimeout bounds each wait for bytes of the response body
	// (not the whole body: a long download that keeps moving is not
	// cut). 0 or negative means none.
	BodyIdleTimeout time.Duration
	// IdleTimeout closes a pooled connection idle this long. 0 means
	// DefaultIdleTimeout; negative means none.
	IdleTimeout time.Duration
	// MaxResponseHeaderBytes bounds a response head; a larger one fails
	// the request. 0 means DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int
	// TLS configures connections to https:// upstreams (ALPN is set to
	// http/1.1, and ServerName to the host when empty). Nil means the
	// zero tls.Config.
	TLS *tls.Config
	// Dial makes the connections. Nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is an HTTP/1.1 client with a keep-alive pool per upstream: an
// http.RoundTripper. Safe for concurrent use; the zero Client is not
// usable (New makes one).
type Client struct {
	cfg    Config
	dialer net.Dialer

	mu     sync.Mutex
	hosts  map[string]*hostPool
	closed bool
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.MaxIdlePerHost == 0 {
		cfg.MaxIdlePerHost = DefaultMaxIdlePerHost
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxResponseHeaderBytes <= 0 {
		cfg.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	c := &Client{cfg: cfg, hosts: map[string]*hostPool{}}
	c.dialer.KeepAlive = 30 * time.Second
	return c
}

// Errors of a round trip the client refuses to send or to read.
var (
	// ErrInvalidRequest: the request cannot be written as exactly one
	// HTTP/1.1 message (a bad method, target, Host or field).
	ErrInvalidRequest = errors.New("upstream: invalid request")
	// ErrBadResponse: the upstream's answer is not one well-framed
	// HTTP/1.x response (the connection is closed, never reused).
	ErrBadResponse = errors.New("upstream: malformed response")
	// ErrBodyLength: the request body did not have the length its
	// ContentLength declared (the upstream never got a whole message).
	ErrBodyLength = errors.New("upstream: request body length differs from its ContentLength")
	errClosed     = errors.New("upstream: client closed")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// RoundTrip sends req and returns the upstream's response, whose Body
// the caller must close (at its end the connection goes back to the
// pool). It honours http.RoundTripper's contract: req is not modified,
// and its Body is closed, also on errors. A request that failed on a
// reused connection before any byte of an answer came back is sent
// again on a new connection when it can be (no body, or GetBody, and an
// idempotent method or an Idempotency-Key), as net/http does.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.RoundTripLimits(req, Limits{})
}

// Limits are one request's own bounds, beside the Client's Config: where
// both bound the same wait, the sooner end wins. They are socket
// deadlines, so a caller that times its attempts needs no context and
// no timer of its own for them.
type Limits struct {
	// HeaderTimeout bounds the wait for the answer's head from the call
	// to RoundTripLimits, the whole way there counted: a connection
	// dialed, the request sent, the wait. A request still waiting then
	// fails with ErrHeaderTimeout. 0 or negative means none.
	HeaderTimeout time.Duration
	// HeaderDeadline is the same bound as a time (the zero time: none);
	// with both, the sooner end wins.
	HeaderDeadline time.Time
	// BodyIdleTimeout bounds each wait for bytes of the answer's body,
	// as Config.BodyIdleTimeout does (ErrBodyIdle). 0 or negative means
	// none.
	BodyIdleTimeout time.Duration
	// Answer, when set, receives the fields of an answer with a status
	// from 200 to 399 that announces no trailers, in the order the
	// upstream sent them, names canonical, the framing fields the client
	// consumed left out (Transfer-Encoding, a repeated Content-Length);
	// that answer's Header is then nil. It is for a caller that forwards
	// the head as it came (a proxy), which so builds no http.Header. Any
	// other answer (an error status, which a retry policy reads
	// Retry-After from; a 101; one with trailers) has its Header as
	// usual and leaves Answer empty. Answer is the caller's, written by
	// one round trip at a time, and its strings stay valid after the
	// exchange.
	Answer *hfield.List
}

// headerBound is when lim's head must have come (zero: no bound) and
// how much sooner than that a deadline already on the socket may end
// (a hundredth of the time given), so that a connection's every
// exchange need not move its deadline.
func (lim *Limits) headerBound() headerBound {
	dl := lim.HeaderDeadline
	if lim.HeaderTimeout <= 0 {
		return headerBound{at: dl}
	}
	now := time.Now()
	if at := now.Add(lim.HeaderTimeout); dl.IsZero() || at.Before(dl) {
		dl = at
	}
	return headerBound{dl, max(dl.Sub(now)/100, 0)}
}

// CancelWatcher is a request context that can call one function when
// it ends, which the client uses instead of context.AfterFunc (a
// context, a closure and a registration in the parent per request). A
// context that is not one, or whose WatchCancel reports false, is
// watched with context.AfterFunc.
type CancelWatcher interface {
	context.Context
	// WatchCancel arranges for f to be called once when the context
	// ends (at once if it has ended). It reports false when it cannot
	// (a watch is in place already).
	WatchCancel(f func()) bool
	// StopWatch ends the watch WatchCancel started. It reports false
	// when f has been called or is being called.
	StopWatch() bool
}

// RoundTripLimits is RoundTrip with the request's own Limits.
func (c *Client) RoundTripLimits(req *http.Request, lim Limits) (*http.Response, error) {
	return c.RoundTripFields(req, nil, lim)
}

// RoundTripFields is RoundTripLimits for a request whose header fields
// are, all or some, in fields (nil: none): they are written in their
// order after those of req.Header, which may hold others (both are
// sent). A request with fields gets no default User-Agent: the caller's
// fields are the whole head. fields must not change until the round
// trip returns.
func (c *Client) RoundTripFields(req *http.Request, fields *Fields, lim Limits) (*http.Response, error) {
	var o outbound // on the stack: see exchange
	w := &o
	if err := c.prepare(req, fields, w); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	w.answer = lim.Answer
	hp, err := c.host(req.URL)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	ctx := req.Context()
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	hb := lim.headerBound()
	idle := c.cfg.BodyIdleTimeout
	if t := lim.BodyIdleTimeout; t > 0 && (idle <= 0 || t < idle) {
		idle = t
	}
	for try := 0; ; try++ {
		cn, err := hp.get(ctx, try > 0, body == nil, hb.at)
		if err != nil {
			if body != nil {
				body.Close()
			}
			return nil, err
		}
		resp, err := cn.roundTrip(ctx, req, w, body, hb, idle)
		if err == nil {
			return resp, nil
		}
		if err == errStale && ctx.Err() == nil {
			// Nothing was sent on it: another connection, as get
			// does when its look finds one closed.
			try--
			continue
		}
		var ne *notAnsweredError
		if try > 0 || !cn.reused || !errors.As(err, &ne) || !replayable(req) || ctx.Err() != nil {
			return nil, err
		}
		// A stale keep-alive connection: the upstream closed it as this
		// request went out. Send it once more on a fresh one.
		if body != nil {
			if body, err = req.GetBody(); err != nil {
				return nil, err
			}
			if body == http.NoBody {
				body = nil
			}
		}
	}
}

// replayable reports whether a request may be sent again after a
// connection failed under it, net/http's rule: no body (or one GetBody
// can make again) and an idempotent method or an Idempotency-Key.
func replayable(r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody && r.GetBody == nil {
		return false
	}
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := r.Header["Idempotency-Key"]
	_, b := r.Header["X-Idempotency-Key"]
	return a || b
}

func closeRequestBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}

// CloseIdleConnections closes the pooled connections not in use.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	hosts := make([]*hostPool, 0, len(c.hosts))
	for _, hp := range c.hosts {
		hosts = append(hosts, hp)
	}
	c.mu.Unlock()
	for _, hp := range hosts {
		hp.closeIdle()
	}
}

// Close closes the idle connections and makes later round trips fail;
// connections in use close when their answer ends.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.CloseIdleConnections()
}

// host returns the pool for u's upstream.
func (c *Client) host(u *url.URL) (*hostPool, error) {
	secure := u.Scheme == "https"
	addr := u.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		if secure {
			addr = net.JoinHostPort(strings.Trim(addr, "[]"), "443")
		} else {
			addr = net.JoinHostPort(strings.Trim(addr, "[]"), "80")
		}
	}
	key := addr
	if secure {
		key = "https://" + addr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	hp := c.hosts[key]
	if hp == nil {
		hp = &hostPool{c: c, addr: addr, secure: secure}
		c.hosts[key] = hp
	}
	return hp, nil
}

// hostPool is one upstream's connections: the idle ones, newest last.
type hostPool struct {
	c      *Client
	addr   string
	secure bool

	mu   sync.Mutex
	idle []*conn
}

// get returns an idle connection that is still open, or a new one
// (always a new one with fresh). With later, the look at an idle
// connection's socket is left to the exchange (usable).
func (hp *hostPool) get(ctx context.Context, fresh, later bool, deadline time.Time) (*conn, error) {
	if !fresh {
		for {
			cn := hp.takeIdle()
			if cn == nil {
				break
			}
			if cn.usable(later) {
				return cn, nil
			}
			cn.close()
		}
	}
	return hp.dial(ctx, deadline)
}

func (hp *hostPool) takeIdle() *conn {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	n := len(hp.idle)
	if n == 0 {
		return nil
	}
	cn := hp.idle[n-1]
	hp.idle[n-1] = nil
	hp.idle = hp.idle[:n-1]
	return cn
}

// put returns a connection whose exchange ended cleanly to the pool, or
// closes it when the pool is full.
func (hp *hostPool) put(cn *conn) {
	cfg := &hp.c.cfg
	hp.mu.Lock()
	if len(hp.idle) >= cfg.MaxIdlePerHost {
		hp.mu.Unlock()
		cn.close()
		return
	}
	if cfg.IdleTimeout > 0 {
		cn.idleSince = time.Now()
	}
	cn.reused = true
	hp.idle = append(hp.idle, cn)
	hp.mu.Unlock()
	hp.c.mu.Lock()
	closed := hp.c.closed
	hp.c.mu.Unlock()
	if closed {
		hp.closeIdle()
	}
}

func (hp *hostPool) closeIdle() {
	hp.mu.Lock()
	idle := hp.idle
	hp.idle = nil
	hp.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// dial opens a new connection, by the request's header deadline when it
// has one (past it, the error is ErrHeaderTimeout).
func (hp *hostPool) dial(ctx context.Context, deadline time.Time) (cn *conn, err error) {
	cfg := &hp.c.cfg
	if cfg.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.DialTimeout)
		defer cancel()
	}
	if !deadline.IsZero() {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
		defer func() {
			if err != nil && parent.Err() == nil && !time.Now().Before(deadline) {
				err = ErrHeaderTimeout
			}
		}()
	}
	var nc net.Conn
	if cfg.Dial != nil {
		nc, err = cfg.Dial(ctx, "tcp", hp.addr)
	} else {
		nc, err = hp.c.dialer.DialContext(ctx, "tcp", hp.addr)
	}
	if err != nil {
		return nil, err
	}
	if hp.secure {
		tc := &tls.Config{}
		if cfg.TLS != nil {
			tc = cfg.TLS.Clone()
		}
		if tc.ServerName == "" {
			host, _, _ := net.SplitHostPort(hp.addr)
			tc.ServerName = host
		}
		tc.NextProtos = []string{"http/1.1"}
		tl := tls.Client(nc, tc)
		if err := tl.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tl
	}
	return newConn(hp, nc), nil
}
