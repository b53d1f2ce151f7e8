package engine

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// stateClaimed marks a connection that closeIdle has taken to close: the
// connection's goroutine must not start another request on it.
const stateClaimed = http.ConnState(100)

// bodyDeadliner is implemented by connlimit.Conn: a read deadline for a
// request body that it counts as a body timeout when a read misses it.
type bodyDeadliner interface {
	SetBodyReadDeadline(t time.Time) error
}

// conn is one client connection and the loop that serves it.
type conn struct {
	s        *Server
	rwc      net.Conn
	accepted time.Time
	state    atomic.Int32 // http.ConnState, or stateClaimed

	buf  []byte // read buffer; unread bytes are buf[r:w]
	r, w int
	out  []byte // answers not yet written

	h      head
	reqs   int    // requests answered
	remote string // RemoteAddr().String(), once asked for
	// peer is the client's address as netip reads it, once asked for
	// (peerSet); peerOK: it is an IP address and port.
	peer            netip.AddrPort
	peerSet, peerOK bool
	pending         []byte // the bridge's body buffer, reused between answers
	freq            Request
	fresp           Response

	// Deadlines in force (zero: none), to skip renewals that would move
	// a deadline by less than a hundredth of its timeout.
	readDL, writeDL time.Time
	readKind        int  // what readDL is for: dlNone, dlIdle, dlHeader, dlBody
	handlerWriteDL  bool // a handler set the write deadline: no renewals until its answer ends
	handlerReadDL   bool // a handler set the read deadline: no body renewals until its request ends

	ctx      context.Context // the connection's context (the server's, and its local address), made once
	werr     error           // the first write error; the connection is done
	peerDone bool            // the client closed its side (seen by the background read)
	hijacked bool            // a handler took the connection over (Hijack): never touch it again

	cancelReq context.CancelFunc // cancels the bridged request in progress; nil between requests
	bg        *bgRead
	watch     *clientWatch // a natively answered request's delayed watch (native.go), made once

	pipelined int  // answers gathered in out since the last flush
	turn      int  // answers since the goroutine last yielded
	headArmed bool // the head being read is under the header timeout
	resume    bool // readHead resumes a head the read loop waited on

	// The read loop (loop.go): the socket, when the loop can serve this
	// connection, and the loop's state while it runs.
	raw     syscall.RawConn
	noter   readNoter // the wrapper told of the loop's reads, if any
	inLoop  bool      // the goroutine is inside the loop's RawConn.Read call
	fd      int       // the socket, inside the loop
	drained bool      // the loop's last read emptied the socket: wait before the next
	reads   int       // the loop's reads (Server.loopReads)
	sure    bool      // drained because a read found nothing (not only came back short)
	// unverified: waiting in the loop after a short read only, for the
	// sweeper to look at (loop.go).
	unverified atomic.Bool
	// lastReq and prevReq: when the loop's last two requests began (how
	// busy the connection is).
	lastReq, prevReq time.Time
	next             int // what the loop hands to the ordinary path (loopEnd...)
	pn               int // loopDispatch: the head's length and error
	perr             error
	pnow             time.Time // loopBridge: the request's start and keep-alive
	pkeep            bool
	cont             func()       // loopContinue: the FastHandler's Continue function,
	contH            http.Handler // or ContinueWith's handler
}

// Kinds of read deadline.
const (
	dlNone = iota
	dlIdle
	dlHeader
	dlBody
)

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, rwc: nc, accepted: time.Now()}
	c.setupLoop() // before the goroutine starts: closeNow reads raw
	return c
}

// closeNow closes the connection from another goroutine (Close,
// closeIdle). One the read loop may be serving is shut down instead:
// Close would wait for the loop's call to return, and a request
// forwarded inside it may wait on a slow upstream.
func (c *conn) closeNow() {
	if c.raw != nil {
		shutdownSocket(c.raw)
		return
	}
	_ = c.rwc.Close()
}

func (c *conn) setState(st http.ConnState) {
	c.state.Store(int32(st))
	if f := c.s.cfg.ConnState; f != nil {
		f(c.rwc, st)
	}
}

// activate moves the connection to StateActive unless closeIdle claimed
// it first.
func (c *conn) activate() bool {
	for {
		st := http.ConnState(c.state.Load())
		if st == stateClaimed {
			return false
		}
		if c.state.CompareAndSwap(int32(st), int32(http.StateActive)) {
			if f := c.s.cfg.ConnState; f != nil {
				f(c.rwc, http.StateActive)
			}
			return true
		}
	}
}

// claimIdle takes an idle connection (or, with stale, a new one that has
// sent nothing for 5 s) for closing.
func (c *conn) claimIdle(stale bool, now time.Time) bool {
	if c.state.CompareAndSwap(int32(http.StateIdle), int32(stateClaimed)) {
		return true
	}
	// A new connection is still StateNew until its first head is read:
	// after 5 s, as net/http, it counts as idle.
	return stale && now.Sub(c.accepted) > 5*time.Second &&
		c.state.CompareAndSwap(int32(http.StateNew), int32(stateClaimed))
}

// serve runs the connection until it closes.
func (c *conn) serve() {
	defer c.finish()
	c.buf = make([]byte, initialReadBuffer)
	if t := c.s.cfg.ReadHeaderTimeout; t > 0 {
		c.setReadDeadline(c.accepted.Add(t), dlHeader)
	}
	for {
		var keep bool
		if c.raw == nil {
			keep = c.serveOne()
		} else {
			switch c.readLoop() {
			case loopEnd:
				return
			case loopDispatch:
				keep = c.dispatch(c.pn, c.perr)
			case loopBridge:
				keep = c.serveHandler(c.pnow, c.pkeep, c.s.handler)
				c.reqs++
			case loopContinue:
				fn, h := c.cont, c.contH
				c.cont, c.contH = nil, nil
				if h != nil {
					c.fresp.ServeWith(h)
				} else {
					fn()
				}
				c.reqs++
				keep = c.fresp.keep
			}
			c.perr = nil
		}
		if !c.afterAnswer(keep) {
			return
		}
	}
}

// afterAnswer ends an answer: what is gathered is written when the
// read buffer holds no further request (or enough answers are waiting),
// the connection turns idle, and every maxTurn answers it yields. It
// reports whether the connection carries another request.
func (c *conn) afterAnswer(keep bool) bool {
	if !keep || c.werr != nil {
		return false
	}
	c.pipelined++
	c.turn++
	if c.r == c.w || c.pipelined >= maxPipelined || len(c.out) > 32<<10 {
		if !c.flush() {
			return false
		}
		c.pipelined = 0
	}
	if c.r == c.w {
		c.shrink()
	}
	c.setState(http.StateIdle)
	if !c.s.keepAlives() {
		// Shutdown began while this request ran: it was answered
		// with Connection: close.
		return false
	}
	if c.turn >= maxTurn {
		if !c.endTurn() {
			return false
		}
		c.turn = 0
	}
	return true
}

// endTurn ends the connection's turn on its P after maxTurn answers:
// what is gathered is written, and the goroutine yields, so that a
// client that keeps its socket full (pipelining, or a flood of requests
// that are refused at once) cannot keep the goroutines with admitted
// work that are ready to run waiting behind it: its reads never block,
// so without a yield nothing else would run on the P until the Go
// scheduler preempted it (after 10 ms). It reports false after a write
// error.
func (c *conn) endTurn() bool {
	if !c.flush() {
		return false
	}
	runtime.Gosched()
	return true
}

// finish flushes what is left, closes the connection and forgets it.
func (c *conn) finish() {
	if r := recover(); r != nil && r != http.ErrAbortHandler {
		c.logf("engine: panic serving %v: %v", c.rwc.RemoteAddr(), r)
	}
	if c.hijacked {
		return // closed, and forgotten by the server, by its new owner
	}
	c.stopBackgroundRead()
	if c.watch != nil {
		c.watch.stop()
	}
	if c.reads > 0 {
		c.s.loopReads.Add(uint64(c.reads))
	}
	if c.werr == nil && len(c.out) > 0 {
		c.flush()
	}
	_ = c.rwc.Close()
	c.setState(http.StateClosed)
	c.s.trackConn(c, false)
}

func (c *conn) logf(format string, args ...any) {
	if l := c.s.cfg.ErrorLog; l != nil {
		l.Printf(format, args...)
	}
}

// serveOne reads and answers one request. It reports whether the
// connection may carry another.
func (c *conn) serveOne() bool {
	n, err := c.readHead()
	return c.dispatch(n, err)
}

// dispatch answers the request whose head readHead read (n bytes), or
// ends the connection on readHead's error.
func (c *conn) dispatch(n int, err error) bool {
	if c.reqs > 0 || c.w > 0 || n > 0 {
		// net/http's order: the connection turns active once bytes of a
		// request were read, even when reading them failed.
		if !c.activate() {
			return false
		}
	}
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			c.writeError(pe)
			c.lingerClose()
		}
		return false
	}
	c.r += n
	now := time.Now()
	keep := c.s.keepAlives() && !c.h.close
	if f := c.s.cfg.Fast; f != nil && (c.s.cfg.FastBodies || !c.h.hasBody() && !c.h.expect && !c.h.upgrade) {
		// The views live in the connection, so the fast path allocates
		// nothing for them.
		c.fresp = Response{c: c, now: now, keep: keep}
		c.freq = Request{c: c}
		if f.ServeFast(&c.fresp, &c.freq) {
			c.reqs++
			return c.fresp.keep
		}
		if c.fresp.wrote {
			panic("engine: a FastHandler wrote an answer and returned false")
		}
	}
	keep = c.serveHandler(now, keep, c.s.handler)
	c.reqs++
	return keep
}

// readHead reads until buf holds a complete request head and parses it
// into c.h. It returns the head's length, or an error: a *parseError to
// answer, or the read error that ended the connection. The first
// request's header deadline runs from the accept; a later one waits
// under the idle deadline until its first byte, then has
// ReadHeaderTimeout for the rest of its head.
func (c *conn) readHead() (int, error) {
	cfg := &c.s.cfg
	if c.resume {
		// The read loop waited on this head: its deadlines stand.
		c.resume = false
	} else {
		if c.reqs > 0 && c.r == c.w && cfg.IdleTimeout > 0 {
			c.renewReadDeadline(cfg.IdleTimeout, dlIdle)
		}
		// The first request's header deadline was armed at the accept.
		c.headArmed = c.reqs == 0 && cfg.ReadHeaderTimeout > 0
	}
	for {
		if c.w > c.r {
			n, err := parseHead(c.buf[c.r:c.w], &c.h)
			if err != errNeedMore {
				return n, err
			}
			if c.w-c.r >= c.s.maxHeader {
				return 0, errHeadTooLarge
			}
			switch {
			case !c.headArmed && cfg.ReadHeaderTimeout > 0:
				// The request's first bytes are in: the rest of the head
				// is under the header timeout from now.
				c.setReadDeadline(time.Now().Add(cfg.ReadHeaderTimeout), dlHeader)
				c.headArmed = true
			case !c.headArmed && c.readKind == dlIdle:
				c.setReadDeadline(time.Time{}, dlNone) // no header timeout: the idle one must not cut a head
			}
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
}

// fill reads more bytes into buf, making room first: unread bytes move
// to the front, and the buffer doubles when they fill it. Callers bound
// what they let it hold (a head, a chunk line).
func (c *conn) fill() error {
	if c.r > 0 && c.w == len(c.buf) {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.buf) {
		nb := make([]byte, 2*len(c.buf))
		copy(nb, c.buf[:c.w])
		c.buf = nb
	}
	if c.inLoop {
		if c.drained {
			return errWait
		}
		n, err := c.rawRead(c.buf[c.w:])
		c.w += n
		if n > 0 {
			return nil
		}
		return err
	}
	n, err := c.rwc.Read(c.buf[c.w:])
	c.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// shrink returns a grown read buffer to its initial size once it is
// empty, so that one large head does not pin memory for the
// connection's life.
func (c *conn) shrink() {
	c.r, c.w = 0, 0
	if len(c.buf) > initialReadBuffer {
		c.buf = make([]byte, initialReadBuffer)
	}
}

// setReadDeadline sets the read deadline; kind says what it is for.
func (c *conn) setReadDeadline(t time.Time, kind int) {
	if kind == dlBody {
		if bd, ok := c.rwc.(bodyDeadliner); ok {
			_ = bd.SetBodyReadDeadline(t)
			c.readDL, c.readKind = t, kind
			return
		}
	}
	_ = c.rwc.SetReadDeadline(t)
	c.readDL, c.readKind = t, kind
}

// renewReadDeadline sets the read deadline to timeout from now, unless
// one of the same kind is already within a hundredth of it.
func (c *conn) renewReadDeadline(timeout time.Duration, kind int) {
	now := time.Now()
	at := now.Add(timeout)
	if c.readKind == kind && at.Sub(c.readDL) < timeout/100 {
		return
	}
	c.setReadDeadline(at, kind)
}

// renewWriteDeadline renews the send timeout before a write, unless the
// deadline in force is already within a hundredth of it.
func (c *conn) renewWriteDeadline() {
	t := c.s.cfg.SendTimeout
	if t <= 0 || c.handlerWriteDL {
		return
	}
	at := time.Now().Add(t)
	if !c.writeDL.IsZero() && at.Sub(c.writeDL) < t/100 {
		return
	}
	_ = c.rwc.SetWriteDeadline(at)
	c.writeDL = at
}

// writeFailed records the first write error: the connection is done,
// and the request in progress, if any, has its context canceled (as
// net/http does), so a handler streaming to a client that stopped
// reading stops too.
func (c *conn) writeFailed(err error) {
	if c.werr == nil {
		c.werr = err
	}
	if c.cancelReq != nil {
		c.cancelReq()
	}
}

// flush writes the pending answers. It reports false after a write
// error (kept in werr: the connection is done).
func (c *conn) flush() bool {
	if c.werr != nil {
		return false
	}
	if len(c.out) == 0 {
		return true
	}
	out := c.out
	if c.inLoop && !c.handlerWriteDL {
		// Inside the read loop the socket is written directly; the
		// send timeout is renewed only when it does not take it all.
		out = out[c.sendNow(out):]
	}
	var err error
	if len(out) > 0 {
		c.renewWriteDeadline()
		_, err = c.rwc.Write(out)
	}
	c.out = c.out[:0]
	if err != nil {
		c.writeFailed(err)
		return false
	}
	if cap(c.out) > 64<<10 {
		c.out = nil
	}
	return true
}

// write writes b after the pending answers: small ones are copied into
// out, large ones written from where they are.
func (c *conn) write(b []byte) bool {
	if len(b) <= 16<<10 {
		c.out = append(c.out, b...)
		if len(c.out) > 32<<10 {
			return c.flush()
		}
		return true
	}
	if !c.flush() {
		return false
	}
	c.renewWriteDeadline()
	if _, err := c.rwc.Write(b); err != nil {
		c.writeFailed(err)
		return false
	}
	return true
}

// sendChunk is the most bytes handed to one ReadFrom (sendfile) before
// the send deadline is renewed, as connlimit does for net/http.
const sendChunk = 64 << 10

// readFrom copies src to the connection after the pending answers (all
// of it, or what its *io.LimitedReader allows), through the connection's
// ReadFrom (sendfile for a file) in chunks of sendChunk, each under a
// renewed send deadline.
func (c *conn) readFrom(src io.Reader) (int64, error) {
	if !c.flush() {
		return 0, c.werr
	}
	rf, ok := c.rwc.(io.ReaderFrom)
	if !ok {
		return io.Copy(writeOnly{c}, src)
	}
	inner, n := src, int64(-1)
	lr, limited := src.(*io.LimitedReader)
	if limited {
		inner, n = lr.R, lr.N
		defer func() { lr.N = n }()
	}
	var total int64
	for n != 0 {
		size := int64(sendChunk)
		if n > 0 {
			size = min(size, n)
		}
		if !c.handlerWriteDL {
			c.writeDL = time.Time{} // a chunk may take long: always renew
			c.renewWriteDeadline()
		}
		m, err := rf.ReadFrom(&io.LimitedReader{R: inner, N: size})
		total += m
		if n > 0 {
			n -= m
		}
		if err != nil {
			c.writeFailed(err)
			return total, err
		}
		if m < size {
			break
		}
	}
	return total, nil
}

// writeOnly is the connection as a plain io.Writer.
type writeOnly struct{ c *conn }

func (w writeOnly) Write(p []byte) (int, error) {
	if !w.c.write(p) {
		return 0, w.c.werr
	}
	return len(p), nil
}

// statusLine returns "HTTP/1.1 <code> <text>\r\n".
func statusLine(code int) []byte {
	if code >= 100 && code < 600 {
		if l := statusLines[code-100].Load(); l != nil {
			return *l
		}
		text := http.StatusText(code)
		if text == "" {
			text = "status code " + strconv.Itoa(code)
		}
		l := []byte("HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n")
		statusLines[code-100].Store(&l)
		return l
	}
	return []byte("HTTP/1.1 " + strconv.Itoa(code) + " status code " + strconv.Itoa(code) + "\r\n")
}

// statusLines caches rendered status lines. It only ever holds the
// rendering of http.StatusText, which is constant, so it is not state.
var statusLines [500]atomic.Pointer[[]byte]

// writeError answers a request the engine refused to parse, and marks
// the connection for closing.
func (c *conn) writeError(pe *parseError) {
	body := strconv.Itoa(pe.status) + " " + http.StatusText(pe.status) + ": " + pe.reason
	b := c.out
	b = append(b, statusLine(pe.status)...)
	b = append(b, "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	b = append(b, c.s.dateFor(time.Now())...)
	b = append(b, "\r\n"...)
	b = append(b, body...)
	c.out = b
	c.flush()
}

// lingerClose half-closes the connection after its final answer and
// reads what the client still sends, for at most lingerTimeout and
// maxDrainBody bytes, so that closing does not reset the connection
// before the client has read the answer.
func (c *conn) lingerClose() {
	if c.werr != nil || !c.flush() {
		return
	}
	cw, ok := c.rwc.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	_ = cw.CloseWrite()
	_ = c.rwc.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.CopyN(io.Discard, c.rwc, maxDrainBody)
}

// isTimeout reports a deadline error.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
