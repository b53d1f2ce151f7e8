package engine

import (
	"errors"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/internal/rawsock"
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
// read, so no later readiness comes. A connection that waits on the
// strength of a short read only is therefore marked, and the server's
// sweeper (one goroutine, while such connections exist) looks at each
// marked socket once, every loopSweep, with a non-blocking MSG_PEEK from
// outside the loop; one that ended is shut down for reading, which
// raises the readiness the loop waits for, and the loop's read then
// finds the end. A client that half-closes right after its request
// sees the close up to twice loopSweep later. A busy connection is
// looked at once per sweep, however many requests it sent; one whose
// requests come further apart than loopSweep/8 would be looked at about
// once per request, for no saving, so it reads again before it waits,
// as the ordinary path does. (A deadline per connection for the same
// purpose was tried first: under 2,000 and more connections each
// sending a request every 80 ms or more, its timers and wake-ups cost
// more than the reads saved.)
//
// Inside the call the connection's read lock is held, so nothing may
// read the connection through net.Conn: not the body reader, not the
// bridge's background read, not a lingering close. The loop therefore
// answers only what needs none of them, requests without a body that a
// FastHandler written for the loop (ReadLoopHandler) answers at once,
// and hands everything else, with its head already parsed, to the
// ordinary path outside the call (a later request enters a new loop).
// A FastHandler finishes an answer that needs them (a bridged request)
// through Response.Continue or ContinueWith, which run right after the
// loop is left. A request forwarded from the loop stays in it: its watch
// for the client leaving (Response.WatchClient) looks at the socket
// with MSG_PEEK instead of reading it.
//
// Only a connection the engine can reach the socket of takes the loop
// (a *net.TCPConn or *net.UnixConn, directly or inside a wrapper that
// hands it out through NetConn and hears of the reads it misses through
// NoteRead, as connlimit.Conn does); TLS and unknown wrappers keep the
// ordinary path.

// ReadLoopHandler is a FastHandler that may run inside the connection's
// read loop: its ServeFast never calls Response.ServeWith directly, only
// from a function it passes to Response.Continue (or through
// ContinueWith), and what it waits on inside the loop it bounds itself
// (a quota's decision, an upstream call under its deadlines). Close and
// Shutdown end such a connection's socket at once (shutdown(2)); its
// descriptor closes when ServeFast returns.
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

// loopSweep is how often the sweeper looks at the sockets of
// connections that wait after a short read (see above).
const loopSweep = 250 * time.Millisecond

// What the read loop hands to the ordinary path when it returns.
const (
	loopEnd      = iota // the connection is over
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
	rc := rawsock.Of(nc)
	if rc == nil {
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
				if c.lastReq.Sub(c.prevReq) > loopSweep/8 {
					// A connection this slow would be looked at once
					// per request or so: read now, as the ordinary
					// path does, and wait knowing.
					c.drained = false
					continue
				}
				c.unverified.Store(true)
				c.s.startSweeper()
			} else if c.unverified.Load() {
				c.unverified.Store(false)
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
		c.prevReq, c.lastReq = c.lastReq, now
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

// startSweeper starts the server's sweeper unless it runs.
func (s *Server) startSweeper() {
	if s.sweeping.Load() || !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	go s.sweep()
}

// sweep looks, every loopSweep, at the socket of each connection marked
// since the last look (see the read loop's doc above), and ends when a
// look finds none marked.
func (s *Server) sweep() {
	t := time.NewTicker(loopSweep)
	defer t.Stop()
	var marked []*conn
	for range t.C {
		marked = s.takeMarked(marked[:0])
		if len(marked) == 0 {
			s.sweeping.Store(false)
			// A connection marked after the look saw a sweeper running:
			// look again before ending.
			if marked = s.takeMarked(marked[:0]); len(marked) == 0 || !s.sweeping.CompareAndSwap(false, true) {
				for _, c := range marked {
					c.unverified.Store(true) // the sweeper that won the start looks at it
				}
				return
			}
		}
		for i, c := range marked {
			c.lookForTheEnd()
			marked[i] = nil
			if i%128 == 127 {
				runtime.Gosched() // a long sweep must not hold the P
			}
		}
	}
}

// takeMarked appends the connections marked since the last look,
// clearing their marks.
func (s *Server) takeMarked(dst []*conn) []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.unverified.Load() && c.unverified.Swap(false) {
			dst = append(dst, c)
		}
	}
	return dst
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
