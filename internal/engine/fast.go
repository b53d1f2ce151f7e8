package engine

import (
	"bytes"
	"net"
	"time"
	"unsafe"
)

// Request is a FastHandler's view of a request the engine parsed: the
// head only (the fast path sees no request with a body). Strings it
// returns point into the connection's read buffer and are valid only
// until ServeFast returns; copy what must outlive it.
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
