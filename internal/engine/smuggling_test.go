package engine

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpmatrix"
)

// Request smuggling is impossible by construction: a request whose
// framing has more than one reading is refused before any handler sees
// it (one answer, 400 or 501, Connection: close, then the connection
// closes), so the bytes after it are never read as a request. Each case
// sends raw bytes on one connection.
func TestSmugglingIsRefused(t *testing.T) {
	forEachReadPath(t, smugglingIsRefused)
}

func smugglingIsRefused(t *testing.T, path func(Config) Config) {
	h := &echo{}
	_, addr := serveEngine(t, path(Config{Handler: h, ReadHeaderTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second}))
	for _, c := range httpmatrix.Smuggling() {
		t.Run(c.Name, func(t *testing.T) {
			raw := rawExchange(t, addr, c.Raw)
			rs := readResponses(t, raw, "POST", "GET")
			if len(rs) != 1 {
				t.Fatalf("%d answers, want exactly one refusal: %q", len(rs), raw)
			}
			if st := rs[0].StatusCode; st != http.StatusBadRequest && st != http.StatusNotImplemented {
				t.Errorf("answer %d, want 400 or 501", st)
			}
			if !rs[0].Close {
				t.Errorf("the refusal does not close the connection: %v", rs[0].Header)
			}
			if h.saw("/smuggled") {
				t.Fatal("the handler saw the smuggled request")
			}
		})
	}
	// And the same bytes, framed one way only, are served: the next
	// request on the connection is read where the body ends.
	raw := rawExchange(t, addr, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if rs := readResponses(t, raw, "POST", "GET"); len(rs) != 2 || !h.saw("/next") {
		t.Errorf("a well-framed pipeline: %d answers (%q)", len(rs), raw)
	}
}

// FuzzParseHead feeds the request parser arbitrary bytes. It must never
// panic, and whatever it accepts net/http must accept too and read the
// same way: method, target, Host, and the body's framing. The engine is
// the stricter of the two, so no request can mean one thing to it and
// another to a net/http peer.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a?b HTTP/1.0\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://example.com/a HTTP/1.1\r\nHost: y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close, upgrade\r\nUpgrade: websocket\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
		"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h head
		n, err := parseHead(b, &h)
		if err != nil {
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("parsed length %d of %d bytes", n, len(b))
		}
		headBytes := bytes.TrimLeft(b[:n], "\r\n")
		req, rerr := http.ReadRequest(bufio.NewReader(bytes.NewReader(headBytes)))
		if rerr != nil {
			t.Fatalf("the engine accepted what net/http refuses (%v): %q", rerr, headBytes)
		}
		if req.Method != string(h.method) || req.RequestURI != string(h.target) {
			t.Fatalf("request line: engine %q %q, net/http %q %q", h.method, h.target, req.Method, req.RequestURI)
		}
		if h.chunked != (len(req.TransferEncoding) == 1 && req.TransferEncoding[0] == "chunked") {
			t.Fatalf("chunked: engine %v, net/http %v", h.chunked, req.TransferEncoding)
		}
		if !h.chunked && req.ContentLength != h.contentLength {
			t.Fatalf("Content-Length: engine %d, net/http %d", h.contentLength, req.ContentLength)
		}
		if h.hasHost && !strings.Contains(string(b), "://") && req.Host != string(h.host) {
			t.Fatalf("Host: engine %q, net/http %q", h.host, req.Host)
		}
		for _, fl := range h.fields {
			k := http.CanonicalHeaderKey(string(fl.name))
			if k == "Host" || k == "Transfer-Encoding" {
				continue
			}
			if !containsValue(req.Header[k], string(fl.value)) {
				t.Fatalf("field %s: engine %q, net/http %q", k, fl.value, req.Header[k])
			}
		}
	})
}

func containsValue(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
