package engine

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// Errors of a request body.
var (
	errBadChunk      = errors.New("engine: malformed chunked request body")
	errChunkTooLarge = errors.New("engine: chunk line or trailer section too long")
	errBodyClosed    = http.ErrBodyReadAfterClose
)

// maxChunkLine bounds one chunk-size line, extensions included, and
// maxTrailer the trailer section: chunk extensions carry nothing the
// engine uses, and a client must not make it read unbounded metadata.
const (
	maxChunkLine = 4 << 10
	maxTrailer   = 16 << 10
)

// body is a request body read from the connection: Content-Length
// bytes, or chunked. It renews the body deadline on every read, sends
// 100 Continue before the first read when the client expects it, and
// starts the background read once the body ends.
type body struct {
	// mu serialises reads with the end of the handler: a reader the
	// handler left behind (a goroutine still copying the body) cannot
	// touch the connection once the engine has moved on.
	mu        sync.Mutex
	ended     bool // the handler returned: reads fail
	c         *conn
	chunked   bool
	remaining int64 // bytes left: of the body (fixed) or of the current chunk
	inChunk   bool  // chunked: inside a chunk's data
	eof       bool
	err       error // sticky
	closed    bool
	expect    bool          // 100 Continue not sent yet
	onEOF     func()        // called once, when the body has ended
	req       *http.Request // its Trailer gets the trailer section; nil: dropped
}

func newBody(c *conn, onEOF func()) *body {
	b := &body{c: c, chunked: c.h.chunked, expect: c.h.expect, onEOF: onEOF}
	if !b.chunked {
		b.remaining = c.h.contentLength
		if b.remaining == 0 {
			b.eof = true
		}
	}
	return b
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.ended {
		return 0, errBodyClosed
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.expect {
		b.expect = false
		b.c.out = append(b.c.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
		if !b.c.flush() {
			b.err = b.c.werr
			return 0, b.err
		}
	}
	var n int
	var err error
	if b.chunked {
		n, err = b.readChunked(p)
	} else {
		n, err = b.readFixed(p)
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	if err == io.EOF || b.eof {
		b.eof = true
		if b.onEOF != nil {
			f := b.onEOF
			b.onEOF = nil
			f()
		}
		if n > 0 {
			return n, nil
		}
		return 0, io.EOF
	}
	return n, err
}

// Close marks the body closed; what is unread stays on the connection
// (the engine drains or closes it after the answer).
func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// end marks the handler returned (waiting for a read in progress on
// another goroutine) and reports whether the body was read to its end.
func (b *body) end() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	return b.eof
}

func (b *body) readFixed(p []byte) (int, error) {
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.readBody(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *body) readChunked(p []byte) (int, error) {
	for !b.inChunk {
		line, err := b.c.readLine(maxChunkLine)
		if err != nil {
			return 0, err
		}
		size, ok := parseChunkSize(line)
		if !ok {
			return 0, errBadChunk
		}
		if size == 0 {
			if err := b.readTrailer(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		b.remaining, b.inChunk = size, true
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.readBody(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		b.inChunk = false
		line, lerr := b.c.readLine(2)
		if lerr != nil {
			return n, lerr
		}
		if len(line) != 0 {
			return n, errBadChunk
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readTrailer reads the trailer section after the last chunk: field
// lines, each valid, ending with an empty line. The fields go to the
// request's Trailer (replacing the declared names' nil values, as
// net/http merges them), except those that frame or route a message.
func (b *body) readTrailer() error {
	total := 0
	var got http.Header
	for {
		line, err := b.c.readLine(maxTrailer - total)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			break
		}
		total += len(line) + 2
		name, value, err := parseTrailerField(line)
		if err != nil {
			return err
		}
		if b.req == nil || !trailerAllowed(name) {
			continue
		}
		if got == nil {
			got = make(http.Header)
		}
		got[name] = append(got[name], value)
	}
	if len(got) > 0 {
		if b.req.Trailer == nil {
			b.req.Trailer = got
		} else {
			for k, v := range got {
				b.req.Trailer[k] = v
			}
		}
	}
	return nil
}

// parseTrailerField checks one trailer line's syntax and returns its
// canonical name and its value (copied: the line's bytes are reused).
func parseTrailerField(line []byte) (string, string, error) {
	var h head
	h.reset()
	if err := parseField(line, &h); err != nil || len(h.fields) != 1 {
		return "", "", errBadChunk
	}
	f := h.fields[0]
	return http.CanonicalHeaderKey(string(f.name)), string(f.value), nil
}

// parseChunkSize parses "1*HEXDIG [ chunk-ext ]". Extensions are
// checked for stray control characters and dropped.
func parseChunkSize(line []byte) (int64, bool) {
	ext := len(line)
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		ext = i
	}
	digits := line[:ext]
	if ext < len(line) {
		for len(digits) > 0 && (digits[len(digits)-1] == ' ' || digits[len(digits)-1] == '\t') {
			digits = digits[:len(digits)-1] // BWS before ";"
		}
	}
	if len(digits) == 0 || len(digits) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	for _, c := range line[ext:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, false
		}
	}
	return n, true
}

// readLine returns the next line of the body without its CRLF, reading
// under the body deadline; a line longer than limit, or ended by a bare
// LF, is an error.
func (c *conn) readLine(limit int) ([]byte, error) {
	for {
		if i := bytes.IndexByte(c.buf[c.r:c.w], '\n'); i >= 0 {
			line := c.buf[c.r : c.r+i+1]
			if i == 0 || line[i-1] != '\r' {
				return nil, errBadChunk
			}
			if i-1 > limit {
				return nil, errChunkTooLarge
			}
			c.r += i + 1
			return line[:i-1], nil
		}
		if c.w-c.r > limit+2 {
			return nil, errChunkTooLarge
		}
		c.renewBodyDeadline()
		if err := c.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// readBody reads body bytes: from the read buffer if it holds some, else
// from the connection under the body deadline.
func (c *conn) readBody(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.w > c.r {
		n := copy(p, c.buf[c.r:c.w])
		c.r += n
		return n, nil
	}
	c.renewBodyDeadline()
	n, err := c.rwc.Read(p)
	if n > 0 {
		return n, nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return 0, err
}

// renewBodyDeadline puts the next read under BodyTimeout from now.
func (c *conn) renewBodyDeadline() {
	if c.handlerReadDL {
		return
	}
	if t := c.s.cfg.BodyTimeout; t > 0 {
		c.renewReadDeadline(t, dlBody)
	} else if c.readKind != dlNone {
		c.setReadDeadline(time.Time{}, dlNone)
	}
}

// drain reads and drops what is left of a body, up to limit bytes. It
// reports whether the body ended.
func (b *body) drain(limit int64) bool {
	b.mu.Lock()
	if b.eof || b.err != nil {
		b.mu.Unlock()
		return b.eof
	}
	closed := b.closed
	b.closed = false
	b.mu.Unlock()
	_, err := io.CopyN(io.Discard, b, limit+1)
	b.mu.Lock()
	b.closed = closed
	b.mu.Unlock()
	return err == io.EOF
}
