package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// h1 is the driver's own HTTP/1.1 client for plain http:// targets. It
// exists for cost, not features: net/http's transport spends two goroutines
// per connection and several channel hand-offs and allocations per request,
// which at 20,000 req/s on two cores is most of the driver's CPU. Here each
// worker owns one keep-alive connection per host, writes a request
// serialised once, and parses the response in place: no goroutines, no
// allocations in the steady state.
//
// It speaks what a load driver needs: Content-Length, chunked and
// close-delimited bodies, 1xx interim responses, HEAD/204/304, Connection:
// close, HTTP/1.0 peers. Like net/http, it retries once on a fresh
// connection when a reused one turns out to be closed before any response
// byte arrived, for requests that are safe to repeat (no body, or an
// idempotent method). Anything else (https, HTTP/2, a custom Transport)
// uses net/http.
type h1 struct {
	timeout   time.Duration
	dialer    net.Dialer
	keepAlive bool
}

// h1Target is a request serialised for the wire.
type h1Target struct {
	addr  string // host:port to dial
	host  int    // index of addr among the run's distinct addresses
	wire  []byte // request line, headers, blank line and body
	head  bool   // HEAD: the response has no body
	retry bool   // safe to send again on a fresh connection
}

// errMalformed reports a response the parser cannot read.
var errMalformed = errors.New("malformed HTTP response")

// h1Eligible reports whether every target can use the h1 client.
func h1Eligible(c Config) bool {
	if c.Transport != nil || c.HTTP2 {
		return false
	}
	for _, t := range c.Targets {
		if !strings.HasPrefix(t.URL, "http://") {
			return false
		}
	}
	return true
}

// h1Targets serialises the targets and numbers their distinct addresses.
func h1Targets(c Config) ([]h1Target, int, error) {
	hosts := map[string]int{}
	out := make([]h1Target, len(c.Targets))
	for i, t := range c.Targets {
		u, err := url.Parse(t.URL)
		if err != nil {
			return nil, 0, err
		}
		port := u.Port()
		if port == "" {
			port = "80"
		}
		addr := net.JoinHostPort(u.Hostname(), port)
		if _, ok := hosts[addr]; !ok {
			hosts[addr] = len(hosts)
		}
		host := u.Host
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", t.Method, u.RequestURI())
		hasUA := false
		for k, vs := range t.Header {
			ck := http.CanonicalHeaderKey(k)
			switch ck {
			case "Host":
				if len(vs) > 0 {
					host = vs[0]
				}
				continue
			case "User-Agent":
				hasUA = true
			case "Content-Length", "Connection", "Transfer-Encoding":
				continue // the driver frames the request itself
			}
			for _, v := range vs {
				fmt.Fprintf(&b, "%s: %s\r\n", ck, v)
			}
		}
		fmt.Fprintf(&b, "Host: %s\r\n", host)
		if !hasUA {
			b.WriteString("User-Agent: sluice-load\r\n")
		}
		switch {
		case len(t.Body) > 0:
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(t.Body))
		case t.Method == http.MethodPost || t.Method == http.MethodPut || t.Method == http.MethodPatch:
			b.WriteString("Content-Length: 0\r\n")
		}
		if c.DisableKeepAlives {
			b.WriteString("Connection: close\r\n")
		}
		b.WriteString("\r\n")
		b.Write(t.Body)
		idem := t.Method == http.MethodGet || t.Method == http.MethodHead || t.Method == http.MethodOptions ||
			t.Method == http.MethodPut || t.Method == http.MethodDelete
		out[i] = h1Target{addr: addr, host: hosts[addr], wire: b.Bytes(), head: t.Method == http.MethodHead,
			retry: idem || len(t.Body) == 0}
	}
	return out, len(hosts), nil
}

// h1Conn is one worker's connection to one address.
type h1Conn struct {
	c      net.Conn
	br     *bufio.Reader
	reused bool // has carried a request before
}

// h1Worker is a worker's h1 state: its connections and the hook that
// interrupts them when the run is canceled.
type h1Worker struct {
	cl      *h1
	mu      sync.Mutex // guards conns[i].c against the cancel hook
	conns   []h1Conn
	scratch []byte
}

func (cl *h1) newWorker(hosts int) *h1Worker {
	return &h1Worker{cl: cl, conns: make([]h1Conn, hosts), scratch: make([]byte, 16<<10)}
}

// interrupt makes every blocked read or write return at once.
func (w *h1Worker) interrupt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.conns {
		if c := w.conns[i].c; c != nil { // only .c is guarded by mu
			c.SetDeadline(time.Unix(1, 0))
		}
	}
}

func (w *h1Worker) closeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.conns {
		if w.conns[i].c != nil {
			w.conns[i].c.Close()
			w.conns[i] = h1Conn{br: w.conns[i].br}
		}
	}
}

func (w *h1Worker) drop(i int) {
	w.mu.Lock()
	if w.conns[i].c != nil {
		w.conns[i].c.Close()
	}
	w.conns[i].c, w.conns[i].reused = nil, false
	w.mu.Unlock()
}

// h1Result is what one exchange produced.
type h1Result struct {
	status int
	n      int           // body bytes kept in the caller's buffer
	first  time.Duration // first byte (status line read), since base
}

// do sends t and reads the answer, keeping the first len(buf) body bytes in
// buf. canceled is polled after arming the deadline, so a cancel that races
// with a new request cannot leave it running to the full timeout.
func (w *h1Worker) do(t *h1Target, buf []byte, base time.Time, canceled func() bool) (h1Result, error) {
	for attempt := 0; ; attempt++ {
		r, stale, err := w.once(t, buf, base, canceled)
		if err == nil || !stale || !t.retry || attempt > 0 || canceled() {
			return r, err
		}
	}
}

// once is one attempt. retryable is true when a reused connection failed
// before any response byte: the server most likely closed it while idle.
func (w *h1Worker) once(t *h1Target, buf []byte, base time.Time, canceled func() bool) (r h1Result, retryable bool, err error) {
	cn := &w.conns[t.host]
	if cn.c == nil {
		c, err := w.cl.dialer.Dial("tcp", t.addr)
		if err != nil {
			return r, false, err
		}
		w.mu.Lock()
		cn.c = c
		w.mu.Unlock()
		if cn.br == nil {
			cn.br = bufio.NewReaderSize(c, 16<<10)
		} else {
			cn.br.Reset(c)
		}
		cn.reused = false
	}
	reused := cn.reused
	cn.reused = true
	cn.c.SetDeadline(time.Now().Add(w.cl.timeout))
	if canceled() {
		w.drop(t.host)
		return r, false, errCanceled
	}
	if _, err := cn.c.Write(t.wire); err != nil {
		w.drop(t.host)
		return r, reused && staleConn(err), err
	}
	keep, err := w.readResponse(cn.br, t, buf, base, &r)
	if err != nil {
		w.drop(t.host)
		return r, reused && r.first == 0 && staleConn(err), err
	}
	if !keep || !w.cl.keepAlive {
		w.drop(t.host)
	}
	return r, false, nil
}

var errCanceled = errors.New("canceled")

// staleConn reports an error that a kept-alive connection closed by the
// server produces: not a timeout, which means the server is slow.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readResponse parses one response (after any 1xx) from br. keep reports
// whether the connection can carry another request.
func (w *h1Worker) readResponse(br *bufio.Reader, t *h1Target, buf []byte, base time.Time, r *h1Result) (keep bool, err error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if err == bufio.ErrBufferFull {
				return false, errMalformed
			}
			return false, err
		}
		if r.first == 0 {
			r.first = time.Since(base)
		}
		// "HTTP/1.x SSS reason"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return false, errMalformed
		}
		http10 := line[7] == '0'
		status := 0
		for _, c := range line[9:12] {
			if c < '0' || c > '9' {
				return false, errMalformed
			}
			status = status*10 + int(c-'0')
		}
		if status < 100 {
			return false, errMalformed
		}
		length, chunked, closeConn, keepAlive := int64(-1), false, false, false
		for {
			h, err := br.ReadSlice('\n')
			if err != nil {
				if err == bufio.ErrBufferFull {
					return false, errMalformed
				}
				return false, err
			}
			h = bytes.TrimRight(h, "\r\n")
			if len(h) == 0 {
				break
			}
			name, value, ok := bytes.Cut(h, []byte(":"))
			if !ok {
				return false, errMalformed
			}
			value = bytes.TrimSpace(value)
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				n, ok := parseDec(value)
				if !ok || (length >= 0 && n != length) {
					return false, errMalformed
				}
				length = n
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				chunked = hasToken(value, "chunked")
			case bytes.EqualFold(name, []byte("Connection")):
				closeConn = closeConn || hasToken(value, "close")
				keepAlive = keepAlive || hasToken(value, "keep-alive")
			}
		}
		if status >= 100 && status < 200 && status != 101 {
			continue // interim response: the real one follows
		}
		r.status = status
		keep = !closeConn && (!http10 || keepAlive)
		switch {
		case t.head || status == 204 || status == 304 || status == 101:
			return keep && status != 101, nil
		case chunked:
			return keep, w.readChunked(br, buf, r)
		case length >= 0:
			return keep, w.readN(br, length, buf, r)
		default: // delimited by the server closing the connection
			for {
				n, err := br.Read(w.scratch)
				w.keep(buf, r, w.scratch[:n])
				if err == io.EOF {
					return false, nil
				}
				if err != nil {
					return false, err
				}
			}
		}
	}
}

// keep copies the start of the body into buf.
func (w *h1Worker) keep(buf []byte, r *h1Result, p []byte) {
	if r.n < len(buf) {
		r.n += copy(buf[r.n:], p)
	}
}

func (w *h1Worker) readN(br *bufio.Reader, n int64, buf []byte, r *h1Result) error {
	for n > 0 {
		if r.n < len(buf) {
			m := int(min(n, int64(len(buf)-r.n)))
			k, err := io.ReadFull(br, buf[r.n:r.n+m])
			r.n += k
			n -= int64(k)
			if err != nil {
				return unexpectedEOF(err)
			}
			continue
		}
		k, err := br.Discard(int(min(n, 1<<30)))
		n -= int64(k)
		if err != nil {
			return unexpectedEOF(err)
		}
	}
	return nil
}

func (w *h1Worker) readChunked(br *bufio.Reader, buf []byte, r *h1Result) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return unexpectedEOF(err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, ok := parseHex(bytes.TrimSpace(line))
		if !ok {
			return errMalformed
		}
		if size == 0 {
			for { // trailers, up to the blank line
				l, err := br.ReadSlice('\n')
				if err != nil {
					return unexpectedEOF(err)
				}
				if len(bytes.TrimRight(l, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if err := w.readN(br, size, buf, r); err != nil {
			return err
		}
		if l, err := br.ReadSlice('\n'); err != nil {
			return unexpectedEOF(err)
		} else if len(bytes.TrimRight(l, "\r\n")) != 0 {
			return errMalformed
		}
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func parseDec(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// hasToken reports whether a comma-separated header value lists tok.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var part []byte
		part, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(part), []byte(tok)) {
			return true
		}
	}
	return false
}
