package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// view is what the echo handler saw of a request: the matrix compares
// it between the engine and net/http.
type view struct {
	Method, RequestURI, Path, RawQuery, Host, Proto string
	Header                                          http.Header
	Body                                            string
	BodyErr                                         bool
	ContentLength                                   int64
	TransferEncoding                                []string
	Close                                           bool
	Trailer                                         http.Header // after the body was read
}

// echo answers with the JSON view of the request, and records every
// request path it was called for.
type echo struct {
	mu   sync.Mutex
	seen []string
}

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.seen = append(e.seen, r.RequestURI)
	e.mu.Unlock()
	b, err := io.ReadAll(r.Body)
	v := view{r.Method, r.RequestURI, r.URL.Path, r.URL.RawQuery, r.Host, r.Proto, r.Header, string(b), err != nil,
		r.ContentLength, r.TransferEncoding, r.Close, r.Trailer}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
	}
	_ = json.NewEncoder(w).Encode(v)
}

func (e *echo) saw(uri string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.seen, uri)
}

// netServer serves h with net/http on a loopback listener.
func netServer(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}
	srv.SetKeepAlivesEnabled(true)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

// exchanged is what a raw exchange got back: the status of each answer
// (in order), the first answer's header and body.
type exchanged struct {
	statuses []int
	header   http.Header
	body     string
	close    bool // the last answer said Connection: close
}

func exchange(t testing.TB, addr, raw string, n int) exchanged {
	t.Helper()
	methods := make([]string, n)
	for i := range methods {
		methods[i] = http.MethodGet
	}
	if strings.HasPrefix(raw, "HEAD ") {
		methods[0] = http.MethodHead
	}
	rs := readResponses(t, rawExchange(t, addr, raw), methods...)
	var x exchanged
	for i, r := range rs {
		b, _ := io.ReadAll(r.Body)
		if i == 0 {
			x.header, x.body = r.Header, string(b)
		}
		x.statuses = append(x.statuses, r.StatusCode)
		x.close = r.Close
	}
	return x
}

// The request matrix: every request goes to the engine (through its
// net/http bridge, as serve's handlers see it) and to net/http, and the
// answers are diffed: the status of each answer, and for answers both
// gave, what the handler saw. Where the engine is stricter than net/http
// on purpose, the case says so (net) and why.
func TestConformanceMatrixAgainstNetHTTP(t *testing.T) {
	ours, theirs := &echo{}, &echo{}
	_, eaddr := serveEngine(t, Config{Handler: ours, ReadHeaderTimeout: 5 * time.Second})
	naddr := netServer(t, theirs)
	big := strings.Repeat("a", 70<<10)

	cases := []struct {
		name   string
		raw    string
		n      int   // answers expected on the connection
		engine []int // the engine's statuses
		net    []int // net/http's, when they differ
		why    string
	}{
		{name: "GET origin-form", raw: "GET /a/b?c=d HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{200}},
		{name: "HEAD", raw: "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{200}},
		{name: "lower-case method (a token)", raw: "get / HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{200}},
		{name: "POST with Content-Length", raw: "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", engine: []int{200}},
		{name: "POST chunked", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", engine: []int{200}},
		{name: "chunked, upper case", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", engine: []int{200}},
		{name: "chunk extension", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0\r\n\r\n", engine: []int{200}},
		{name: "chunked with a trailer", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n", engine: []int{200}},
		{name: "declared trailers", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTrailer: x-sum, X-Other\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 7\r\n\r\n", engine: []int{200}},
		{name: "Trailer without chunking", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTrailer: X-Sum\r\nContent-Length: 2\r\n\r\nhi", engine: []int{200}},
		{name: "Content-Length declared as a trailer", raw: "POST /p HTTP/1.1\r\nHost: x\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", engine: []int{400}},
		{name: "absolute-form target", raw: "GET http://example.com/abs?q=1 HTTP/1.1\r\nHost: other\r\n\r\n", engine: []int{200}},
		{name: "asterisk-form OPTIONS", raw: "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{200}},
		{name: "asterisk-form GET", raw: "GET * HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{400}, net: []int{200},
			why: "asterisk-form is for OPTIONS only (RFC 9112 section 3.2.4)"},
		{name: "HTTP/1.0 without Host", raw: "GET /old HTTP/1.0\r\n\r\n", engine: []int{200}},
		{name: "HTTP/1.0 with Host", raw: "GET /old HTTP/1.0\r\nHost: x\r\n\r\n", engine: []int{200}},
		{name: "HTTP/1.1 without Host", raw: "GET / HTTP/1.1\r\n\r\n", engine: []int{400}},
		{name: "two Host fields", raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", engine: []int{400}},
		{name: "malformed Host", raw: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", engine: []int{400}},
		{name: "pipelined", raw: "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n", n: 2, engine: []int{200, 200}},
		{name: "Expect 100-continue", raw: "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", engine: []int{100, 200}, n: 2},
		{name: "unknown expectation", raw: "POST /e HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nhi", engine: []int{417}},
		{name: "upgrade a handler ignores", raw: "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", engine: []int{200}},
		{name: "obs-fold", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", engine: []int{400}, net: []int{200},
			why: "obsolete line folding is refused (RFC 9112 section 5.2 allows either), so no peer can read the folded line as a field of its own"},
		{name: "control byte in a value", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", engine: []int{400}},
		{name: "NUL in a value", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", engine: []int{400}},
		{name: "space in a field name", raw: "GET / HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n", engine: []int{400}},
		{name: "space before the colon", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", engine: []int{400}},
		{name: "empty field name", raw: "GET / HTTP/1.1\r\nHost: x\r\n: b\r\n\r\n", engine: []int{400}},
		{name: "bad percent-escape in the path", raw: "GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{400}},
		{name: "relative target", raw: "GET a/b HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{400}},
		{name: "field without a colon", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n", engine: []int{400}},
		{name: "bare LF line ends", raw: "GET / HTTP/1.1\nHost: x\n\n", engine: []int{400}, net: []int{200},
			why: "only CRLF ends a line: a peer that reads bare LF otherwise cannot disagree on where the head ends"},
		{name: "bare CR in a value", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", engine: []int{400}},
		{name: "Content-Length and Transfer-Encoding", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			engine: []int{400}, net: []int{200}, why: "two framings in one request are refused, never reconciled (RFC 9112 section 6.3)"},
		{name: "two equal Content-Lengths", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
			engine: []int{400}, net: []int{200}, why: "one Content-Length only: a peer that keeps the other copy must not get a say"},
		{name: "two different Content-Lengths", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!", engine: []int{400}},
		{name: "Content-Length list", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\nhi", engine: []int{400}},
		{name: "Content-Length with a sign", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\nhi", engine: []int{400}},
		{name: "Content-Length not a number", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x2\r\n\r\nhi", engine: []int{400}},
		{name: "Transfer-Encoding gzip, chunked", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", engine: []int{501}},
		{name: "Transfer-Encoding chunked, chunked", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", engine: []int{501}},
		{name: "Transfer-Encoding identity", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", engine: []int{501}},
		{name: "obfuscated Transfer-Encoding", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", engine: []int{501}},
		{name: "two Transfer-Encoding fields", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			engine: []int{400}, net: []int{501}, why: "a repeated framing field is malformed, not merely unsupported"},
		{name: "Transfer-Encoding in HTTP/1.0", raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			engine: []int{400}, net: []int{200}, why: "HTTP/1.0 has no chunked framing (RFC 9112 section 6.1)"},
		{name: "bad chunk size", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", engine: []int{400}},
		{name: "chunk size overflow", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nx\r\n0\r\n\r\n", engine: []int{400}},
		{name: "chunk data longer than its size", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n", engine: []int{400}},
		{name: "chunk extension with a control byte", raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\x01\r\nhi\r\n0\r\n\r\n",
			engine: []int{400}, net: []int{200}, why: "extensions are checked before they are dropped"},
		{name: "head over 64 KiB", raw: "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n", engine: []int{431}, net: []int{200},
			why: "the engine bounds a head at 64 KiB (nginx: 32 KiB); net/http at 1 MiB"},
		{name: "HTTP/2.0 request line", raw: "GET / HTTP/2.0\r\nHost: x\r\n\r\n", engine: []int{505}},
		{name: "HTTP/1.2", raw: "GET / HTTP/1.2\r\nHost: x\r\n\r\n", engine: []int{505}, net: []int{200},
			why: "only HTTP/1.0 and HTTP/1.1 are spoken here"},
		{name: "garbage version", raw: "GET / HTTX/1.1\r\nHost: x\r\n\r\n", engine: []int{400}},
		{name: "invalid method", raw: "G@T / HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{400}},
		{name: "two spaces in the request line", raw: "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{400}},
		{name: "raw byte in the target", raw: "GET /\xe9 HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{400}, net: []int{200},
			why: "a target is visible ASCII (RFC 9112 section 3.2); raw bytes must be percent-encoded"},
		{name: "leading empty line", raw: "\r\nGET /lead HTTP/1.1\r\nHost: x\r\n\r\n", engine: []int{200}, net: []int{400},
			why: "RFC 9112 section 2.2 asks a server to ignore at least one empty line before a request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := max(c.n, 1)
			e := exchange(t, eaddr, c.raw, n)
			nh := exchange(t, naddr, c.raw, n)
			wantNet := c.net
			if wantNet == nil {
				wantNet = c.engine
			}
			if !slices.Equal(e.statuses, c.engine) {
				t.Errorf("engine answered %v, want %v", e.statuses, c.engine)
			}
			if !slices.Equal(nh.statuses, wantNet) {
				t.Errorf("net/http answered %v; the matrix says %v (update the case if net/http changed)", nh.statuses, wantNet)
			}
			if c.net != nil && c.why == "" {
				t.Errorf("a difference from net/http needs its reason")
			}
			if len(e.statuses) == 1 && e.statuses[0] == 200 && slices.Equal(e.statuses, nh.statuses) && !strings.HasPrefix(c.raw, "HEAD") && !strings.HasPrefix(c.raw, "OPTIONS") {
				var ev, nv view
				if err := json.Unmarshal([]byte(e.body), &ev); err != nil {
					t.Fatalf("engine body %q: %v", e.body, err)
				}
				if err := json.Unmarshal([]byte(nh.body), &nv); err != nil {
					t.Fatalf("net/http body %q: %v", nh.body, err)
				}
				if fmt.Sprint(ev) != fmt.Sprint(nv) {
					t.Errorf("the handler saw different requests:\nengine   %+v\nnet/http %+v", ev, nv)
				}
			}
			if len(e.statuses) > 0 && e.statuses[len(e.statuses)-1] >= 400 && !e.close {
				t.Errorf("engine refusal %v without Connection: close: %v", e.statuses, e.header)
			}
		})
	}
}
