package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/internal/hfield"
)

// Sizes of a connection's buffers.
const (
	initialReadBuffer = 4 << 10
	// maxInlineBody is the largest request body of known length read
	// whole before the request is sent, and sent with its head in one
	// write (nginx reads every body first; the upstream then never waits
	// on a slow client). Larger and unknown-length bodies stream.
	maxInlineBody = 64 << 10
	// copyBuffer is the size of a streamed body's pieces.
	copyBuffer = 32 << 10
	// max1xx bounds the informational answers skipped before the final
	// one, as net/http does.
	max1xx = 5
)

// outbound is a request checked and ready to be written: what it is
// written with, the same for every try.
type outbound struct {
	method, uri, host, userAgent string
	// framing: exactly one per request, chosen here.
	framing   int
	length    int64        // frameLength: the body's length
	trailer   []string     // declared trailer names, sorted (frameChunked)
	keys      []string     // header keys to write, sorted, when more than keyBuf holds
	nkeys     int          // else how many of keyBuf are
	fields    *Fields      // fields written after keys' (nil: none)
	keyBuf    [16]string   // keys' storage for most requests
	close     bool         // Connection: close
	closeSent bool         // the header already says close
	answer    *hfield.List // Limits.Answer
}

// keyList is the header keys to write, sorted.
func (o *outbound) keyList() []string {
	if o.keys != nil {
		return o.keys
	}
	return o.keyBuf[:o.nkeys]
}

// Framings of a request.
const (
	frameNone    = iota // no body, no framing field
	frameZero           // no body, "Content-Length: 0" (POST, PUT, PATCH)
	frameLength         // Content-Length
	frameChunked        // Transfer-Encoding: chunked
)

// excludedRequestHeader are fields the client writes itself, from the
// request's other fields, never from Header: the framing (so that a
// request has exactly one), Host and User-Agent.
func excludedRequestHeader(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// prepare checks req and decides how it is written. Anything that could
// make the written bytes read as more or less than one request (a CR or
// LF in a field, a control or space in the target, a name that is not a
// token) is refused with ErrInvalidRequest: the client writes one
// message or none.
func (c *Client) prepare(req *http.Request, fields *Fields, o *outbound) error {
	if req.URL == nil {
		return invalid("nil URL")
	}
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return invalid("scheme %q: want http or https", s)
	}
	if req.URL.Host == "" {
		return invalid("no host in the URL")
	}
	*o = outbound{method: req.Method, fields: fields}
	if o.method == "" {
		o.method = http.MethodGet
	}
	if !validMethod(o.method) {
		return invalid("method %q", o.method)
	}
	o.host = req.Host
	if o.host == "" {
		o.host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(o.host) || !ascii(o.host) {
		return invalid("host %q", o.host)
	}
	o.uri = req.URL.RequestURI()
	if o.method == http.MethodConnect && req.URL.Path == "" {
		o.uri = o.host
	}
	if !validTarget(o.uri) {
		return invalid("target %q", o.uri)
	}
	if fields == nil {
		o.userAgent = "Go-http-client/1.1"
	}
	if vv, ok := req.Header["User-Agent"]; ok {
		o.userAgent = ""
		if len(vv) > 0 {
			o.userAgent = strings.TrimSpace(vv[0])
		}
	}
	// The keys go in keyBuf when they fit, through a slice of this
	// function's own: o stays where the caller put it (its stack).
	small, big := o.keyBuf[:0], []string(nil)
	if len(req.Header) > len(o.keyBuf) {
		big = make([]string, 0, len(req.Header))
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return invalid("field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return invalid("value of field %q", k)
			}
		}
		if !excludedRequestHeader(k) {
			if big != nil {
				big = append(big, k)
			} else {
				small = append(small, k)
			}
		}
	}
	if big != nil {
		slices.Sort(big)
		o.keys = big
	} else {
		slices.Sort(small)
		o.nkeys = len(small)
	}
	o.close = req.Close
	o.closeSent = hasToken(req.Header["Connection"], "close")
	for k := range req.Trailer {
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidTrailerHeader(k) {
			return invalid("trailer %q", k)
		}
		o.trailer = append(o.trailer, k)
	}
	slices.Sort(o.trailer)
	hasBody := req.Body != nil && req.Body != http.NoBody
	switch {
	case hasBody && len(o.trailer) == 0 && req.ContentLength > 0:
		o.framing, o.length = frameLength, req.ContentLength
	case hasBody:
		o.framing = frameChunked // unknown length, or trailers to send
	case req.ContentLength > 0:
		return invalid("ContentLength %d without a body", req.ContentLength)
	case o.method == http.MethodPost || o.method == http.MethodPut || o.method == http.MethodPatch:
		o.framing = frameZero
	}
	return nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return m != ""
}

// validTarget: visible ASCII only, so the request line has exactly three
// parts and one end.
func validTarget(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return false
		}
	}
	return true
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func hasToken(vv []string, token string) bool {
	for _, v := range vv {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// conn is one connection to an upstream.
type conn struct {
	hp  *hostPool
	nc  net.Conn
	raw syscall.RawConn // nc's socket, for sendAndRead; nil for TLS

	// peek: the pooled connection was taken without the look at its
	// socket, which sendAndRead makes before it writes. pending: the
	// error of sendAndRead's read, for fill.
	peek    bool
	pending error

	sendRead func(uintptr) bool // sendReadStep, for RawConn.Read
	sr       sendRead

	buf  []byte // read buffer; unread bytes are buf[r:w]
	r, w int
	out  []byte // the request head being written

	reused    bool      // it carried an exchange before
	idleSince time.Time // pooled since

	dlMu     sync.Mutex
	readDL   time.Time // read deadline in force (zero: none)
	headRead bool      // the answer's head is in: the writer must not arm the header timeout

	// The exchange in progress.
	ctx       context.Context
	stop      func() bool   // ends the cancellation watch (context.AfterFunc's)
	watcher   CancelWatcher // the watched context, when it watches for the client itself
	headerDL  headerBound   // the request's own header deadline (Limits)
	idle      time.Duration // each wait for the body's bytes (0: none)
	canceled  atomic.Bool   // the context ended it: the connection is closed
	cancelFn  func()
	got       bool       // a byte of an answer came back
	keep      bool       // the connection may carry the next exchange
	writeDone chan error // the streaming body writer's result; nil when none
	closed    atomic.Bool
}

// sendRead is sendAndRead's state between the calls RawConn.Read makes
// of sendReadStep; it lives in the connection so that the exchange
// allocates nothing for it.
type sendRead struct {
	b          []byte
	peek, sent bool
	stale      bool
	werr, rerr error
}

func newConn(hp *hostPool, nc net.Conn) *conn {
	cn := &conn{hp: hp, nc: nc, raw: rawSocket(nc), buf: make([]byte, initialReadBuffer)}
	cn.cancelFn = cn.cancel // made once: a method value allocates
	return cn
}

// cancel ends the exchange when its context ends: closing the
// connection unblocks every read and write on it.
func (cn *conn) cancel() {
	cn.canceled.Store(true)
	cn.close()
}

func (cn *conn) close() {
	if cn.closed.CompareAndSwap(false, true) {
		_ = cn.nc.Close()
	}
}

// usable reports whether a pooled connection may carry a request: not
// idle past the timeout, nothing unread, and not closed by the upstream
// while it waited (a non-blocking look at the socket). With later, the
// look is left to sendAndRead, which makes it in the call that sends a
// request without a body.
func (cn *conn) usable(later bool) bool {
	if t := cn.hp.c.cfg.IdleTimeout; t > 0 && time.Since(cn.idleSince) > t {
		return false
	}
	if cn.r != cn.w {
		return false
	}
	if later && cn.raw != nil {
		cn.peek = true
		return true
	}
	// A past exchange's deadline, left on the socket, would fail the
	// look (and readBy moves it anyway).
	cn.readBy(headerBound{})
	return peerOpen(cn.nc)
}

// errStale is sendAndRead's finding that a pooled connection was closed
// (or sent bytes nobody asked for) while it waited: nothing was sent on
// it, so the request goes out on another.
var errStale = errors.New("upstream: pooled connection closed by the upstream")

// notAnsweredError is a failure on a connection before any byte of an
// answer came back: on a reused connection, the request may be sent
// again on a new one.
type notAnsweredError struct{ err error }

func (e *notAnsweredError) Error() string { return e.err.Error() }
func (e *notAnsweredError) Unwrap() error { return e.err }

// roundTrip sends one request on cn and reads its answer's head. On an
// error the connection is closed and body closed.
func (cn *conn) roundTrip(ctx context.Context, req *http.Request, o *outbound, body io.ReadCloser, hb headerBound, idle time.Duration) (*http.Response, error) {
	cn.ctx, cn.got, cn.keep, cn.writeDone = ctx, false, true, nil
	cn.headerDL, cn.idle = hb, idle
	cn.canceled.Store(false)
	if w, ok := ctx.(CancelWatcher); ok && w.WatchCancel(cn.cancelFn) {
		cn.watcher = w
	} else {
		cn.stop = context.AfterFunc(ctx, cn.cancelFn)
	}
	resp, err := cn.exchange(req, o, body)
	if err != nil {
		cn.unwatch()
		cn.close()
		if cn.writeDone != nil {
			if werr := <-cn.writeDone; werr != nil && !errors.Is(werr, errConnGone) {
				err = werr // the client's body failed: that is the cause
			}
		}
		if cn.canceled.Load() {
			err = context.Cause(ctx)
		}
		return nil, err
	}
	return resp, nil
}

// errConnGone is what the streaming writer reports when the connection
// was closed under it (the answer came, or the exchange failed).
var errConnGone = errors.New("upstream: connection closed while sending the body")

func (cn *conn) exchange(req *http.Request, o *outbound, body io.ReadCloser) (*http.Response, error) {
	b := cn.appendHead(cn.out[:0], req, o)
	if o.framing == frameLength && o.length <= maxInlineBody {
		// Read the whole body first: a client that fails to send it
		// fails here, before the upstream has seen a byte.
		start := len(b)
		b = slices.Grow(b, int(o.length))[:start+int(o.length)]
		n, err := io.ReadFull(body, b[start:])
		body.Close()
		if err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				err = ErrBodyLength
			}
			cn.out = b[:0]
			return nil, bodyError{err, int64(n)}
		}
		body = nil
	}
	peek := cn.peek
	cn.peek = false
	if body == nil && cn.raw != nil {
		// Written and the answer's first bytes read in one call, the
		// pooled connection's look at its socket first.
		cn.headRead = false
		hb := cn.headerDeadline()
		dl := hb.at
		cn.readBy(hb)
		big := len(b) > smallHead && !dl.IsZero()
		if big {
			// A head too large for the socket's buffer may wait for
			// the upstream to read it: that wait is bounded too.
			_ = cn.nc.SetWriteDeadline(dl)
		}
		stale, err := cn.sendAndRead(b, peek)
		cn.keepOut(b)
		if big {
			_ = cn.nc.SetWriteDeadline(time.Time{})
		}
		if stale {
			return nil, errStale
		}
		if err != nil {
			return nil, cn.notAnswered(cn.sendErr(err))
		}
		return cn.readResponse(req, o)
	}
	if peek && !peerOpen(cn.nc) {
		cn.keepOut(b)
		if body != nil {
			body.Close()
		}
		return nil, errStale
	}
	if !cn.headerDL.at.IsZero() {
		// The request's own deadline bounds the sending too.
		_ = cn.nc.SetWriteDeadline(cn.headerDL.at)
	}
	_, err := cn.nc.Write(b)
	cn.keepOut(b)
	if !cn.headerDL.at.IsZero() {
		_ = cn.nc.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, cn.notAnswered(cn.sendErr(err))
	}
	cn.headRead = false
	if body != nil {
		// Config.HeaderTimeout starts once the body is sent (the writer
		// arms it), as net/http's ResponseHeaderTimeout does; the
		// request's own deadline is in force from the start, and a
		// reader past it ends the writer too (the connection closes).
		cn.readBy(headerBound{at: cn.headerDL.at})
		cn.writeDone = make(chan error, 1)
		// The writer gets a copy of its own: o is the caller's, on its
		// stack (a request without a body allocates none). The keys
		// point into o and are not the writer's business.
		wo := new(outbound)
		*wo = *o
		wo.keys, wo.nkeys = nil, 0
		go cn.writeBody(req, wo, body)
	} else {
		cn.readBy(cn.headerDeadline())
	}
	return cn.readResponse(req, o)
}

// smallHead is a request head that fits in any socket's send buffer:
// writing it never waits for the upstream.
const smallHead = 16 << 10

// headerBound is when an answer's head must have come (the zero time:
// no bound), and by how much sooner a deadline already in force may end
// instead (see readBy).
type headerBound struct {
	at    time.Time
	slack time.Duration
}

// headerDeadline is when the answer's head must have come for a request
// without a streaming body: the sooner of the request's own deadline
// and Config.HeaderTimeout from now.
func (cn *conn) headerDeadline() headerBound {
	hb := cn.headerDL
	if t := cn.hp.c.cfg.HeaderTimeout; t > 0 {
		if at := time.Now().Add(t); hb.at.IsZero() || at.Before(hb.at) {
			hb = headerBound{at, t / 100}
		}
	}
	return hb
}

// readBy puts the reads under hb, unless the deadline in force is up to
// hb.slack sooner: keeping it saves a timer's move per exchange on a busy
// connection, and a head that takes all but a hundredth of its time is
// refused that little early. No bound clears the deadline.
func (cn *conn) readBy(hb headerBound) {
	cn.dlMu.Lock()
	dl := cn.readDL
	cn.dlMu.Unlock()
	if hb.at.Equal(dl) || !dl.IsZero() && !hb.at.IsZero() && !hb.at.Before(dl) && hb.at.Sub(dl) <= hb.slack {
		return
	}
	cn.setReadDeadline(hb.at)
}

// sendErr names a send that the request's deadline cut.
func (cn *conn) sendErr(err error) error {
	if !cn.canceled.Load() && isTimeout(err) {
		return ErrHeaderTimeout
	}
	return err
}

// keepOut keeps the head's buffer for the next exchange, unless it grew
// large.
func (cn *conn) keepOut(b []byte) {
	if cap(b) <= 16<<10 {
		cn.out = b[:0]
	} else {
		cn.out = nil
	}
}

// bodyError is the client's body failing: the request was not sent (or
// not completed), and the error says so.
type bodyError struct {
	err  error
	read int64
}

func (e bodyError) Error() string { return "upstream: reading the request body: " + e.err.Error() }
func (e bodyError) Unwrap() error { return e.err }

// notAnswered marks err as a failure before any answer, on a reused
// connection, so that RoundTrip may send the request again.
func (cn *conn) notAnswered(err error) error {
	if cn.reused && !cn.got && !cn.canceled.Load() {
		return &notAnsweredError{err}
	}
	return err
}

// appendHead renders the request head: the request line, Host,
// User-Agent, the one framing field (and Connection: close), the
// declared trailers, then Header's fields in key order (net/http's
// order), then the Fields in theirs.
func (cn *conn) appendHead(b []byte, req *http.Request, o *outbound) []byte {
	b = append(b, o.method...)
	b = append(b, ' ')
	b = append(b, o.uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, o.host...)
	b = append(b, "\r\n"...)
	if o.userAgent != "" {
		b = append(b, "User-Agent: "...)
		b = append(b, o.userAgent...)
		b = append(b, "\r\n"...)
	}
	if o.close && !o.closeSent {
		b = append(b, "Connection: close\r\n"...)
	}
	switch o.framing {
	case frameZero:
		b = append(b, "Content-Length: 0\r\n"...)
	case frameLength:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, o.length, 10)
		b = append(b, "\r\n"...)
	case frameChunked:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
		if len(o.trailer) > 0 {
			b = append(b, "Trailer: "...)
			for i, k := range o.trailer {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = append(b, k...)
			}
			b = append(b, "\r\n"...)
		}
	}
	for _, k := range o.keyList() {
		for _, v := range req.Header[k] {
			b = appendField(b, k, v)
		}
	}
	if o.fields != nil {
		b = append(b, o.fields.b...)
	}
	return append(b, "\r\n"...)
}

func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, strings.TrimSpace(v)...)
	return append(b, "\r\n"...)
}

// copyBuffers lends the streaming writer its buffers.
var copyBuffers = sync.Pool{New: func() any { return new([copyBuffer]byte) }}

// writeBody streams a request body after its head, in the framing
// prepare chose, then reports on writeDone. If the client's body fails,
// or is shorter than its declared length, the connection is closed
// before the message is complete, so the upstream never takes what it
// got for a whole request.
func (cn *conn) writeBody(req *http.Request, o *outbound, body io.ReadCloser) {
	err := cn.copyBody(req, o, body)
	body.Close()
	if t := cn.hp.c.cfg.HeaderTimeout; t > 0 && err == nil {
		at := time.Now().Add(t)
		if dl := cn.headerDL.at; !dl.IsZero() && dl.Before(at) {
			at = dl // the request's own deadline is sooner
		}
		cn.dlMu.Lock()
		if !cn.headRead {
			cn.readDL = at
			_ = cn.nc.SetReadDeadline(cn.readDL)
		}
		cn.dlMu.Unlock()
	}
	if err != nil {
		cn.close() // the message stays incomplete; the reader fails too
		if cn.closed.Load() && !isBodyError(err) {
			err = errConnGone
		}
	}
	cn.writeDone <- err
}

func isBodyError(err error) bool {
	var be bodyError
	return errors.As(err, &be)
}

func (cn *conn) copyBody(req *http.Request, o *outbound, body io.Reader) error {
	bp := copyBuffers.Get().(*[copyBuffer]byte)
	defer copyBuffers.Put(bp)
	buf := bp[:]
	var sent int64
	for {
		room := buf
		if o.framing == frameChunked {
			room = buf[:len(buf)-16] // the chunk's size line and end
		} else if left := o.length - sent; left < int64(len(room)) {
			room = room[:left]
		}
		if len(room) == 0 {
			break
		}
		n, rerr := body.Read(room)
		if n > 0 {
			sent += int64(n)
			var werr error
			if o.framing == frameChunked {
				werr = cn.writeChunk(room[:n])
			} else {
				_, werr = cn.nc.Write(room[:n])
			}
			if werr != nil {
				return werr
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return bodyError{rerr, sent}
		}
	}
	if o.framing == frameLength {
		if sent != o.length {
			return bodyError{ErrBodyLength, sent}
		}
		return nil
	}
	b := append(cn.trailerBuf(), "0\r\n"...)
	for _, k := range o.trailer {
		for _, v := range req.Trailer[k] {
			if !httpguts.ValidHeaderFieldValue(v) {
				return bodyError{invalid("value of trailer %q", k), sent}
			}
			b = appendField(b, k, v)
		}
	}
	b = append(b, "\r\n"...)
	_, err := cn.nc.Write(b)
	return err
}

func (cn *conn) trailerBuf() []byte { return make([]byte, 0, 64) }

// writeChunk writes p as one chunk.
func (cn *conn) writeChunk(p []byte) error {
	var line [20]byte
	head := strconv.AppendInt(line[:0], int64(len(p)), 16)
	head = append(head, "\r\n"...)
	bufs := net.Buffers{head, p, crlf}
	_, err := bufs.WriteTo(cn.nc)
	return err
}

var crlf = []byte("\r\n")

// setReadDeadline sets the read deadline (under dlMu: the streaming
// writer arms the header timeout from its goroutine).
func (cn *conn) setReadDeadline(t time.Time) {
	cn.dlMu.Lock()
	cn.readDL = t
	_ = cn.nc.SetReadDeadline(t)
	cn.dlMu.Unlock()
}

// renewReadDeadline puts the next read under timeout from now, unless
// the deadline in force ends up to a hundredth of it sooner (a busy body
// arms no timer per read). One that ends later (the head's) is moved.
func (cn *conn) renewReadDeadline(timeout time.Duration) {
	cn.readBy(headerBound{time.Now().Add(timeout), timeout / 100})
}

// bodyWait puts a wait for the body's bytes under the idle timeout, or
// under none: the head's deadline, left on the socket, is not the body's.
func (cn *conn) bodyWait() {
	if cn.idle > 0 {
		cn.renewReadDeadline(cn.idle)
		return
	}
	cn.readBy(headerBound{})
}

// fill reads more bytes into buf, making room first.
func (cn *conn) fill() error {
	if err := cn.pending; err != nil {
		cn.pending = nil
		return err
	}
	if cn.r > 0 && cn.w == len(cn.buf) {
		cn.w = copy(cn.buf, cn.buf[cn.r:cn.w])
		cn.r = 0
	}
	if cn.w == len(cn.buf) {
		nb := make([]byte, 2*len(cn.buf))
		copy(nb, cn.buf[:cn.w])
		cn.buf = nb
	}
	n, err := cn.nc.Read(cn.buf[cn.w:])
	cn.w += n
	if n > 0 {
		cn.got = true
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// readResponse reads the final answer's head (skipping informational
// ones) and returns the response, its Body reading from cn.
func (cn *conn) readResponse(req *http.Request, o *outbound) (*http.Response, error) {
	limit := cn.hp.c.cfg.MaxResponseHeaderBytes
	for n1xx := 0; ; {
		end, err := cn.readHead(limit)
		if err != nil {
			return nil, err
		}
		a, err := parseResponse(cn.buf[cn.r:end], o.answer)
		if err != nil {
			return nil, err
		}
		resp := &a.resp
		if l := o.answer; l != nil && (resp.StatusCode < 200 || resp.StatusCode >= 400 || l.Has("Trailer")) {
			// Not an answer for the list (see Limits.Answer): its Header
			// as usual.
			resp.Header = l.Header()
			l.Reset()
		}
		cn.r = end
		if code := resp.StatusCode; code >= 200 || code == http.StatusSwitchingProtocols {
			cn.dlMu.Lock()
			cn.headRead = true
			cn.dlMu.Unlock()
			// The header timeout is over. Its deadline stays on the
			// socket for the next exchange's readBy, unless a tunnel
			// (no deadlines) follows: a body's reads set their own
			// (bodyWait).
			if code == http.StatusSwitchingProtocols && cn.readDL != (time.Time{}) {
				cn.setReadDeadline(time.Time{})
			}
		}
		code := resp.StatusCode
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			if n1xx++; n1xx > max1xx {
				return nil, badResponse("too many informational answers")
			}
			if trace := httptrace.ContextClientTrace(cn.ctx); trace != nil && trace.Got1xxResponse != nil && code != http.StatusContinue {
				if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := cn.frame(a, req, o); err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// readHead reads until buf[r:] holds a whole head; it returns the index
// just past its empty line.
func (cn *conn) readHead(limit int) (int, error) {
	for {
		if i := bytes.Index(cn.buf[cn.r:cn.w], crlfcrlf); i >= 0 {
			return cn.r + i + 4, nil
		}
		if cn.w-cn.r > limit {
			return 0, badResponse("head too large")
		}
		if err := cn.fill(); err != nil {
			if cn.canceled.Load() {
				return 0, err
			}
			if isTimeout(err) {
				return 0, ErrHeaderTimeout
			}
			if !cn.got {
				return 0, cn.notAnswered(err)
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// Timeouts. Both are net.Errors whose Timeout is true.
var (
	// ErrHeaderTimeout: no response head within Config.HeaderTimeout or
	// by the request's Limits.HeaderDeadline.
	ErrHeaderTimeout error = &timeoutError{"no response headers within the header timeout"}
	// ErrBodyIdle: no byte of the response body within the body's idle
	// timeout (Config.BodyIdleTimeout, Limits.BodyIdleTimeout).
	ErrBodyIdle error = &timeoutError{"the response body stalled past the idle timeout"}
)

// timeoutError is a net.Error whose Timeout is true.
type timeoutError struct{ what string }

func (e *timeoutError) Error() string   { return "upstream: " + e.what }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

var _ net.Error = (*timeoutError)(nil)

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func badResponse(why string) error { return errors.New(ErrBadResponse.Error() + ": " + why) }

// frame decides how the answer's body is delimited and attaches it.
// Exactly one reading: a Transfer-Encoding other than chunked, or one
// with a Content-Length, or two different Content-Lengths, fail the
// exchange (the connection closes) rather than being reconciled.
func (cn *conn) frame(a *answer, req *http.Request, o *outbound) error {
	resp := &a.resp
	h := resp.Header
	// The fields are in h, or with h nil in the caller's list (see
	// Limits.Answer): the same checks on either.
	var list *hfield.List
	if h == nil {
		list = o.answer
	}
	resp.Request = req
	cl := int64(-1)
	var clVals, teVals int
	var te string
	check := func(name, v string) error {
		switch name {
		case "Content-Length":
			n, ok := parseLength(strings.TrimSpace(v))
			if !ok || cl >= 0 && n != cl {
				return badResponse("Content-Length " + strconv.Quote(v))
			}
			cl = n
			clVals++
		case "Transfer-Encoding":
			te = v
			teVals++
		}
		return nil
	}
	if list != nil {
		for _, f := range list.All() {
			if err := check(f.Name, f.Value); err != nil {
				return err
			}
		}
	} else {
		for _, name := range [...]string{"Content-Length", "Transfer-Encoding"} {
			for _, v := range h[name] {
				if err := check(name, v); err != nil {
					return err
				}
			}
		}
	}
	if clVals > 1 {
		// Repeats of the one length: forwarded once.
		if list != nil {
			seen := false
			list.DeleteFunc(func(f hfield.Field) bool {
				drop := f.Name == "Content-Length" && seen
				seen = seen || f.Name == "Content-Length"
				return drop
			})
		} else {
			h["Content-Length"] = h["Content-Length"][:1]
		}
	}
	chunked := false
	if teVals > 0 {
		if teVals != 1 || !strings.EqualFold(strings.TrimSpace(te), "chunked") {
			if list != nil {
				h = list.Header() // for the message only
			}
			return badResponse("Transfer-Encoding " + strconv.Quote(strings.Join(h["Transfer-Encoding"], ",")))
		}
		if cl >= 0 {
			return badResponse("both Content-Length and Transfer-Encoding")
		}
		if resp.ProtoMinor == 0 {
			return badResponse("chunked HTTP/1.0 answer")
		}
		if list != nil {
			list.Delete("Transfer-Encoding")
		} else {
			delete(h, "Transfer-Encoding")
		}
		chunked = true
		resp.TransferEncoding = chunkedTE
	}
	var closes, keepsAlive bool
	if list != nil {
		for _, f := range list.All() {
			if f.Name == "Connection" {
				closes = closes || hasToken([]string{f.Value}, "close")
				keepsAlive = keepsAlive || hasToken([]string{f.Value}, "keep-alive")
			}
		}
	} else {
		closes, keepsAlive = hasToken(h["Connection"], "close"), hasToken(h["Connection"], "keep-alive")
	}
	switch {
	case closes, resp.ProtoMinor == 0 && !keepsAlive, o.close:
		cn.keep = false
	}
	resp.ContentLength = cl
	// Decided before the body is attached: an empty body ends the
	// exchange at once, and the connection is then another request's.
	resp.Close = !cn.keep || resp.StatusCode == http.StatusSwitchingProtocols || !chunked && cl < 0 && !noBodyFor(req, resp)
	noBody := noBodyFor(req, resp)
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		resp.ContentLength = -1
		cn.keep = false
		resp.Body = &upgraded{cn: cn}
		cn.endWatch() // the tunnel outlives the request's context
		return nil
	case noBody:
		if req.Method != http.MethodHead {
			resp.ContentLength = 0 // 204, 304 (a HEAD's is the GET's, as declared)
		}
		resp.Body = http.NoBody
		cn.done(true)
		return nil
	case chunked:
		resp.ContentLength = -1
		if vv, ok := h["Trailer"]; ok {
			for _, v := range vv {
				for t := range strings.SplitSeq(v, ",") {
					if name := http.CanonicalHeaderKey(strings.TrimSpace(t)); name != "" {
						if resp.Trailer == nil {
							resp.Trailer = make(http.Header)
						}
						resp.Trailer[name] = nil
					}
				}
			}
			delete(h, "Trailer")
		}
		resp.Body = &chunkedBody{exchangeBody: exchangeBody{cn: cn}, resp: resp}
	case cl == 0:
		resp.Body = http.NoBody
		cn.done(true)
	case cl > 0:
		a.fixed = fixedBody{exchangeBody: exchangeBody{cn: cn}, left: cl}
		resp.Body = &a.fixed
	default:
		cn.keep = false // read until the upstream closes
		resp.Body = &untilCloseBody{exchangeBody{cn: cn}}
	}
	return nil
}

// noBodyFor reports whether an answer has no body whatever it declares.
func noBodyFor(req *http.Request, resp *http.Response) bool {
	return req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
}

var chunkedTE = []string{"chunked"}

// endWatch stops watching the request's context for good.
func (cn *conn) endWatch() {
	if !cn.unwatch() {
		cn.canceled.Store(true)
	}
}

// unwatch stops watching the request's context; false when the watch
// already fired (the connection is closed, or closing).
func (cn *conn) unwatch() bool {
	switch {
	case cn.watcher != nil:
		w := cn.watcher
		cn.watcher = nil
		return w.StopWatch()
	case cn.stop != nil:
		stop := cn.stop
		cn.stop = nil
		return stop()
	}
	return true
}

// done ends the exchange, once: the connection goes back to the pool
// when the answer ended cleanly (ok), every byte of the request was
// sent, and both sides may keep it; else it closes.
func (cn *conn) done(ok bool) {
	stopped := cn.unwatch()
	if cn.writeDone != nil {
		select {
		case err := <-cn.writeDone:
			ok = ok && err == nil
		default:
			// The answer ended before the body was sent: this
			// connection cannot carry another request. Closing it
			// ends the writer's sends; wait for it to let go of the
			// body.
			ok = false
			cn.close()
			<-cn.writeDone
		}
		cn.writeDone = nil
	}
	// Bytes past the answer's end were not asked for: whatever they
	// are, they must never be read as the next request's answer.
	if !ok || !stopped || !cn.keep || cn.canceled.Load() || cn.closed.Load() || cn.r != cn.w {
		cn.close()
		return
	}
	cn.r, cn.w = 0, 0
	cn.ctx = nil
	cn.hp.put(cn)
}

// parseLength parses 1*DIGIT.
func parseLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
