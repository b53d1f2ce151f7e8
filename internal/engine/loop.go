package engine

import (
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"
)

// The read loop: answering without the read that finds nothing.
//
// A Go server that writes an answer and then reads the connection's next
// request finds the socket empty (the client is still reading the
// answer): the read fails with EAGAIN and the poller parks the goroutine
// until the socket is readable, then the read is made again. That is two
// reads per request where nginx makes one, and under a flood of cheap
// answers (refusals, cache hits) the system calls are most of the cost.
// The first read cannot simply be skipped: the runtime forgets a
// socket's readiness whenever a read begins (net.Conn.Read and
// syscall.RawConn.Read both), so a goroutine that waited without reading
// first could sleep through bytes that came before the wait.
//
// What the runtime does keep is the readiness that arrives during one
// syscall.RawConn.Read call: it forgets at the call's start only. So the
// engine serves a connection inside one RawConn.Read call for as long as
// it can (the read loop): it reads the socket itself, and after a read
// that came back short (it took everything the socket held) it knows
// that any later byte raises readiness the call will see, so when it
// needs more it writes what it gathered and waits at once, without the
// read that would find nothing. A request costs one read and one write.
//
// A short read is not quite proof that nothing more is coming: a FIN (or
// a reset) that arrived with the last bytes is not reported by the read
// that returns them, and its readiness may have been raised before the
// read, so no later readiness comes. After a wait that only a short
// read justified, the loop therefore waits at most loopProbe: then it
// leaves the call and reads again (finding nothing, it waits as long as
// the connection's own deadline allows; finding the end, it closes). A
// client that half-closes right after its request sees the close that
// much later; a connection idle longer than loopProbe pays the read the
// loop saves, once per wait.
//
// Inside the call the connection's read lock is held, so nothing may
// read the connection through net.Conn: not the body reader, not the
// bridge's background read, not a lingering close. The loop therefore
// answers only what needs none of them, requests without a body that a
// FastHandler written for the loop (ReadLoopHandler) answers at once,
// and hands everything else, with its head already parsed, to the
// ordinary path outside the call (a later request enters a new loop).
// A FastHandler finishes an answer that needs them (a bridged request,
// a forwarded one that watches the client) through Response.Continue,
// which runs right after the loop is left.
//
// Only a connection the engine can reach the socket of takes the loop
// (a *net.TCPConn or *net.UnixConn, directly or inside a wrapper that
// hands it out through NetConn and hears of the reads it misses through
// NoteRead, as connlimit.Conn does); TLS and unknown wrappers keep the
// ordinary path.

// ReadLoopHandler is a FastHandler that may run inside the connection's
// read loop: its ServeFast never calls Response.ServeWith or
// Response.WatchClient directly, only from a function it passes to
// Response.Continue, and blocks only briefly (a refusal, a cached
// answer, a quota's decision). Server.Close waits for a ServeFast in
// progress in the loop to return before the connection's socket closes.
type ReadLoopHandler interface {
	FastHandler
	// ReadLoop reports whether ServeFast keeps to those rules.
	ReadLoop() bool
}

// readNoter is a connection wrapper that keeps books on its reads
// (connlimit.Conn): the loop reads under it, and tells it what it read.
type readNoter interface {
	NetConn() net.Conn
	NoteRead(n int, err error)
}

// loopProbe bounds a wait that a short read justified (see above).
const loopProbe = 200 * time.Millisecond

// What the read loop hands to the ordinary path when it returns.
const (
	loopAgain    = iota // the probe expired: the loop starts again
	loopEnd             // the connection is over
	loopDispatch        // a head was read (or reading it failed): dispatch it
	loopBridge          // the FastHandler declined: the bridge answers
	loopContinue        // the FastHandler's Continue function finishes the answer
)

// errWait is fill's answer inside the read loop when the socket is known
// to be empty: the loop waits for readiness and resumes the head.
var errWait = errors.New("engine: wait for the socket")

// setupLoop finds the connection's socket, if the read loop can serve
// it.
func (c *conn) setupLoop() {
	if !loopSupported {
		return
	}
	lh, ok := c.s.cfg.Fast.(ReadLoopHandler)
	if !ok || !lh.ReadLoop() {
		return
	}
	nc := c.rwc
	if rn, ok := nc.(readNoter); ok {
		c.noter = rn
		nc = rn.NetConn()
	}
	var sc syscall.Conn
	switch t := nc.(type) {
	case *net.TCPConn:
		sc = t
	case *net.UnixConn:
		sc = t
	default:
		c.noter = nil
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		c.noter = nil
		return
	}
	c.raw = rc
}

// readLoop serves requests inside one RawConn.Read call until one needs
// the ordinary path or the connection ends, and says which (loopEnd,
// loopDispatch, loopBridge, loopContinue).
func (c *conn) readLoop() int {
	c.inLoop, c.next = true, loopEnd
	defer func() { c.inLoop = false }()
	err := c.raw.Read(func(fd uintptr) bool {
		// First call, or woken by readiness: the socket must be read.
		c.fd, c.drained = int(fd), false
		return c.loopStep()
	})
	if err != nil && c.probing && isTimeout(err) && (c.readDL.IsZero() || time.Now().Before(c.readDL)) {
		// The probe's deadline, not the connection's: put that back
		// and read again.
		_ = c.rwc.SetReadDeadline(c.readDL)
		c.probing = false
		return loopAgain
	}
	if err != nil {
		// The wait failed: a deadline (idle, header), or the connection
		// was closed under it. The head in progress fails with it.
		if c.noter != nil {
			c.noter.NoteRead(0, err)
		}
		c.resume = false
		c.pn, c.perr, c.next = 0, err, loopDispatch
	}
	return c.next
}

// loopStep is the read loop's body: it serves what it can and reports
// true when the loop must end (c.next says why), false to wait for the
// socket.
func (c *conn) loopStep() bool {
	for {
		n, err := c.readHead()
		if err == errWait {
			c.resume = true
			if !c.flush() {
				c.next = loopEnd
				return true
			}
			c.pipelined = 0
			if !c.sure {
				c.armProbe()
			}
			return false
		}
		if err != nil || c.h.hasBody() || c.h.expect || c.h.upgrade {
			c.pn, c.perr, c.next = n, err, loopDispatch
			return true
		}
		if c.reqs > 0 || c.w > 0 || n > 0 {
			if !c.activate() {
				c.next = loopEnd
				return true
			}
		}
		c.r += n
		now := time.Now()
		keep := c.s.keepAlives() && !c.h.close
		c.fresp = Response{c: c, now: now, keep: keep}
		c.freq = Request{c: c}
		if !c.s.cfg.Fast.ServeFast(&c.fresp, &c.freq) {
			if c.fresp.wrote || c.cont != nil || c.contH != nil {
				panic("engine: a FastHandler answered and returned false")
			}
			c.pnow, c.pkeep, c.next = now, keep, loopBridge
			return true
		}
		if c.cont != nil || c.contH != nil {
			c.next = loopContinue
			return true
		}
		c.reqs++
		if !c.afterAnswer(c.fresp.keep) {
			c.next = loopEnd
			return true
		}
	}
}

// armProbe bounds the coming wait by loopProbe, unless a deadline comes
// sooner (the connection's own, or a probe's still ahead).
func (c *conn) armProbe() {
	now := time.Now()
	if c.probing && c.probeAt.After(now) {
		return
	}
	at := now.Add(loopProbe)
	if !c.probing && !c.readDL.IsZero() && c.readDL.Before(at) {
		return
	}
	_ = c.rwc.SetReadDeadline(at)
	c.probing, c.probeAt = true, at
}

// Continue finishes the answer in fn, where ServeWith, WatchClient,
// Stream and everything else of Response may be used: a ReadLoopHandler
// calls it for an answer that needs the connection's reads (the bridge,
// a watch for the client leaving) and returns true from ServeFast. Run
// from the read loop, fn runs right after ServeFast returns, once the
// loop is left and before the connection reads anything more, so the
// Request's views stay valid in it; elsewhere it runs at once. Whoever
// calls Continue must not touch w or the request after it returns.
func (w *Response) Continue(fn func()) {
	if !w.c.inLoop {
		fn()
		return
	}
	if w.wrote || w.c.cont != nil || w.c.contH != nil {
		panic("engine: Response.Continue after an answer")
	}
	w.c.cont = fn
}

// ContinueWith is Continue for an answer h gives through the bridge:
// ServeWith(h), once the read loop is left.
func (w *Response) ContinueWith(h http.Handler) {
	if !w.c.inLoop {
		w.ServeWith(h)
		return
	}
	if w.wrote || w.c.cont != nil || w.c.contH != nil {
		panic("engine: Response.ContinueWith after an answer")
	}
	w.c.contH = h
}

// mustLeaveLoop panics when a method that reads the connection is
// called from inside the read loop.
func (c *conn) mustLeaveLoop(what string) {
	if c.inLoop {
		panic("engine: Response." + what + " called inside the read loop: call it from Response.Continue")
	}
}
