package engine

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/hfield"
)

// Stream is an answer a FastHandler writes piece by piece, without an
// *http.Request: a proxy streaming an upstream's answer. It follows the
// bridge's head rules exactly (they are the same code: Content-Length
// for an answer that ends within 2 KiB or declares one, else chunked;
// sniffed Content-Type; Date unless the header has one; no body for
// HEAD, 1xx, 204 and 304; Connection: close when the connection will
// close; trailers from the Trailer field or http.TrailerPrefix names),
// so an answer written through it is the answer the same handler code
// would have written through the bridge. It is an http.ResponseWriter
// and an http.Flusher with a write deadline (http.ResponseController);
// Hijack and ReadFrom are not offered.
type Stream struct {
	rw respWriter
}

// Header returns the answer's header map: the one Response.Stream was
// given, or after StreamList one made on the first call, whose fields
// go out after the list's.
func (s *Stream) Header() http.Header {
	if s.rw.header == nil {
		s.rw.header = make(http.Header)
	}
	return s.rw.header
}

// WriteHeader sends the status with the header (as
// http.ResponseWriter's: the head is committed on the first Flush, or
// once 2 KiB of body are written, or at the end).
func (s *Stream) WriteHeader(code int) { s.rw.WriteHeader(code) }

// Write writes body bytes (see http.ResponseWriter).
func (s *Stream) Write(p []byte) (int, error) { return s.rw.Write(p) }

// Flush sends the head and what is buffered.
func (s *Stream) Flush() { _ = s.rw.FlushError() }

// SetWriteDeadline sets the connection's write deadline for the rest of
// this answer, in place of the send timeout's renewals (for
// http.ResponseController); End clears it. A zero t means none.
func (s *Stream) SetWriteDeadline(t time.Time) error { return s.rw.SetWriteDeadline(t) }

// Status is the status written so far (0 before WriteHeader or Write).
func (s *Stream) Status() int { return s.rw.status }

// Failed reports whether a write to the client failed: the client is
// gone, nothing more reaches it.
func (s *Stream) Failed() bool { return s.rw.c.werr != nil }

// Stream starts a streamed answer whose header is header (nil: a new
// map). The Stream writes until End or Abort; the Request's views stay
// valid until then unless Unwatch read a byte past the request (see
// WatchClient). Stream may be called once, instead of Write and
// ServeWith.
func (w *Response) Stream(header http.Header) *Stream {
	if header == nil {
		header = make(http.Header)
	}
	return w.stream(header, nil)
}

func (w *Response) stream(header http.Header, list *hfield.List) *Stream {
	if w.wrote {
		panic("engine: Response.Stream after an answer")
	}
	w.wrote = true
	c := w.c
	isHead := w.headSet && w.isHead || !w.headSet && string(c.h.method) == http.MethodHead
	w.st.rw = respWriter{c: c, header: header, list: list, cl: -1, isHead: isHead,
		closeAfter: !w.keep, pending: c.pending[:0]}
	return &w.st
}

// StreamList is Stream with the answer's fields given as a list, sent
// in its order (not sorted, as a header map's are), under the same head
// rules: a proxy forwards an upstream's fields as they came without
// building a map. Fields set through the Stream's Header go out after
// the list's. The engine may remove fields from fields (an invalid
// Content-Length); the list must not change otherwise until End or
// Abort.
func (w *Response) StreamList(fields *hfield.List) *Stream {
	return w.stream(nil, fields)
}

// End completes the streamed answer (the head if not yet sent, the last
// chunk and trailers of a chunked one) and decides whether the
// connection carries another request.
func (w *Response) End() {
	rw := &w.st.rw
	rw.finish()
	w.keep = w.keep && rw.reusable() && !w.c.peerDone
	w.endDeadline()
}

// endDeadline ends a write deadline the streamed answer set, as the
// bridge ends a handler's: the answer's tail is written under it first.
func (w *Response) endDeadline() {
	c := w.c
	if !c.handlerWriteDL {
		return
	}
	c.flush()
	c.handlerWriteDL, c.writeDL = false, time.Time{}
	_ = c.rwc.SetWriteDeadline(time.Time{})
}

// Abort ends the streamed answer midway, as the bridge ends one whose
// handler panicked with http.ErrAbortHandler: what is not yet written
// is dropped and the connection closes, so the client sees a cut answer
// (never a complete-looking one).
func (w *Response) Abort() {
	c := w.c
	c.out = c.out[:0]
	if c.werr == nil {
		c.werr = errAborted
	}
	w.keep = false
	if c.handlerWriteDL {
		c.handlerWriteDL, c.writeDL = false, time.Time{}
	}
}

// errAborted marks a connection whose streamed answer was aborted.
var errAborted = errors.New("engine: answer aborted")

// WatchClient watches for the client going away while the answer is
// not yet begun, from after delay to twice delay on: if the request is
// still waiting then (a slow upstream), a read on the connection starts,
// as the bridge's background read does for every request, and cancel is
// called when it sees the client's end. Inside the read loop, where
// the connection may not be read, the watch looks at the socket
// instead (MSG_PEEK), then again at doubling intervals up to 250 ms, so
// a client that leaves is seen within that. A request answered within
// delay costs no read and no goroutine, and no timer of its own: the
// connection's one timer is left running while requests come, and a
// firing that finds a watch it has not seen before only notes it (the
// next one looks), so a busy connection moves its timer every delay,
// not twice a request.
// Unwatch must be called before the answer is written. A pipelined
// request already read, or the connection's next bytes, end the watch
// (the client is still there).
func (w *Response) WatchClient(delay time.Duration, cancel func()) {
	c := w.c
	// Whether it is a HEAD, read now: the method's bytes may move at
	// Unwatch.
	w.isHead, w.headSet = string(c.h.method) == http.MethodHead, true
	wt := c.watch
	if wt == nil {
		wt = &clientWatch{c: c}
		c.watch = wt
	}
	wt.mu.Lock()
	wt.armed, wt.cancel, wt.gone = true, cancel, false
	// Inside the read loop nothing may read the connection: the watch
	// looks at the socket instead (see fire).
	wt.peek, wt.every = c.inLoop, delay
	wt.gen++
	// Under mu: fire re-arms the timer. A timer due within delay stays
	// (its firing notes this watch); one due later, or none, is set so
	// that its firing, after delay, looks.
	if !wt.running || wt.due > delay {
		wt.seen = wt.gen
		wt.reset(delay)
	}
	wt.mu.Unlock()
}

// reset sets the timer to fire after d (under mu).
func (wt *clientWatch) reset(d time.Duration) {
	wt.running, wt.due = true, d
	if wt.timer == nil {
		wt.timer = time.AfterFunc(d, wt.fire)
	} else {
		wt.timer.Reset(d)
	}
}

// stop stops the timer for good: the connection is closing.
func (wt *clientWatch) stop() {
	wt.mu.Lock()
	if wt.timer != nil {
		wt.timer.Stop()
	}
	wt.running, wt.armed = false, false
	wt.mu.Unlock()
}

// Unwatch ends WatchClient's watch, waiting for its read if one
// started. If that read got a byte (the next pipelined request), the
// byte is kept for the connection, which may move the read buffer: the
// Request's views are not valid after Unwatch. It reports whether the
// client was seen leaving.
func (w *Response) Unwatch() (gone bool) {
	c := w.c
	wt := c.watch
	if wt == nil {
		return false
	}
	wt.mu.Lock()
	started, gone := wt.started, wt.gone
	wt.armed, wt.started, wt.cancel, wt.gone = false, false, nil, false
	wt.mu.Unlock() // the timer runs on: its next firing finds nothing armed, or the next watch
	if started {
		c.stopBackgroundRead()
	}
	if gone {
		c.peerDone = true // the client sent its last byte: answer, then close
	}
	return c.peerDone
}

// clientWatch is a connection's delayed watch for a client that leaves
// (WatchClient). mu orders the timer's start of the read against
// Unwatch on the connection's goroutine.
type clientWatch struct {
	c     *conn
	timer *time.Timer

	mu      sync.Mutex
	armed   bool // a request is being watched
	started bool // the background read runs
	cancel  func()
	// peek: the request is served inside the read loop, so the watch
	// looks at the socket (MSG_PEEK) every `every`, doubling up to
	// maxWatchEvery, instead of reading it; gone: a look saw the end.
	peek  bool
	every time.Duration
	gone  bool
	// running: the timer is set, to fire within due of when it was.
	// gen counts the watches; seen is the one a firing may look for
	// (the one it found armed before, or the one the timer was set for).
	running   bool
	due       time.Duration
	gen, seen uint64
}

// maxWatchEvery bounds the time between two looks of a watch inside the
// read loop: a client that left is seen within it.
const maxWatchEvery = 250 * time.Millisecond

// Results of peekClient.
const (
	peekNothing = iota // nothing to read: the client is there, quiet
	peekData           // bytes (the next request): the client is there
	peekEnd            // the client's end, or an error
)

// fire starts the background read for the watched request, if any (a
// timer that fires late, after Unwatch, finds nothing armed).
func (wt *clientWatch) fire() {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	wt.running = false
	if !wt.armed {
		return // the connection is idle, or closing: the timer stops
	}
	if wt.seen != wt.gen {
		// A watch that began after the timer was set: it may be
		// younger than its delay. The next firing looks.
		wt.seen = wt.gen
		wt.reset(wt.every)
		return
	}
	if wt.started || wt.gone || wt.c.bg != nil || wt.c.w > wt.c.r {
		return
	}
	if wt.peek {
		// A look costs one system call and no goroutine; a read would
		// need the loop's lock, and a second descriptor for it costs a
		// dozen calls per watch.
		switch wt.c.peekClient() {
		case peekEnd:
			wt.gone = true
			wt.cancel()
		case peekNothing:
			wt.every = min(2*wt.every, maxWatchEvery)
			wt.reset(wt.every)
		}
		return // peekData: the client is there, and its next request ends the watch
	}
	wt.started = true
	wt.c.startBackgroundRead(wt.cancel)
}

// Fields returns how many header fields the request has (Host
// included), for Field.
func (r *Request) Fields() int { return len(r.c.h.fields) }

// Field returns the i-th header field's name, as sent, and value. Like
// the other views they point into the read buffer.
func (r *Request) Field(i int) (name, value string) {
	f := &r.c.h.fields[i]
	return b2s(f.name), b2s(f.value)
}
