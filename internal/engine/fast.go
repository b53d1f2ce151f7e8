package engine

import (
	"bytes"
	"net"
	"net/http"
	"net/netip"
	"time"
	"unsafe"
)

// Request is a FastHandler's view of a request the engine parsed: its
// head. The fast path sees a request with a body (or one that expects
// 100 Continue, or asks to upgrade) only with Config.FastBodies, and
// never reads the body itself: it answers without it (the engine then
// drops or closes what is left) or hands the request to a handler with
// Response.ServeWith. Strings it returns point into the connection's
// read buffer and are valid only until ServeFast returns or calls
// ServeWith; copy what must outlive it.
type Request struct {
	c *conn
}

func b2s(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Method returns the request method, as sent ("GET").
func (r *Request) Method() string { return b2s(r.c.h.method) }

// Target returns the request target as sent ("/a/b?c", "*",
// "http://host/a").
func (r *Request) Target() string { return b2s(r.c.h.target) }

// Path returns the path of an origin-form target ("/a/b" of "/a/b?c")
// and true, or "" and false for a target in another form or one whose
// path holds a percent-escape (which the net/http bridge decodes as
// net/http does).
func (r *Request) Path() (string, bool) {
	t := r.c.h.target
	if len(t) == 0 || t[0] != '/' {
		return "", false
	}
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		t = t[:i]
	}
	if bytes.IndexByte(t, '%') >= 0 {
		return "", false
	}
	return b2s(t), true
}

// Header returns the first value of the named field and whether the
// request has it. name is matched without regard to ASCII case.
func (r *Request) Header(name string) (string, bool) {
	for _, f := range r.c.h.fields {
		if len(f.name) == len(name) && equalFold(f.name, name) {
			return b2s(f.value), true
		}
	}
	return "", false
}

// Has reports whether the request has the named field.
func (r *Request) Has(name string) bool {
	_, ok := r.Header(name)
	return ok
}

// Get returns the first value of the named field, or "" (as
// http.Header.Get does, with name matched without regard to case).
func (r *Request) Get(name string) string {
	v, _ := r.Header(name)
	return v
}

// Values returns every value of the named field, in order (as
// http.Header.Values does). Unlike the other views it allocates the
// slice; its strings point into the read buffer.
func (r *Request) Values(name string) []string {
	var out []string
	for _, f := range r.c.h.fields {
		if len(f.name) == len(name) && equalFold(f.name, name) {
			out = append(out, b2s(f.value))
		}
	}
	return out
}

// Host returns the Host field's value ("" for an HTTP/1.0 request
// without one). It is the request's host as net/http reads it for an
// origin-form target (Path's ok); for an absolute-form target net/http
// takes the host from the target instead.
func (r *Request) Host() string { return b2s(r.c.h.host) }

// HasBody reports whether the request declares a body (a Content-Length
// above zero, or chunked).
func (r *Request) HasBody() bool { return r.c.h.hasBody() }

// Upgrade reports whether the request asks to switch protocols
// (Connection: upgrade with an Upgrade field).
func (r *Request) Upgrade() bool { return r.c.h.upgrade }

// RemoteAddrString returns the client's address as a string ("ip:port"),
// made once per connection.
func (r *Request) RemoteAddrString() string { return r.c.remoteAddr() }

// RemoteAddrPort returns the client's address and port, read once per
// connection; false when the connection's address is not an IP one.
func (r *Request) RemoteAddrPort() (netip.AddrPort, bool) {
	c := r.c
	if !c.peerSet {
		c.peerSet = true
		switch a := c.rwc.RemoteAddr().(type) {
		case *net.TCPAddr:
			c.peer, c.peerOK = a.AddrPort(), a.IP != nil
		default:
			ap, err := netip.ParseAddrPort(c.remoteAddr())
			c.peer, c.peerOK = ap, err == nil
		}
	}
	return c.peer, c.peerOK
}

// ProtoMinor returns 1 for HTTP/1.1, 0 for HTTP/1.0.
func (r *Request) ProtoMinor() int { return r.c.h.minor }

// RemoteAddr returns the client's address.
func (r *Request) RemoteAddr() net.Addr { return r.c.rwc.RemoteAddr() }

// equalFold compares b and s ignoring ASCII case.
func equalFold(b []byte, s string) bool {
	for i := 0; i < len(s); i++ {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Response writes a FastHandler's answer.
type Response struct {
	c     *conn
	now   time.Time
	keep  bool // the connection stays open after this answer
	wrote bool
	st    Stream // a streamed answer (Stream)
	// isHead, when headSet, is whether the request is a HEAD, noted by
	// WatchClient before the read buffer may move.
	isHead, headSet bool
}

// Received is when the request's head was read (the real clock): a
// handler that times the request from its arrival needs no clock read
// of its own.
func (w *Response) Received() time.Time { return w.now }

// ServeWith answers the request with h, through the net/http bridge,
// now: h gets the *http.Request and http.ResponseWriter Config.Handler
// would have got (the body included). A FastHandler that has decided
// something about the request (an admission, say) calls it with a
// handler that carries the decision, and releases what it holds when
// ServeWith returns, then returns true. The Request's views are not
// valid once ServeWith is called. ServeWith may be called once, instead
// of Write.
func (w *Response) ServeWith(h http.Handler) {
	if w.wrote {
		panic("engine: Response.ServeWith after an answer")
	}
	w.c.mustLeaveLoop("ServeWith")
	w.wrote = true
	w.keep = w.c.serveHandler(w.now, w.keep, h)
}

// Write sends a complete answer: the status, the header lines in
// header (each "Name: value\r\n", pre-rendered; without Date and
// Connection, which the engine adds), and body. For a HEAD request, or
// a status that has no body (1xx, 204, 304), the body is not sent; the
// header lines still describe it (a HEAD's Content-Length is the GET's).
// Write may be called once.
func (w *Response) Write(status int, header, body []byte) {
	if w.wrote {
		panic("engine: Response.Write called twice")
	}
	w.wrote = true
	c := w.c
	if w.keep && c.h.hasBody() {
		// The body is left unread: drop it, as net/http does after a
		// handler that did not read it, or close. A client waiting for
		// 100 Continue may or may not send it now, so that connection
		// closes too.
		if c.h.expect || !newBody(c, nil).drain(maxDrainBody) {
			w.keep = false
		}
	}
	b := c.out
	b = append(b, statusLine(status)...)
	b = append(b, header...)
	b = append(b, c.s.dateFor(w.now)...)
	switch {
	case !w.keep:
		b = append(b, "Connection: close\r\n"...)
	case c.h.minor == 0:
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	b = append(b, "\r\n"...)
	c.out = b
	if string(c.h.method) == "HEAD" || !bodyAllowed(status) {
		return
	}
	c.write(body)
}

// Close makes the connection close after the answer (call it before
// Write): the answer then carries Connection: close.
func (w *Response) Close() { w.keep = false }

// bodyAllowed reports whether a status may carry a body.
func bodyAllowed(status int) bool {
	return !(status >= 100 && status < 200 || status == 204 || status == 304)
}
