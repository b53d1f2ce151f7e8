package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/hfield"
)

func TestRoundTripKeepsConnectionsAlive(t *testing.T) {
	s, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	c := newClient(t, Config{})
	for i := range 20 {
		resp, body := mustGet(t, c, fmt.Sprintf("%s/%d", s.URL, i))
		if resp.StatusCode != 200 || body != fmt.Sprintf("hello /%d", i) || resp.ContentLength != int64(len(body)) {
			t.Fatalf("request %d: %d %q (length %d)", i, resp.StatusCode, body, resp.ContentLength)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 sequential requests used %d connections, want 1", n)
	}
}

// The pool keeps at most MaxIdlePerHost idle connections: the others
// close when their answer ends.
func TestIdleConnectionsBounded(t *testing.T) {
	release := make(chan struct{})
	s, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	}))
	c := newClient(t, Config{MaxIdlePerHost: 2})
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { mustGet(t, c, s.URL) })
	}
	for conns.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	hp, _ := c.host(mustURL(s.URL))
	hp.mu.Lock()
	idle := len(hp.idle)
	hp.mu.Unlock()
	if idle != 2 {
		t.Fatalf("%d idle connections, want MaxIdlePerHost 2", idle)
	}
	before := conns.Load()
	for range 4 {
		mustGet(t, c, s.URL)
	}
	if conns.Load() != before {
		t.Fatalf("sequential requests after the burst opened %d new connections", conns.Load()-before)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// seen is what an upstream received for one request, as net/http's
// server parser reads it.
type seen struct {
	Method, URI, Host, Proto string
	Header                   http.Header
	Body                     string
	BodyErr                  string
	ContentLength            int64
	TransferEncoding         []string
	Trailer                  http.Header
	Close                    bool
}

// recorder is an upstream that records what it receives and answers 204.
func recorder(t *testing.T) (*rawUpstream, <-chan seen) {
	ch := make(chan seen, 16)
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, berr := io.ReadAll(req.Body)
			v := seen{Method: req.Method, URI: req.RequestURI, Host: req.Host, Proto: req.Proto, Header: req.Header,
				Body: string(b), ContentLength: req.ContentLength, TransferEncoding: req.TransferEncoding, Trailer: req.Trailer, Close: req.Close}
			if berr != nil {
				v.BodyErr = berr.Error()
			}
			ch <- v
			if berr != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	return u, ch
}

// What the upstream sees: the same requests sent through net/http's
// Transport (compression off: the one documented difference) and through
// this client must arrive alike: method, target, Host, fields, framing,
// body and trailers.
func TestUpstreamSeesWhatNetHTTPSends(t *testing.T) {
	u, got := recorder(t)
	ours := newClient(t, Config{})
	theirs := &http.Transport{DisableCompression: true}
	t.Cleanup(theirs.CloseIdleConnections)
	base := u.url().String()
	type mk func() *http.Request
	req := func(method, target string, body io.Reader, hdr ...string) mk {
		return func() *http.Request {
			r, _ := http.NewRequest(method, base+strings.TrimPrefix(target, "/"), body)
			if rd, ok := body.(*strings.Reader); ok {
				s := *rd
				r, _ = http.NewRequest(method, base+strings.TrimPrefix(target, "/"), &s)
			}
			for i := 0; i+1 < len(hdr); i += 2 {
				r.Header.Add(hdr[i], hdr[i+1])
			}
			return r
		}
	}
	cases := []struct {
		name string
		make mk
		edit func(*http.Request)
	}{
		{"GET", req("GET", "/a/b?c=d&e", nil, "Accept", "*/*", "X-Multi", "1", "X-Multi", "2"), nil},
		{"HEAD", req("HEAD", "/h", nil), nil},
		{"POST with a body", req("POST", "/p", strings.NewReader("hello"), "Content-Type", "text/plain"), nil},
		{"POST without a body", req("POST", "/p", nil), nil},
		{"PUT without a body", req("PUT", "/p", nil), nil},
		{"DELETE without a body", req("DELETE", "/d", nil), nil},
		{"body of unknown length", req("POST", "/u", nil), func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("streamed")), -1
		}},
		{"large body", req("PUT", "/big", strings.NewReader(strings.Repeat("x", 200<<10))), nil},
		// Sent with its head in one write, larger than a new socket's
		// send buffer: the rest goes out once the upstream reads.
		{"inline body past the send buffer", req("PUT", "/inline", strings.NewReader(strings.Repeat("y", maxInlineBody-1024))), nil},
		{"trailers", req("POST", "/t", nil), func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("abc")), -1
			r.Trailer = http.Header{"X-Sum": {"6"}}
		}},
		{"Host differs from the URL", req("GET", "/v", nil), func(r *http.Request) { r.Host = "virtual.example:8080" }},
		{"Close", req("GET", "/c", nil), func(r *http.Request) { r.Close = true }},
		{"User-Agent given", req("GET", "/ua", nil, "User-Agent", "curl/8"), nil},
		{"User-Agent empty", req("GET", "/ua", nil, "User-Agent", ""), nil},
		{"framing fields in Header are not copied", req("POST", "/f", strings.NewReader("12345"),
			"Content-Length", "1", "Transfer-Encoding", "chunked", "Host", "evil"), nil},
		{"escaped path", req("GET", "/a%20b/%2F?x=%41", nil), nil},
		{"lower-case header key", req("GET", "/k", nil), func(r *http.Request) { r.Header["x-raw"] = []string{"v"} }},
		{"value with spaces around", req("GET", "/s", nil, "X-Pad", "  v  "), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var views [2]seen
			for i, rt := range []http.RoundTripper{theirs, ours} {
				r := c.make()
				if c.edit != nil {
					c.edit(r)
				}
				resp, err := rt.RoundTrip(r)
				if err != nil {
					t.Fatalf("%T: %v", rt, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				select {
				case views[i] = <-got:
				case <-time.After(5 * time.Second):
					t.Fatalf("%T: the upstream saw nothing", rt)
				}
			}
			if a, b := fmt.Sprintf("%+v", views[0]), fmt.Sprintf("%+v", views[1]); a != b {
				t.Errorf("the upstream saw different requests:\nnet/http %s\nupstream %s", a, b)
			}
		})
	}
}

// A request that cannot be written as exactly one message is refused
// before a byte is sent.
func TestInvalidRequestsNeverSent(t *testing.T) {
	u, got := recorder(t)
	c := newClient(t, Config{})
	cases := map[string]func(*http.Request){
		"CRLF in a value":     func(r *http.Request) { r.Header.Set("X-A", "a\r\nX-Injected: 1") },
		"LF in a value":       func(r *http.Request) { r.Header.Set("X-A", "a\nGET /smuggled HTTP/1.1") },
		"NUL in a value":      func(r *http.Request) { r.Header.Set("X-A", "a\x00b") },
		"space in a name":     func(r *http.Request) { r.Header["X A"] = []string{"b"} },
		"colon in a name":     func(r *http.Request) { r.Header["X:A"] = []string{"b"} },
		"space in the query":  func(r *http.Request) { r.URL.RawQuery = "a b HTTP/1.1\r\n" },
		"control in the path": func(r *http.Request) { r.URL.Opaque = "/a\x01" },
		"bad Host":            func(r *http.Request) { r.Host = "a\r\nb" },
		"space in the method": func(r *http.Request) { r.Method = "GET /x" },
		"CR in a trailer value": func(r *http.Request) {
			r.Body, r.ContentLength, r.Trailer = io.NopCloser(strings.NewReader("x")), -1, http.Header{"X-T": {"a\rb"}}
		},
		"framing trailer": func(r *http.Request) {
			r.Body, r.ContentLength, r.Trailer = io.NopCloser(strings.NewReader("x")), -1, http.Header{"Content-Length": {"1"}}
		},
		"length without a body":  func(r *http.Request) { r.ContentLength = 5 },
		"non-ASCII Host":         func(r *http.Request) { r.Host = "exämple.com" },
		"unsupported URL scheme": func(r *http.Request) { r.URL.Scheme = "ftp" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", u.url().String(), nil)
			edit(r)
			resp, err := c.RoundTrip(r)
			if name == "CR in a trailer value" {
				// Trailer values are known only after the body: the
				// connection closes before the message ends.
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if v := <-got; v.BodyErr == "" {
					t.Fatalf("the upstream got a whole message: %+v", v)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("err %v, want ErrInvalidRequest", err)
			}
			select {
			case v := <-got:
				t.Fatalf("the upstream saw %+v", v)
			case <-time.After(20 * time.Millisecond):
			}
		})
	}
}

// failingBody yields some bytes, then fails as a client that left does.
type failingBody struct {
	data string
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if b.data == "" {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *failingBody) Close() error { return nil }

// When the client's body fails midway, the upstream never gets a whole
// message: an inline body is not sent at all, a streamed one is cut
// before its end (Content-Length short, or no last chunk).
func TestBrokenBodyNeverCompletesAMessage(t *testing.T) {
	u, got := recorder(t)
	c := newClient(t, Config{})
	cause := errors.New("client went away")
	cases := []struct {
		name   string
		length int64
		data   string
		inline bool
	}{
		{"inline, declared length", 100, "only ten b", true},
		{"streamed, declared length", 300 << 10, strings.Repeat("y", 100<<10), false},
		{"streamed, chunked", -1, strings.Repeat("z", 10), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", u.url().String(), nil)
			r.Body, r.ContentLength = &failingBody{tc.data, cause}, tc.length
			resp, err := c.RoundTrip(r)
			if err == nil {
				resp.Body.Close()
				t.Fatal("a round trip whose body failed succeeded")
			}
			if !errors.Is(err, cause) {
				t.Errorf("err %v, want the body's error", err)
			}
			if tc.inline {
				select {
				case v := <-got:
					t.Fatalf("an inline body that failed was sent: %+v", v)
				case <-time.After(20 * time.Millisecond):
				}
				return
			}
			v := <-got
			if v.BodyErr == "" {
				t.Fatalf("the upstream read a whole message: %+v", v)
			}
		})
	}
	// A body shorter than its declared length is the same fault.
	r, _ := http.NewRequest("POST", u.url().String(), nil)
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader("short")), 10
	if _, err := c.RoundTrip(r); !errors.Is(err, ErrBodyLength) {
		t.Fatalf("short body: %v, want ErrBodyLength", err)
	}
}

// Answers are framed one way only: two framings, disagreeing lengths,
// other transfer codings, folding and control bytes fail the exchange.
func TestMalformedAnswersRefused(t *testing.T) {
	cases := map[string]string{
		"Content-Length and Transfer-Encoding": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"two Content-Lengths":                  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"Content-Length list":                  "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc",
		"Content-Length with a sign":           "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
		"gzip transfer coding":                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"obfuscated chunked":                   "HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
		"two Transfer-Encodings":               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"obs-fold":                             "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n",
		"space before the colon":               "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n",
		"control byte in a value":              "HTTP/1.1 200 OK\r\nX-A: a\x01\r\nContent-Length: 0\r\n\r\n",
		"bare CR in a value":                   "HTTP/1.1 200 OK\r\nX-A: a\rContent-Length: 5\r\nContent-Length: 0\r\n\r\n",
		"bare LF in the head":                  "HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 0\r\n\r\n",
		"bad status line":                      "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/2 status line":                   "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"chunked HTTP/1.0":                     "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	}
	c := newClient(t, Config{})
	for _, asList := range []bool{false, true} {
		for name, raw := range cases {
			t.Run(fmt.Sprintf("%s/list=%v", name, asList), func(t *testing.T) {
				u := newRawUpstream(t, answerEach(raw))
				req, _ := http.NewRequest("GET", u.url().String(), nil)
				var l *hfield.List
				if asList {
					l = new(hfield.List)
				}
				resp, err := roundTripInto(c, req, l)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("accepted %q: %d %v", raw, resp.StatusCode, resp.Header)
				}
				if !strings.Contains(err.Error(), ErrBadResponse.Error()) {
					t.Errorf("err %v, want a malformed response", err)
				}
			})
		}
	}
}

// roundTripInto is c.RoundTrip, with the answer's fields listed in l
// when l is not nil (Limits.Answer).
func roundTripInto(c *Client, req *http.Request, l *hfield.List) (*http.Response, error) {
	if l == nil {
		return c.RoundTrip(req)
	}
	return c.RoundTripFields(req, nil, Limits{Answer: l})
}

// TestAnswerAsList: with Limits.Answer, an ordinary answer's fields come
// as a list, in the upstream's order, names canonical, the framing fields
// the client consumed left out, and no Header; an error status, a 101 or
// an answer that announces trailers has its Header as usual and an empty
// list; the same connection's next answer starts a new list.
func TestAnswerAsList(t *testing.T) {
	cases := []struct {
		name, raw string
		header    bool     // a Header, the list empty
		want      []string // the list, "Name=value"
		body      string
	}{
		{"in order, canonical", "HTTP/1.1 200 OK\r\nx-b: 2\r\nContent-Type: text/plain\r\nX-A: 1\r\nx-a: 0\r\nContent-Length: 2\r\n\r\nok",
			false, []string{"X-B=2", "Content-Type=text/plain", "X-A=1", "X-A=0", "Content-Length=2"}, "ok"},
		{"chunked", "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
			false, []string{"X-A=1"}, "ok"},
		{"a repeated length once", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok",
			false, []string{"Content-Length=2", "X-A=1"}, "ok"},
		{"redirect", "HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
			false, []string{"Location=/x", "Content-Length=0"}, ""},
		{"error status", "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\nno", true, nil, "no"},
		{"not found", "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno", true, nil, "no"},
		{"trailers announced", "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n", true, nil, "ok"},
		{"after an informational answer", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok",
			false, []string{"X-A=1", "Content-Length=2"}, "ok"},
	}
	c := newClient(t, Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newRawUpstream(t, answerEach(tc.raw))
			var l hfield.List
			l.Add("Stale", "from the last call") // a list is the round trip's to fill
			for i := range 2 {                   // the second on the same connection
				req, _ := http.NewRequest("GET", u.url().String(), nil)
				resp, err := roundTripInto(c, req, &l)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != tc.body {
					t.Fatalf("body %q %v, want %q", b, err, tc.body)
				}
				var got []string
				for _, f := range l.All() {
					got = append(got, f.Name+"="+f.Value)
				}
				if (resp.Header != nil) != tc.header || !slices.Equal(got, tc.want) {
					t.Fatalf("answer %d: Header %v, list %q; want a Header %v, list %q", i, resp.Header, got, tc.header, tc.want)
				}
				if tc.header && resp.Header.Get("Content-Length") == "" && resp.Header.Get("Trailer") == "" && resp.ContentLength >= 0 {
					t.Fatalf("Header %v lacks the answer's fields", resp.Header)
				}
			}
			if u.accepted() != 1 {
				t.Fatalf("%d connections, want 1", u.accepted())
			}
		})
	}
}

// Bad chunks fail the body read, and the connection is not reused.
func TestMalformedChunksFailTheBody(t *testing.T) {
	for name, raw := range map[string]string{
		"size not hex":          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
		"size with 0x":          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
		"data longer than size": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
		"LF-only chunk line":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
		"cut short":             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
		"Content-Length short":  "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab",
	} {
		t.Run(name, func(t *testing.T) {
			u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err == nil {
					io.WriteString(c, raw)
				}
			})
			c := newClient(t, Config{})
			req, _ := http.NewRequest("GET", u.url().String(), nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				t.Fatalf("body of %q read without error", raw)
			}
			mustGetFails := func() {
				req, _ := http.NewRequest("GET", u.url().String(), nil)
				if resp, err := c.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
			mustGetFails()
			if u.accepted() != 2 {
				t.Fatalf("the broken connection was reused (%d connections)", u.accepted())
			}
		})
	}
}

// Bytes an upstream sends past an answer's end are never read as the
// next request's answer.
func TestBytesPastAnAnswerAreNeverTheNextAnswer(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nevil!")
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nevil!")
		}
	})
	c := newClient(t, Config{})
	_, b1 := mustGet(t, c, u.url().String())
	if b1 != "ok" {
		t.Fatalf("first answer %q", b1)
	}
	resp, b2 := mustGet(t, c, u.url().String())
	if u.accepted() != 2 {
		t.Fatalf("the connection with unasked-for bytes was reused (%d connections, second answer %q)", u.accepted(), b2)
	}
	_ = resp
}

// The same with the unasked-for bytes arriving after the answer was
// read, while the connection sits in the pool: the look at the socket
// before the next request is sent finds them.
func TestBytesArrivingOnAnIdleConnectionAreNeverAnAnswer(t *testing.T) {
	var conns atomic.Int32
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if conns.Add(1) <= 2 {
			// The first two connections (the GET's and the POST's
			// look) send an answer nobody asked for while idle.
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nevil!")
		}
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := newClient(t, Config{})
	if _, b := mustGet(t, c, u.url().String()); b != "ok" {
		t.Fatalf("first answer %q", b)
	}
	for _, method := range []string{"GET", "POST"} {
		time.Sleep(60 * time.Millisecond) // the bytes reach the pooled connection
		req, _ := http.NewRequest(method, u.url().String(), nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("%s answered %q: bytes nobody asked for were read as its answer", method, b)
		}
	}
}

// An upstream that closes an idle connection: the next request finds it
// closed before sending (or replays on a fresh one), and succeeds.
func TestStaleConnectionNotUsed(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// no Connection: close, and then the connection closes
	})
	c := newClient(t, Config{})
	// A POST cannot be replayed: it must not be sent on the dead one.
	// With a body the pool looks at the socket before the exchange;
	// without one the look comes in the call that sends it.
	for i, body := range []io.Reader{strings.NewReader("body"), nil} {
		mustGet(t, c, u.url().String())
		time.Sleep(20 * time.Millisecond) // the close reaches this side
		req, _ := http.NewRequest("POST", u.url().String(), body)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("POST (body %v) after the upstream closed the idle connection: %v", body != nil, err)
		}
		resp.Body.Close()
		if want := 2 * (i + 1); resp.StatusCode != 200 || u.accepted() != want {
			t.Fatalf("status %d, %d connections, want %d", resp.StatusCode, u.accepted(), want)
		}
	}
}

// A reused connection that fails before any answer: an idempotent
// request is sent again on a new connection.
func TestNotAnsweredReplayed(t *testing.T) {
	var first sync.Once
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for n := 0; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			drop := false
			if n == 1 {
				first.Do(func() { drop = true })
			}
			if drop {
				return // the second request on the first connection dies unanswered
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	// peerOpen cannot see this close coming (the request is what kills
	// it), so the replay is what saves the request.
	c := newClient(t, Config{})
	mustGet(t, c, u.url().String())
	resp, body := mustGet(t, c, u.url().String())
	if resp.StatusCode != 200 || body != "ok" || u.accepted() != 2 {
		t.Fatalf("%d %q after %d connections", resp.StatusCode, body, u.accepted())
	}
}

// Informational answers are skipped; those other than 100 reach a
// ClientTrace. The final answer's trailers fill Response.Trailer.
func TestInformationalAnswersAndTrailers(t *testing.T) {
	u := newRawUpstream(t, answerEach("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 6\r\nX-Undeclared: u\r\nContent-Length: 9\r\n\r\n"))
	c := newClient(t, Config{})
	var hints []string
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
		return nil
	}})
	req, _ := http.NewRequestWithContext(ctx, "GET", u.url().String(), nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Trailer["X-Sum"]; !ok || resp.Header.Get("Trailer") != "" {
		t.Fatalf("declared trailers %v, header %v", resp.Trailer, resp.Header)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "abc" || resp.StatusCode != 200 {
		t.Fatalf("%d %q %v", resp.StatusCode, b, err)
	}
	if resp.Trailer.Get("X-Sum") != "6" || resp.Trailer.Get("X-Undeclared") != "u" || resp.Trailer.Get("Content-Length") != "" {
		t.Fatalf("trailer %v", resp.Trailer)
	}
	if !slices.Equal(hints, []string{"103 </a.css>; rel=preload"}) {
		t.Fatalf("1xx seen by the trace: %v", hints)
	}
}

// Bodies without a length, HEAD, 204 and 304.
func TestAnswerFramings(t *testing.T) {
	cases := []struct {
		name, method, raw, body string
		length                  int64
		reused                  bool
	}{
		{"until close", "GET", "HTTP/1.1 200 OK\r\n\r\nall of it", "all of it", -1, false},
		{"HTTP/1.0 keep-alive", "GET", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", "ok", 2, true},
		{"HTTP/1.0", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 2, false},
		{"Connection close", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", 2, false},
		{"HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", "", 1234, true},
		{"204", "GET", "HTTP/1.1 204 No Content\r\n\r\n", "", 0, true},
		{"304", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", "", 0, true},
		{"two equal Content-Lengths", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", "ok", 2, true},
		{"no reason phrase", "GET", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", "ok", 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					io.WriteString(c, tc.raw)
					if !tc.reused {
						return
					}
				}
			})
			c := newClient(t, Config{})
			for i := range 2 {
				req, _ := http.NewRequest(tc.method, u.url().String(), nil)
				var l *hfield.List
				if i == 1 {
					l = new(hfield.List) // the fields as a list: the same framing
				}
				resp, err := roundTripInto(c, req, l)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != tc.body || resp.ContentLength != tc.length || resp.Close == tc.reused {
					t.Fatalf("body %q err %v length %d close %v", b, err, resp.ContentLength, resp.Close)
				}
			}
			if want := map[bool]int{true: 1, false: 2}[tc.reused]; u.accepted() != want {
				t.Fatalf("%d connections, want %d", u.accepted(), want)
			}
		})
	}
}

// The request's context ends the exchange at any point, with its cause.
func TestContextEndsTheExchange(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.URL.Path == "/body" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome")
		}
		<-hold
	})
	c := newClient(t, Config{})
	cause := errors.New("the proxy gave up")
	for _, path := range []string{"/head", "/body"} {
		ctx, cancel := context.WithCancelCause(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", u.url().String()+path[1:], nil)
		go func() { time.Sleep(20 * time.Millisecond); cancel(cause) }()
		resp, err := c.RoundTrip(req)
		if path == "/body" {
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if !errors.Is(err, cause) {
			t.Fatalf("%s: err %v, want the context's cause", path, err)
		}
	}
}

// Upgrades: the 101 answer's body is the connection, both ways, starting
// with the bytes that came with the head.
func TestUpgrade(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nhello\n")
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(c, "echo "+line)
		}
	})
	c := newClient(t, Config{})
	req, _ := http.NewRequest("GET", u.url().String(), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || resp.StatusCode != 101 {
		t.Fatalf("%d, body %T", resp.StatusCode, resp.Body)
	}
	defer rw.Close()
	br := bufio.NewReader(rw)
	if l, _ := br.ReadString('\n'); l != "hello\n" {
		t.Fatalf("first line %q", l)
	}
	io.WriteString(rw, "ping\n")
	if l, _ := br.ReadString('\n'); l != "echo ping\n" {
		t.Fatalf("echo %q", l)
	}
}

// Full duplex: a streamed body and the answer move at once (the upstream
// echoes each piece as it reads it).
func TestStreamingBothWays(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(w, "got "+line)
			w.(http.Flusher).Flush()
		}
	}))
	defer s.Close()
	c := newClient(t, Config{})
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", s.URL, pr)
	go io.WriteString(pw, "one\n")
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if l, _ := br.ReadString('\n'); l != "got one\n" {
		t.Fatalf("%q", l)
	}
	io.WriteString(pw, "two\n")
	if l, _ := br.ReadString('\n'); l != "got two\n" {
		t.Fatalf("%q", l)
	}
	pw.Close()
	io.Copy(io.Discard, br)
	resp.Body.Close()
}

// An upstream that answers before reading a large body: the answer comes
// back, and the body's writer lets go once the answer is done.
func TestEarlyAnswer(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig")
		time.Sleep(50 * time.Millisecond)
	})
	c := newClient(t, Config{})
	req, _ := http.NewRequest("PUT", u.url().String(), io.LimitReader(zeroReader{}, 64<<20))
	req.ContentLength = 64 << 20
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || string(b) != "big" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestTLSUpstream(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	defer s.Close()
	c := newClient(t, Config{TLS: &tls.Config{RootCAs: s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}})
	for range 2 {
		if _, body := mustGet(t, c, s.URL); body != "HTTP/1.1" {
			t.Fatalf("body %q", body)
		}
	}
}

// HeaderTimeout and BodyIdleTimeout, on a synthetic clock.
func TestTimeouts(t *testing.T) {
	synctestRun(t, func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), serve func(func(net.Conn))) {
		serve(func(c net.Conn) {
			br := bufio.NewReader(c)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/body" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			}
			io.Copy(io.Discard, c) // silent until the client gives up and closes

		})
		c := New(Config{Dial: dial, HeaderTimeout: 2 * time.Second, BodyIdleTimeout: 3 * time.Second})
		defer c.Close()
		start := time.Now()
		req, _ := http.NewRequest("GET", "http://up/head", nil)
		_, err := c.RoundTrip(req)
		if !errors.Is(err, ErrHeaderTimeout) || time.Since(start) != 2*time.Second {
			t.Fatalf("head: %v after %v", err, time.Since(start))
		}
		start = time.Now()
		req, _ = http.NewRequest("GET", "http://up/body", nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, ErrBodyIdle) || time.Since(start) != 3*time.Second {
			t.Fatalf("body: %v after %v", err, time.Since(start))
		}
	})
}

// A ReverseProxy over the client tunnels upgrades, forwards trailers and
// streams: the proxy's own use.
func TestUnderReverseProxy(t *testing.T) {
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Set("X-Got-Trailer", r.Trailer.Get("X-In"))
		w.Write(bytes.ToUpper(b))
		w.Header().Set("X-Sum", fmt.Sprint(len(b)))
	}))
	defer back.Close()
	c := newClient(t, Config{})
	rp := newReverseProxy(mustURL(back.URL), c)
	front := httptest.NewServer(rp)
	defer front.Close()
	req, _ := http.NewRequest("POST", front.URL, io.NopCloser(strings.NewReader("abc")))
	req.ContentLength = -1
	req.Trailer = http.Header{"X-In": {"t"}}
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ABC" || resp.Trailer.Get("X-Sum") != "3" || resp.Header.Get("X-Got-Trailer") != "t" {
		t.Fatalf("%q trailer %v header %v", b, resp.Trailer, resp.Header)
	}
}

// Concurrent round trips of every answer shape share the pool: each
// answer is its own request's (the body echoes the request's id), no
// connection is handed to two exchanges at once (the race detector
// watches), and the pool stays within its bound.
func TestConcurrentRoundTrips(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		switch r.URL.Path {
		case "/empty":
			w.Header().Set("X-Id", id)
			w.WriteHeader(http.StatusNoContent)
		case "/chunked":
			w.Header().Set("X-Id", id)
			io.WriteString(w, id)
			w.(http.Flusher).Flush()
			io.WriteString(w, "-"+id)
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, id+"-"+id)
		default:
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Id", id)
			io.WriteString(w, id+"-"+string(b))
		}
	}))
	defer s.Close()
	c := newClient(t, Config{MaxIdlePerHost: 3})
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("%d.%d", g, i)
				var req *http.Request
				want := id + "-" + id
				switch i % 5 {
				case 0:
					req, _ = http.NewRequest("GET", s.URL+"/empty?id="+id, nil)
					want = ""
				case 1:
					req, _ = http.NewRequest("GET", s.URL+"/chunked?id="+id, nil)
				case 2:
					req, _ = http.NewRequest("GET", s.URL+"/close?id="+id, nil)
				case 3:
					req, _ = http.NewRequest("HEAD", s.URL+"/?id="+id, nil)
					want = ""
				default:
					req, _ = http.NewRequest("POST", s.URL+"/?id="+id, strings.NewReader(id))
				}
				resp, err := c.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				runtime.Gosched() // another goroutine may take the connection this answer handed back
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != want || i%5 != 2 && resp.Header.Get("X-Id") != id {
					t.Errorf("request %s: %q (want %q), X-Id %q, err %v", id, b, want, resp.Header.Get("X-Id"), err)
					return
				}
			}
		})
	}
	wg.Wait()
	hp, _ := c.host(mustURL(s.URL))
	hp.mu.Lock()
	idle := len(hp.idle)
	hp.mu.Unlock()
	if idle > 3 {
		t.Fatalf("%d idle connections, bound 3", idle)
	}
}

// An answer's fields are read the same whatever their number: those the
// answer holds inline, and past them.
func TestAnswersWithManyFields(t *testing.T) {
	for _, n := range []int{0, 1, answerFields - 1, answerFields, answerFields + 1, 3 * answerFields} {
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\n")
		for i := range n {
			fmt.Fprintf(&b, "X-F-%d: v%d\r\n", i/2, i) // two values per name
		}
		b.WriteString("Content-Length: 2\r\n\r\nok")
		raw := b.String()
		want, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
		if err != nil {
			t.Fatal(err)
		}
		u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
			for {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, raw)
			}
		})
		c := newClient(t, Config{})
		for range 2 { // a fresh connection, then a reused one
			req, _ := http.NewRequest("GET", u.url().String(), nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "ok" {
				t.Fatalf("%d fields: body %q, %v", n, body, err)
			}
			if !reflect.DeepEqual(resp.Header, want.Header) {
				t.Fatalf("%d fields: header\n%v\nwant\n%v", n, resp.Header, want.Header)
			}
		}
	}
}
