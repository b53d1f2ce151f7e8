package connlimit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxRefuseDrain bounds the input discarded from a refused connection
	// while it lingers; a client that keeps sending is cut off.
	maxRefuseDrain = 64 << 10
	// requestWait bounds the wait for a refused client's first bytes
	// before the busy reply is written anyway.
	requestWait = 100 * time.Millisecond
)

// Listener wraps a net.Listener: it admits at most MaxConns open
// connections, answers the others with a busy reply and closes them, and
// backs off on temporary Accept errors such as EMFILE.
//
// Accept must not be called after Close. All methods are safe for
// concurrent use. Closing the Listener does not close the connections it
// accepted (as with net.Listener); http.Server.Shutdown does that.
type Listener struct {
	inner net.Listener
	cfg   resolved
	c     counters
	done  chan struct{} // closed by Close; interrupts a back-off

	// full is set when a connection is rejected and cleared when the open
	// count falls back below 90% of the limit; it only gates log lines.
	full atomic.Bool

	closeOnce sync.Once
	closeErr  error

	// mu guards lingering and closed. Lingering goroutines are counted in
	// wg, which Close waits for.
	mu        sync.Mutex
	lingering map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// New wraps inner. With cfg.MaxConns zero, the limit is derived from the
// soft RLIMIT_NOFILE read now; see the package documentation. It returns
// an error wrapping ErrInvalidConfig for an out-of-range field, or
// ErrNoHeadroom when the derived limit would be below one. On error inner
// is left open.
func New(inner net.Listener, cfg Config) (*Listener, error) {
	return newListener(inner, cfg, softNoFile)
}

func newListener(inner net.Listener, cfg Config, noFile func() (uint64, error)) (*Listener, error) {
	r, err := cfg.resolve(noFile)
	if err != nil {
		return nil, err
	}
	return &Listener{
		inner:     inner,
		cfg:       r,
		done:      make(chan struct{}),
		lingering: make(map[net.Conn]struct{}),
	}, nil
}

// Listen announces on the local network address (see net.ListenConfig)
// and wraps the listener with New.
func Listen(ctx context.Context, network, address string, cfg Config) (*Listener, error) {
	// Validate first so a bad config does not bind the port.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	inner, err := lc.Listen(ctx, network, address)
	if err != nil {
		return nil, err
	}
	l, err := New(inner, cfg)
	if err != nil {
		_ = inner.Close()
		return nil, err
	}
	return l, nil
}

// MaxConns returns the limit in force (derived or configured).
func (l *Listener) MaxConns() int { return l.cfg.maxConns }

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Stats returns a snapshot of the counters.
func (l *Listener) Stats() Stats { return l.c.snapshot(l.cfg.maxConns) }

// Accept returns the next connection that fits under the limit, as a
// *Conn. Connections over the limit are answered with the busy reply and
// closed without being returned; Accept keeps accepting, so they never
// wait in the kernel's backlog. A temporary error from the inner Accept
// (EMFILE, ENFILE, ENOBUFS, ...) is counted and followed by a pause that
// doubles from MinAcceptBackoff up to MaxAcceptBackoff, then Accept tries
// again; it returns only a permanent error, or net.ErrClosed (wrapped)
// once Close is called.
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	var failures int
	for {
		nc, err := l.inner.Accept()
		if err != nil {
			kind, temporary := classifyAcceptError(err)
			if !temporary {
				return nil, err
			}
			l.c.acceptErrors[kind].Add(1)
			failures++
			delay = nextBackoff(delay, l.cfg.maxAcceptBackoff)
			l.logBackoff(failures, kind, delay, err)
			l.c.backoffs.Add(1)
			if !l.pause(delay) {
				return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
			}
			continue
		}
		if failures > 0 {
			l.log(slog.LevelInfo, "connlimit: accept recovered", "errors", failures)
			delay, failures = 0, 0
		}
		if !l.acquire() {
			l.refuse(nc)
			continue
		}
		l.c.accepted.Add(1)
		return &Conn{Conn: nc, l: l}, nil
	}
}

// Close closes the inner listener, ends a back-off in progress, and
// closes the refused connections still lingering. It does not close
// accepted connections. Close is idempotent; later calls return the
// first result.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.closeErr = l.inner.Close()
		l.mu.Lock()
		l.closed = true
		for nc := range l.lingering {
			_ = nc.Close() // wakes the lingering goroutine
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return l.closeErr
}

// nextBackoff doubles prev from MinAcceptBackoff, capped at limit.
func nextBackoff(prev, limit time.Duration) time.Duration {
	if prev == 0 {
		return min(MinAcceptBackoff, limit)
	}
	return min(2*prev, limit)
}

// pause sleeps for d and reports false if Close ended it early.
func (l *Listener) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

// acquire takes a connection slot if one is free.
func (l *Listener) acquire() bool {
	limit := int64(l.cfg.maxConns)
	for {
		n := l.c.open.Load()
		if n >= limit {
			return false
		}
		if l.c.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives a slot back; Conn.Close calls it exactly once.
func (l *Listener) release() {
	n := l.c.open.Add(-1)
	if n <= int64(l.cfg.maxConns)*9/10 && l.full.Load() && l.full.CompareAndSwap(true, false) {
		l.log(slog.LevelInfo, "connlimit: open connections back below the limit", "open", n, "max_conns", l.cfg.maxConns)
	}
}

// refuse answers an over-limit connection and closes it: in a lingering
// goroutine when one of MaxRefusing is free, else at once on the accept
// path.
func (l *Listener) refuse(nc net.Conn) {
	l.c.rejectedMaxConns.Add(1)
	if l.full.CompareAndSwap(false, true) {
		l.log(slog.LevelWarn, "connlimit: connection limit reached, refusing new connections", "max_conns", l.cfg.maxConns)
	}
	if len(l.cfg.busyReply) == 0 {
		_ = nc.Close()
		return
	}
	if l.cfg.refuseLinger >= 0 && l.startLinger(nc) {
		return
	}
	// A fresh socket's send buffer is empty, so this write normally
	// completes at once; the deadline bounds the pathological case,
	// because it runs on the accept path.
	l.writeBusyReply(nc)
	_ = nc.Close()
}

// writeBusyReply writes the reply under BusyWriteTimeout and reports
// whether all of it went out.
func (l *Listener) writeBusyReply(nc net.Conn) bool {
	return l.writeReply(nc, l.cfg.busyReply)
}

// writeReply writes reply under BusyWriteTimeout and reports whether all
// of it went out.
func (l *Listener) writeReply(nc net.Conn, reply []byte) bool {
	_ = nc.SetWriteDeadline(time.Now().Add(l.cfg.busyWriteTimeout))
	if _, err := nc.Write(reply); err != nil {
		l.c.busyWriteErrors.Add(1)
		return false
	}
	return true
}

// startLinger hands nc to a goroutine that refuses it politely; false if
// MaxRefusing are already lingering or the Listener is closed.
func (l *Listener) startLinger(nc net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.lingering) >= l.cfg.maxRefusing {
		return false
	}
	l.lingering[nc] = struct{}{}
	l.c.refusing.Add(1)
	l.wg.Add(1)
	go l.linger(nc)
	return true
}

// linger refuses nc within RefuseLinger:
//
//  1. It waits (at most requestWait) for the client's first bytes, because
//     an HTTP client that receives a response before it has sent its
//     request treats it as garbage on an idle connection (Go's
//     http.Transport reports "unsolicited response") instead of a 503.
//  2. It writes the reply and sends FIN.
//  3. It discards input until the client closes. Closing a socket with
//     unread input makes the kernel send a reset, and a reset can destroy
//     the reply before the client reads it; net/http waits before closing
//     for the same reason (RFC 9112 section 9.6).
func (l *Listener) linger(nc net.Conn) {
	defer l.wg.Done()
	start := time.Now()
	_ = nc.SetReadDeadline(start.Add(min(requestWait, l.cfg.refuseLinger)))
	var first [512]byte
	n, err := nc.Read(first[:])
	clientGone := err != nil && !isTimeout(err) // EOF or reset: nobody to answer
	reply := l.cfg.busyReply
	if l.cfg.httpBusyReply && n > 0 && bytes.HasPrefix([]byte(http2Preface), first[:min(n, len(http2Preface))]) {
		// A cleartext HTTP/2 client with prior knowledge would read the
		// HTTP/1.1 503 as garbage; it gets a GOAWAY it can report.
		reply = http2BusyReply
	}
	if !clientGone && l.writeReply(nc, reply) {
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = nc.SetReadDeadline(start.Add(l.cfg.refuseLinger))
		_, _ = io.CopyN(io.Discard, nc, maxRefuseDrain)
	}
	_ = nc.Close()
	l.mu.Lock()
	delete(l.lingering, nc)
	l.mu.Unlock()
	l.c.refusing.Add(-1)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (l *Listener) log(level slog.Level, msg string, args ...any) {
	if l.cfg.logger != nil {
		l.cfg.logger.Log(context.Background(), level, msg, args...)
	}
}

// logBackoff warns on the first error of a run and logs the rest at
// debug level, so an fd shortage does not flood the log.
func (l *Listener) logBackoff(failures int, kind errKind, delay time.Duration, err error) {
	level := slog.LevelDebug
	if failures == 1 {
		level = slog.LevelWarn
	}
	l.log(level, "connlimit: temporary accept error, backing off", "kind", kind.String(), "delay", delay, "errors", failures, "err", err)
}
