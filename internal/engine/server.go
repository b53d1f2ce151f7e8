package engine

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for zero Config fields.
const (
	// DefaultMaxHeaderBytes bounds a request head (request line and
	// fields): nginx's default large header buffers hold 32 KiB, and
	// a head beyond this is answered 431.
	DefaultMaxHeaderBytes = 64 << 10
	// initialReadBuffer is the read buffer a connection starts with;
	// it grows to MaxHeaderBytes only for a head that needs it.
	initialReadBuffer = 4 << 10
	// maxPipelined is how many requests one connection may have answered
	// from bytes already read before its answers are written.
	maxPipelined = 16
	// maxTurn is how many answers one connection's goroutine gives
	// before it yields its P (runtime.Gosched): one connection whose
	// reads never block cannot hold the process while other goroutines
	// (admitted work) are ready to run.
	maxTurn = 16
	// maxDrainBody is how much of a request body the engine reads and
	// drops after a handler left it unread, to keep the connection (as
	// net/http does); more closes the connection instead.
	maxDrainBody = 256 << 10
	// lingerTimeout bounds the read-and-drop after a final answer, so the
	// close does not reset the connection before the client read it.
	lingerTimeout = 500 * time.Millisecond
)

// Config configures a Server. The zero Config is valid: every request
// goes to a handler answering 404, no timeouts.
type Config struct {
	// Handler serves every request that Fast does not answer, through
	// the engine's net/http bridge (an *http.Request and an
	// http.ResponseWriter, as net/http would give it). Nil means
	// http.NotFoundHandler().
	Handler http.Handler

	// Fast, if not nil, is asked first for every request and answers
	// the ones it can without an *http.Request: the shared core's fast
	// path. Nil means every request goes to Handler.
	Fast FastHandler

	// FastBodies makes the engine ask Fast also for requests that carry
	// a body, expect 100 Continue or ask to upgrade (a proxy decides
	// those too: a refused POST costs no more than a refused GET).
	// False: those go to Handler without asking Fast.
	FastBodies bool

	// ReadHeaderTimeout bounds the time from a request's first byte (or,
	// for a new connection, from the accept) to the end of its head.
	// Zero or negative means none.
	ReadHeaderTimeout time.Duration

	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request. Zero or negative means none.
	IdleTimeout time.Duration

	// SendTimeout is the longest time between two successful writes of a
	// response: renewed on every write, not a cap on the response. Zero or
	// negative means none.
	SendTimeout time.Duration

	// BodyTimeout is the longest time between two successful reads of a
	// request body. Zero or negative means none.
	BodyTimeout time.Duration

	// MaxHeaderBytes bounds a request head; a larger one is answered 431
	// and the connection closed. Zero means DefaultMaxHeaderBytes.
	MaxHeaderBytes int

	// ConnState, if not nil, is called on every connection state change,
	// with net/http's states and at the same points: StateNew on accept,
	// StateActive when a request's first byte arrives, StateIdle when an
	// answer is done and the connection waits for the next, StateClosed
	// when it closes.
	ConnState func(net.Conn, http.ConnState)

	// ErrorLog receives handler panics, as net/http's ErrorLog does. Nil
	// means discard.
	ErrorLog *log.Logger
}

// A FastHandler answers requests without an *http.Request. ServeFast
// either writes a complete answer through w and returns true, or writes
// nothing and returns false, and the request goes to Config.Handler.
// Everything r returns is valid only until ServeFast returns.
type FastHandler interface {
	ServeFast(w *Response, r *Request) bool
}

// Server is an HTTP/1.1 server. Its methods mirror http.Server's Serve,
// Shutdown, Close and SetKeepAlivesEnabled. It is safe for concurrent
// use.
type Server struct {
	cfg       Config
	handler   http.Handler
	maxHeader int

	mu        sync.Mutex
	listeners map[*net.Listener]struct{}
	conns     map[*conn]struct{}
	// loopReads counts the read loop's system calls on connections that
	// closed (tests check that a request costs one).
	loopReads atomic.Uint64
	sweeping  atomic.Bool   // the read loop's sweeper runs (loop.go)
	drained   chan struct{} // closed when conns empties during shutdown; nil before

	shutting  atomic.Bool
	noKeepAlv atomic.Bool
	date      atomic.Pointer[dateLine]

	// baseCtx is every bridged request's root context: it carries
	// http.ServerContextKey, as net/http's do, so a handler that checks
	// it runs under a server behaves as it would under net/http
	// (httputil.ReverseProxy then aborts an answer the upstream broke
	// off with http.ErrAbortHandler). The *http.Server under it serves
	// nothing.
	baseCtx context.Context
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, handler: cfg.Handler, maxHeader: cfg.MaxHeaderBytes,
		listeners: map[*net.Listener]struct{}{}, conns: map[*conn]struct{}{}}
	if s.handler == nil {
		s.handler = http.NotFoundHandler()
	}
	if s.maxHeader <= 0 {
		s.maxHeader = DefaultMaxHeaderBytes
	}
	s.baseCtx = context.WithValue(context.Background(), http.ServerContextKey, &http.Server{})
	return s
}

// Serve accepts connections on l and serves each on its own goroutine.
// It returns http.ErrServerClosed after Shutdown or Close, else the
// error that ended Accept. Temporary Accept errors are retried after a
// pause (5 ms doubling to 1 s), as net/http does.
func (s *Server) Serve(l net.Listener) error {
	if !s.trackListener(&l, true) {
		return http.ErrServerClosed
	}
	defer s.trackListener(&l, false)
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, nc)
		if !s.trackConn(c, true) {
			_ = nc.Close()
			return http.ErrServerClosed
		}
		c.setState(http.StateNew)
		go c.serve()
	}
}

func isTemporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

func (s *Server) trackListener(l *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.listeners[l] = struct{}{}
	} else {
		delete(s.listeners, l)
	}
	return true
}

func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.conns[c] = struct{}{}
		return true
	}
	delete(s.conns, c)
	if len(s.conns) == 0 && s.drained != nil {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
	return true
}

// Shutdown stops accepting, closes idle connections, and waits until
// every connection has finished its request in progress and closed, or
// ctx ends (then it returns ctx's error and leaves the rest open, as
// http.Server.Shutdown does). Answers written from now on carry
// Connection: close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.mu.Lock()
	err := s.closeListenersLocked()
	if s.drained == nil {
		s.drained = make(chan struct{})
		if len(s.conns) == 0 {
			close(s.drained)
		}
	}
	drained := s.drained
	s.mu.Unlock()

	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		s.closeIdle(true)
		select {
		case <-drained:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.shutting.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.closeListenersLocked()
	for c := range s.conns {
		c.closeNow()
	}
	return err
}

func (s *Server) closeListenersLocked() error {
	var err error
	for l := range s.listeners {
		if cerr := (*l).Close(); cerr != nil && err == nil {
			err = cerr
		}
		delete(s.listeners, l)
	}
	return err
}

// SetKeepAlivesEnabled(false) makes every later answer carry
// Connection: close and closes the idle connections, as net/http's does.
func (s *Server) SetKeepAlivesEnabled(v bool) {
	s.noKeepAlv.Store(!v)
	if !v {
		s.closeIdle(false)
	}
}

// closeIdle closes connections waiting for their next request; with
// stale it also closes new connections that sent nothing for 5 s.
func (s *Server) closeIdle(stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for c := range s.conns {
		if c.claimIdle(stale, now) {
			c.closeNow()
		}
	}
}

// keepAlives reports whether answers may keep their connection open.
func (s *Server) keepAlives() bool { return !s.noKeepAlv.Load() && !s.shutting.Load() }

// dateLine is a rendered "Date: ...\r\n" line for one second.
type dateLine struct {
	unix int64
	line []byte
}

// dateFor returns the Date line for now, rendered once per second.
func (s *Server) dateFor(now time.Time) []byte {
	sec := now.Unix()
	if d := s.date.Load(); d != nil && d.unix == sec {
		return d.line
	}
	b := make([]byte, 0, 40)
	b = append(b, "Date: "...)
	b = now.UTC().AppendFormat(b, http.TimeFormat)
	b = append(b, "\r\n"...)
	s.date.Store(&dateLine{unix: sec, line: b})
	return b
}
