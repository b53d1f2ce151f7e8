package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/internal/hfield"
)

// bufferBeforeChunking is how much of a body the bridge holds before it
// commits the head: an answer that ends within it gets a Content-Length,
// a longer one is chunked (net/http's rule and size).
const bufferBeforeChunking = 2048

// serveHandler runs h (Config.Handler, or the one a FastHandler chose)
// for the parsed request through the net/http bridge. It reports whether
// the connection may carry another request.
func (c *conn) serveHandler(now time.Time, keep bool, h http.Handler) bool {
	req, err := c.newRequest()
	if err != nil {
		pe, ok := err.(*parseError)
		if !ok {
			pe = &parseError{400, "malformed request target"}
		}
		c.writeError(pe)
		c.lingerClose()
		return false
	}
	if req.RequestURI == "*" && req.Method == http.MethodOptions {
		// net/http answers OPTIONS * itself.
		c.out = append(c.out, statusLine(200)...)
		c.out = append(c.out, "Content-Length: 0\r\n"...)
		c.out = append(c.out, c.s.dateFor(now)...)
		if !keep {
			c.out = append(c.out, "Connection: close\r\n"...)
		}
		c.out = append(c.out, "\r\n"...)
		return keep && c.discardBody(req)
	}
	if c.ctx == nil {
		c.ctx = context.WithValue(c.s.baseCtx, http.LocalAddrContextKey, c.rwc.LocalAddr())
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.cancelReq = cancel
	defer func() {
		c.cancelReq = nil
		cancel()
	}()
	req = req.WithContext(ctx)
	var b *body
	if c.h.hasBody() {
		b = newBody(c, func() { c.startBackgroundRead(cancel) })
		b.req = req
		req.Body = b
	} else {
		req.Body = http.NoBody
	}
	w := &respWriter{c: c, req: req, body: b, header: make(http.Header), cl: -1,
		isHead: req.Method == http.MethodHead, closeAfter: !keep, pending: c.pending[:0]}
	if b == nil {
		c.startBackgroundRead(cancel)
	}
	defer func() {
		if c.hijacked {
			return // the connection is the handler's now
		}
		// Deadlines the handler set end with its request.
		if c.handlerWriteDL {
			c.handlerWriteDL, c.writeDL = false, time.Time{}
			_ = c.rwc.SetWriteDeadline(time.Time{})
		}
		if c.handlerReadDL {
			c.handlerReadDL = false
			c.setReadDeadline(time.Time{}, dlNone)
		}
	}()
	if !c.runHandler(w, req, h) || c.hijacked {
		return false
	}
	w.finish()
	if b != nil {
		b.end() // a reader the handler left behind stops here
	}
	if c.handlerWriteDL {
		c.flush() // the answer's tail under the handler's deadline
	}
	c.stopBackgroundRead()
	return w.reusable() && !c.peerDone
}

// runHandler calls the handler, recovering a panic as net/http does: it
// is logged (but for http.ErrAbortHandler) and the connection closed
// without writing what was left.
func (c *conn) runHandler(w *respWriter, req *http.Request, h http.Handler) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != http.ErrAbortHandler {
				c.logf("engine: panic serving %v: %v", req.RemoteAddr, r)
			}
			if c.hijacked {
				ok = false
				return
			}
			c.stopBackgroundRead()
			c.out = c.out[:0]
			c.werr = errPanicked
			ok = false
		}
	}()
	h.ServeHTTP(w, req)
	return true
}

// errPanicked marks a connection whose handler panicked: nothing more is
// written on it.
var errPanicked = errors.New("engine: handler panicked")

// remoteAddr is the client's address as a string, made once per
// connection.
func (c *conn) remoteAddr() string {
	if c.remote == "" {
		c.remote = c.rwc.RemoteAddr().String()
	}
	return c.remote
}

// newRequest builds the *http.Request net/http would hand a handler for
// the parsed head (Host moved out of Header, the URL parsed from the
// target, a CONNECT target read as an authority).
func (c *conn) newRequest() (*http.Request, error) {
	h := &c.h
	target := string(h.target)
	rawurl := target
	authority := string(h.method) == http.MethodConnect && !strings.HasPrefix(rawurl, "/")
	if authority {
		rawurl = "http://" + rawurl
	}
	u, err := url.ParseRequestURI(rawurl)
	if err != nil {
		return nil, err
	}
	if authority {
		u.Scheme = ""
	}
	hdr := make(http.Header, len(h.fields))
	var trailer http.Header
	for _, f := range h.fields {
		k := http.CanonicalHeaderKey(string(f.name))
		if k == "Host" || k == "Transfer-Encoding" {
			continue // net/http moves them to Host and TransferEncoding
		}
		if k == "Trailer" && h.chunked {
			// Declared trailers move to Request.Trailer, filled when the
			// body ends, as net/http does; a framing field is refused.
			var bad bool
			forEachToken(f.value, func(tok []byte) {
				name := http.CanonicalHeaderKey(string(tok))
				if !trailerAllowed(name) {
					bad = true
					return
				}
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[name] = nil
			})
			if bad {
				return nil, errBadTrailer
			}
			continue
		}
		hdr[k] = append(hdr[k], string(f.value))
	}
	req := &http.Request{
		Method:     string(h.method),
		URL:        u,
		Proto:      "HTTP/1." + strconv.Itoa(h.minor),
		ProtoMajor: 1,
		ProtoMinor: h.minor,
		Header:     hdr,
		Host:       u.Host,
		RequestURI: target,
		RemoteAddr: c.remoteAddr(),
		Close:      h.close,
		Trailer:    trailer,
	}
	if req.Host == "" {
		req.Host = string(h.host)
	}
	switch {
	case h.chunked:
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
	default:
		req.ContentLength = h.contentLength
	}
	return req, nil
}

// errBadTrailer refuses a request that declares a framing field as a
// trailer.
var errBadTrailer = &parseError{400, "bad trailer key"}

// trailerAllowed reports whether a field may come in a request's trailer
// section: never one that frames or routes the message (net/http refuses
// the first three when declared; the engine drops all four when sent).
func trailerAllowed(canonical string) bool {
	switch canonical {
	case "Content-Length", "Transfer-Encoding", "Trailer", "Host":
		return false
	}
	return true
}

// discardBody drops a body nobody reads (OPTIONS *); false if it could
// not be dropped whole.
func (c *conn) discardBody(req *http.Request) bool {
	if !c.h.hasBody() {
		return true
	}
	return newBody(c, nil).drain(maxDrainBody)
}

// respWriter is the http.ResponseWriter of the net/http bridge. It
// follows net/http's rules for the head it writes (Content-Length for an
// answer that ends within the first 2 KiB, else chunked; Date; sniffed
// Content-Type; Connection: close when the connection will close; no
// body for HEAD, 1xx, 204 and 304) and writes through the connection's
// buffer, with the large writes of a file going to sendfile.
type respWriter struct {
	c      *conn
	req    *http.Request
	body   *body // nil without a request body
	header http.Header
	// list: the answer's fields in order, ahead of header's (a Stream
	// begun with StreamList; header is then made when asked for).
	list        *hfield.List
	status      int
	wroteHeader bool
	committed   bool
	chunking    bool
	closeAfter  bool
	isHead      bool
	handlerDone bool
	cl          int64 // declared Content-Length, -1 if none
	written     int64
	pending     []byte
	trailers    []string // declared in the head's Trailer field (chunked answers only)
}

func (w *respWriter) Header() http.Header { return w.header }

func (w *respWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.c.hijacked {
		w.c.logf("engine: WriteHeader(%d) on a hijacked connection", code)
		return
	}
	if w.wroteHeader {
		w.c.logf("engine: superfluous WriteHeader call (%d)", code)
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		return // informational answers are not sent
	}
	w.wroteHeader, w.status = true, code
	if v := w.get("Content-Length"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n >= 0 {
			w.cl = n
		} else {
			w.c.logf("engine: invalid Content-Length of %q", v)
			w.header.Del("Content-Length")
			if w.list != nil {
				w.list.Delete("Content-Length")
			}
		}
	}
}

func (w *respWriter) Write(p []byte) (int, error) {
	if w.c.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.c.werr != nil {
		return 0, w.c.werr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.cl != -1 && w.written > w.cl {
		return 0, http.ErrContentLength
	}
	if !w.committed {
		if len(w.pending)+len(p) <= bufferBeforeChunking {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.commit(append(w.pending, p...))
		p = append(w.pending, p...)
		w.pending = nil
	}
	if w.isHead {
		return len(p), nil
	}
	if !w.sendBody(p) {
		return 0, w.c.werr
	}
	return len(p), nil
}

// sendBody writes body bytes, framed as a chunk when chunking.
func (w *respWriter) sendBody(p []byte) bool {
	if len(p) == 0 {
		return true
	}
	c := w.c
	if w.chunking {
		c.out = strconv.AppendInt(c.out, int64(len(p)), 16)
		c.out = append(c.out, "\r\n"...)
		if !c.write(p) {
			return false
		}
		c.out = append(c.out, "\r\n"...)
		return true
	}
	return c.write(p)
}

// Flush sends the head and what is buffered (http.Flusher).
func (w *respWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting the write error, for
// http.ResponseController.
func (w *respWriter) FlushError() error {
	if w.c.hijacked {
		return http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		p := w.pending
		w.pending = nil
		w.commit(p)
		if !w.isHead && !w.sendBody(p) {
			return w.c.werr
		}
	}
	if !w.c.flush() {
		return w.c.werr
	}
	return nil
}

// ReadFrom sends src, through sendfile when the answer is not chunked
// (a file with a Content-Length, as ServeContent sends it).
func (w *respWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.c.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.committed && w.chunking || w.isHead || !bodyAllowed(w.status) || !w.committed && w.get("Content-Type") == "" {
		return io.Copy(writerOnly{w}, src)
	}
	if !w.committed {
		p := w.pending
		w.pending = nil
		w.commit(p)
		if w.chunking {
			if !w.sendBody(p) {
				return 0, w.c.werr
			}
			return io.Copy(writerOnly{w}, src)
		}
		if !w.sendBody(p) {
			return 0, w.c.werr
		}
	}
	if w.cl != -1 {
		left := w.cl - w.written
		if lr, ok := src.(*io.LimitedReader); !ok || lr.N > left {
			src = &io.LimitedReader{R: src, N: left + 1}
		}
	}
	n, err := w.c.readFrom(src)
	w.written += n
	if w.cl != -1 && w.written > w.cl {
		return n, http.ErrContentLength
	}
	return n, err
}

// Hijack hands the connection to the handler (http.Hijacker, for
// upgrades): what is written of the answer so far is sent first, the
// deadlines are cleared, and the returned reader starts with the bytes
// the engine had read past the request. From then on the engine never
// reads, writes or closes the connection, and stops tracking it
// (ConnState reports StateHijacked), as net/http does.
func (w *respWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	switch {
	case c.hijacked:
		return nil, nil, http.ErrHijacked
	case w.handlerDone:
		return nil, nil, errors.New("engine: Hijack after the handler returned")
	case c.werr != nil:
		return nil, nil, c.werr
	}
	if w.wroteHeader {
		if err := w.FlushError(); err != nil {
			return nil, nil, err
		}
	} else if !c.flush() {
		return nil, nil, c.werr
	}
	c.stopBackgroundRead()
	c.hijacked = true
	_ = c.rwc.SetDeadline(time.Time{})
	var r io.Reader = c.rwc
	if c.w > c.r {
		r = io.MultiReader(bytes.NewReader(slices.Clone(c.buf[c.r:c.w])), c.rwc)
		c.r = c.w
	}
	c.setState(http.StateHijacked)
	c.s.trackConn(c, false)
	return c.rwc, bufio.NewReadWriter(bufio.NewReader(r), bufio.NewWriter(c.rwc)), nil
}

// SetWriteDeadline sets the connection's write deadline for the rest of
// this answer, in place of the send timeout's renewals (for
// http.ResponseController). A zero t means none.
func (w *respWriter) SetWriteDeadline(t time.Time) error {
	w.c.handlerWriteDL = true
	w.c.writeDL = t
	return w.c.rwc.SetWriteDeadline(t)
}

// SetReadDeadline sets the connection's read deadline for the rest of
// this request's body, in place of the body timeout's renewals (for
// http.ResponseController). A zero t means none.
func (w *respWriter) SetReadDeadline(t time.Time) error {
	w.c.handlerReadDL = true
	w.c.readDL, w.c.readKind = t, dlNone
	return w.c.rwc.SetReadDeadline(t)
}

// writerOnly hides ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// finish completes the answer after the handler returned.
func (w *respWriter) finish() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		p := w.pending
		w.pending = nil
		w.commit(p)
		if !w.isHead {
			w.sendBody(p)
		}
		if cap(p) <= bufferBeforeChunking {
			w.c.pending = p[:0] // copied out: the next answer's buffer
		}
	}
	if w.chunking {
		w.c.out = w.appendTrailers(append(w.c.out, "0\r\n"...))
		w.c.out = append(w.c.out, "\r\n"...)
	}
}

// appendTrailers renders the trailer section of a chunked answer, as
// net/http does: the values, set after the head, of the names declared in
// its Trailer field, and every field named with http.TrailerPrefix. A
// name that may not be a trailer (framing, routing, hop-by-hop) is left
// out.
func (w *respWriter) appendTrailers(b []byte) []byte {
	for _, k := range w.trailers {
		for _, v := range w.header[k] {
			b = appendField(b, k, v)
		}
	}
	for k, vv := range w.header {
		name, ok := strings.CutPrefix(k, http.TrailerPrefix)
		if !ok {
			continue
		}
		name = http.CanonicalHeaderKey(name)
		if !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidTrailerHeader(name) || slices.Contains(w.trailers, name) && len(w.header[name]) > 0 {
			continue
		}
		for _, v := range vv {
			b = appendField(b, name, v)
		}
	}
	return b
}

// appendField appends "k: v\r\n", the value as net/http writes it.
func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = appendFieldValue(b, v)
	return append(b, "\r\n"...)
}

// declaresTrailers reports whether the handler announced trailers: a
// Trailer field, or a field named with http.TrailerPrefix.
func (w *respWriter) declaresTrailers() bool {
	if w.hasValue("Trailer") {
		return true
	}
	for k := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// reusable reports whether the connection may carry another request.
func (w *respWriter) reusable() bool {
	switch {
	case w.closeAfter || w.c.werr != nil:
		return false
	case !w.isHead && w.cl != -1 && bodyAllowed(w.status) && w.cl != w.written:
		return false // it did not write what it declared: the framing is lost
	case w.body != nil && !w.body.eof:
		return false
	}
	return true
}

// commit renders the head into the connection's buffer, with net/http's
// rules (see respWriter). p is the start of the body, for the
// Content-Type sniff and, when the handler is done, the Content-Length.
func (w *respWriter) commit(p []byte) {
	w.committed = true
	c := w.c
	// The request's version and Connection: close, as the handler's
	// *http.Request says (a natively written answer has none: the
	// parsed head's).
	minor, reqClose := c.h.minor, c.h.close
	if w.req != nil {
		minor, reqClose = w.req.ProtoMinor, w.req.Close
	}
	keepAlives := c.s.keepAlives()
	var excl excluded
	exclude := &excl
	var extraBuf [6]string
	extra := extraBuf[:0] // "Name: value" lines

	te := w.get("Transfer-Encoding")
	hasTE := te != ""
	if w.handlerDone && !hasTE && bodyAllowed(w.status) && !w.hasValue("Content-Length") && (!w.isHead || len(p) > 0) && !w.declaresTrailers() {
		w.cl = int64(len(p))
		extra = append(extra, "Content-Length: "+strconv.Itoa(len(p)))
	}
	hasCL := w.cl != -1
	wants10KeepAlive := minor == 0 && c.h.keepAlive && !c.h.close
	if wants10KeepAlive && keepAlives && w.hasValue("Content-Length") && w.get("Connection") == "keep-alive" {
		w.closeAfter = false
	}
	if wants10KeepAlive && (w.isHead || hasCL || !bodyAllowed(w.status)) {
		w.closeAfter = w.closeAfter && !keepAlives
		if !w.has("Connection") && !w.closeAfter {
			extra = append(extra, "Connection: keep-alive")
		}
	} else if minor == 0 || reqClose {
		w.closeAfter = true
	}
	if w.get("Connection") == "close" || !keepAlives {
		w.closeAfter = true
	}
	if w.body != nil && w.body.expect {
		w.closeAfter = true // the client may or may not send the body now
	}
	if w.body != nil && !w.closeAfter && !w.body.drain(maxDrainBody) {
		w.closeAfter = true
	}
	if bodyAllowed(w.status) {
		if !w.has("Content-Type") && w.get("Content-Encoding") == "" && !hasTE && len(p) > 0 {
			extra = append(extra, "Content-Type: "+http.DetectContentType(p))
		}
	} else {
		for _, k := range []string{"Content-Type", "Content-Length", "Transfer-Encoding"} {
			if k != "Content-Type" || w.status == http.StatusNotModified {
				exclude.add(k)
			}
		}
		hasCL = false
	}
	if hasCL && hasTE && te != "identity" {
		exclude.add("Content-Length")
		hasCL = false
	}
	switch {
	case w.isHead || !bodyAllowed(w.status):
		exclude.add("Transfer-Encoding")
	case hasCL:
		exclude.add("Transfer-Encoding")
	case minor >= 1:
		if te == "identity" {
			w.closeAfter = true
			exclude.add("Transfer-Encoding")
		} else {
			w.chunking = true
			extra = append(extra, "Transfer-Encoding: chunked")
			if hasTE {
				exclude.add("Transfer-Encoding")
			}
		}
	default:
		w.closeAfter = true
		exclude.add("Transfer-Encoding")
	}
	if w.chunking {
		exclude.add("Content-Length")
		w.forEach("Trailer", func(v string) {
			forEachToken([]byte(v), func(tok []byte) {
				if name := http.CanonicalHeaderKey(string(tok)); httpguts.ValidTrailerHeader(name) {
					w.trailers = append(w.trailers, name)
				}
			})
		})
	}
	if w.closeAfter && (!keepAlives || !hasToken(w.get("Connection"), "close")) && w.status != http.StatusSwitchingProtocols {
		exclude.add("Connection")
		if minor >= 1 {
			extra = append(extra, "Connection: close")
		}
	}

	b := append(c.out, statusLine(w.status)...)
	// A list's fields as they came; the map's in name order (as net/http
	// writes them), each name's values taken in the one pass over it.
	if w.list != nil {
		for _, f := range w.list.All() {
			if !exclude.has(f.Name) && httpguts.ValidHeaderFieldName(f.Name) {
				b = appendField(b, f.Name, f.Value)
			}
		}
	}
	var fieldBuf [16]headerField
	fields := fieldBuf[:0]
	for k, vv := range w.header {
		if !exclude.has(k) && httpguts.ValidHeaderFieldName(k) {
			fields = append(fields, headerField{k, vv})
		}
	}
	slices.SortFunc(fields, func(x, y headerField) int { return strings.Compare(x.name, y.name) })
	for _, f := range fields {
		for _, v := range f.values {
			b = appendField(b, f.name, v)
		}
	}
	for _, line := range extra {
		b = append(b, line...)
		b = append(b, "\r\n"...)
	}
	if !w.has("Date") {
		b = append(b, c.s.dateFor(time.Now())...)
	}
	b = append(b, "\r\n"...)
	c.out = b
}

// get is the first value of the answer's field name (canonical): the
// header's, else the list's.
func (w *respWriter) get(name string) string {
	if v := headerValue(w.header, name); v != "" || w.list == nil {
		return v
	}
	return w.list.Get(name)
}

// has reports whether the answer has a field name (canonical).
func (w *respWriter) has(name string) bool {
	_, ok := w.header[name]
	return ok || w.list != nil && w.list.Has(name)
}

// hasValue reports whether the answer has a value for the field name
// (canonical): a header key with no values (a handler's way to suppress
// one) has none.
func (w *respWriter) hasValue(name string) bool {
	return len(w.header[name]) > 0 || w.list != nil && w.list.Has(name)
}

// forEach calls fn with each value of the answer's field name
// (canonical), the list's first.
func (w *respWriter) forEach(name string, fn func(string)) {
	if w.list != nil {
		for _, f := range w.list.All() {
			if f.Name == name {
				fn(f.Value)
			}
		}
	}
	for _, v := range w.header[name] {
		fn(v)
	}
}

// headerValue is h.Get(name) for a canonical name, without Get's
// canonicalisation of the name on every call.
func headerValue(h http.Header, name string) string {
	if vv := h[name]; len(vv) > 0 {
		return vv[0]
	}
	return ""
}

// headerField is a header's name and values, as commit writes them.
type headerField struct {
	name   string
	values []string
}

// excluded is the small set of header names commit leaves out.
type excluded struct {
	names [4]string
	n     int
}

func (e *excluded) add(k string) {
	if !e.has(k) && e.n < len(e.names) {
		e.names[e.n] = k
		e.n++
	}
}

func (e *excluded) has(k string) bool {
	for _, x := range e.names[:e.n] {
		if x == k {
			return true
		}
	}
	return false
}

// appendFieldValue appends v with CR and LF replaced by spaces and
// surrounding whitespace trimmed, as net/http writes header values.
func appendFieldValue(b []byte, v string) []byte {
	v = strings.TrimSpace(v)
	if strings.IndexByte(v, '\r') < 0 && strings.IndexByte(v, '\n') < 0 {
		return append(b, v...) // the common value, copied at once
	}
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if ch == '\r' || ch == '\n' {
			ch = ' '
		}
		b = append(b, ch)
	}
	return b
}

// hasToken reports whether the comma-separated list v has token
// (ASCII case ignored).
func hasToken(v, token string) bool {
	for _, t := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// bgRead is the read that watches for the client going away while a
// handler runs, as net/http's background read does: its end (EOF or
// an error) cancels the request's context; a byte it gets (a pipelined
// request) is handed back to the connection.
type bgRead struct {
	done   chan struct{}
	b      [1]byte
	n      int
	err    error
	cancel context.CancelFunc
}

// startBackgroundRead starts the watch, once the request body (if any)
// has been read.
func (c *conn) startBackgroundRead(cancel context.CancelFunc) {
	if c.bg != nil || c.w > c.r {
		return // already watching, or the next request is already here
	}
	bg := &bgRead{done: make(chan struct{}), cancel: cancel}
	c.bg = bg
	c.setReadDeadline(time.Time{}, dlNone)
	go func() {
		defer close(bg.done)
		bg.n, bg.err = c.rwc.Read(bg.b[:])
		if bg.n == 0 && bg.err != nil && !isTimeout(bg.err) {
			bg.cancel()
		}
	}()
}

// stopBackgroundRead ends the watch and waits for it, keeping a byte it
// read. After a client went away, the connection is marked done.
func (c *conn) stopBackgroundRead() {
	bg := c.bg
	if bg == nil {
		return
	}
	c.bg = nil
	_ = c.rwc.SetReadDeadline(aLongTimeAgo)
	<-bg.done
	c.setReadDeadline(time.Time{}, dlNone)
	if bg.n > 0 {
		if c.w == len(c.buf) {
			c.w = copy(c.buf, c.buf[c.r:c.w])
			c.r = 0
		}
		c.buf[c.w] = bg.b[0]
		c.w++
	} else if bg.err != nil && !isTimeout(bg.err) {
		c.peerDone = true // the client sent its last byte: answer, then close
	}
}

// aLongTimeAgo is a deadline in the past, to end a pending read.
var aLongTimeAgo = time.Unix(1, 0)
