package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/engine"
)

// nativeFront starts p on sluice's engine, its admitted requests
// forwarded natively or (native false) through the net/http bridge, and
// returns the base URL and the fast path (whose counter says which path
// the requests took).
func nativeFront(t testing.TB, p *Proxy, native bool) (string, *fastPath) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := p.FastPath().(*fastPath)
	f.noNative = !native
	es := engine.New(engine.Config{Handler: p, Fast: f, FastBodies: true})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = es.Serve(l)
	}()
	t.Cleanup(func() {
		es.Close()
		<-done
		for _, g := range p.Gates() {
			g.Close()
		}
		p.Close()
	})
	return "http://" + l.Addr().String(), f
}

// scriptedUpstream is a raw upstream: it records each request it reads
// off the socket (as the upstream view tests do) and answers with the
// bytes answers holds for the request's path ("" for a HEAD's body
// part: the answer's head only). An unknown path gets a 404.
type scriptedUpstream struct {
	rawRecorder
	// onRequest, when set, is called with each request's path and the
	// number of requests its connection carried before it; false closes
	// the connection without an answer.
	onRequest func(path string, before int) bool
}

// nativeAnswers are the answers the comparison sends through both paths:
// every framing, the no-body statuses, hop-by-hop fields, a sniffed
// type, trailers, a body larger than every buffer.
func nativeAnswers() map[string]string {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	var chunks strings.Builder
	for i := range 40 {
		piece := strings.Repeat(string(rune('a'+i%26)), 8000)
		fmt.Fprintf(&chunks, "%x\r\n%s\r\n", len(piece), piece)
	}
	return map[string]string{
		"/cl":                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-B: 2\r\nX-A: 1\r\nX-A: 0\r\nContent-Length: 5\r\n\r\nhello",
		"/chunked":            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n",
		"/trailers":           "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n",
		"/undeclared-trailer": "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Late: 1\r\n\r\n",
		"/hop": "HTTP/1.1 200 OK\r\nConnection: X-Private, keep-alive\r\nX-Private: secret\r\nKeep-Alive: timeout=5\r\n" +
			"Proxy-Authenticate: Basic\r\nUpgrade: h2c\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
		"/sniff":       "HTTP/1.1 200 OK\r\nContent-Length: 28\r\n\r\n<html><body>hi</body></html>",
		"/date":        "HTTP/1.1 200 OK\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 0\r\n\r\n",
		"/204":         "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
		"/304":         "HTTP/1.1 304 Not Modified\r\nEtag: \"v1\"\r\nContent-Type: text/plain\r\n\r\n",
		"/500":         "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\noops",
		"/big":         "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " + fmt.Sprint(len(big)) + "\r\n\r\n" + big,
		"/big-chunked": "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks.String() + "0\r\n\r\n",
		"/sse":         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 12\r\n\r\ndata: a\n\nxyz",
		"/upgrade":     "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"/close":       "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
	}
}

// manyFields is n field lines, two of each name (the second in lower
// case).
func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("X-F-%d", i/2)
		if i%2 == 1 {
			name = strings.ToLower(name)
		}
		fmt.Fprintf(&b, "%s: v%d\r\n", name, i)
	}
	return b.String()
}

// start serves answers on a new listener and returns its URL.
func (u *scriptedUpstream) start(t *testing.T, answers map[string]string) *url.URL {
	t.Helper()
	return rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for n := 0; ; n++ {
			v, err := readUpstreamRequest(br)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					u.add(upstreamView{Err: err.Error()})
				}
				return
			}
			u.add(v)
			path, _, _ := strings.Cut(v.RequestURI, "?")
			if u.onRequest != nil && !u.onRequest(path, n) {
				return
			}
			a, ok := answers[path]
			if !ok {
				a = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
			}
			if v.Method == http.MethodHead {
				a, _, _ = strings.Cut(a, "\r\n\r\n")
				a += "\r\n\r\n"
			}
			if _, err := io.WriteString(c, a); err != nil || path == "/close" || path == "/upgrade" {
				return
			}
		}
	})
}

// answerView renders what a client reads of one answer: the status
// line, the header fields but the proxy's own Date (present or not), the
// framing, the body and the trailers.
func answerView(resp *http.Response, body []byte, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d\n", resp.Proto, resp.StatusCode)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := resp.Header[k]
		if k == "Date" && v[0] != "Mon, 02 Jan 2006 15:04:05 GMT" {
			v = []string{"(set)"}
		}
		fmt.Fprintf(&b, "%s: %q\n", k, v)
	}
	fmt.Fprintf(&b, "framing: cl=%d te=%v close=%v\n", resp.ContentLength, resp.TransferEncoding, resp.Close)
	if len(body) > 64 {
		fmt.Fprintf(&b, "body: %d bytes, %q...%q\n", len(body), body[:16], body[len(body)-16:])
	} else {
		fmt.Fprintf(&b, "body: %q\n", body)
	}
	fmt.Fprintf(&b, "trailer: %v, err: %v\n", resp.Trailer, err)
	return b.String()
}

// send writes raw on a new connection to base, which the test closes.
func send(t *testing.T, base, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// exchange writes raw on a new connection and reads n answers back.
func exchange(t *testing.T, base, raw string, n int) []string {
	t.Helper()
	c := send(t, base, raw)
	defer c.Close()
	br := bufio.NewReader(c)
	method := strings.Fields(raw)[0]
	var out []string
	for range n {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			out = append(out, "read: "+err.Error())
			break
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, answerView(resp, body, err))
	}
	return out
}

// TestNativeMatchesBridge sends the same requests through the native
// path and through the net/http bridge of the same engine, and through
// net/http itself, and diffs what the client reads (status, fields,
// framing, body, trailers) and what the upstream reads off its socket
// (the request line, Host, every field after the hop-by-hop and
// forwarding ones are replaced). The requests without a body must take
// the native path; those with one must not.
func TestNativeMatchesBridge(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("starts its front ends itself: runs once, in the fast pass")
	}
	answers := nativeAnswers()
	type side struct {
		name string
		base string
		f    *fastPath
		up   *scriptedUpstream
	}
	var sides []*side
	// native-indirect is the native path with its fields handed to a
	// Transport that takes only a Header (net/http's, for https
	// members), as a map.
	for _, name := range []string{"native", "bridge", "net", "native-indirect"} {
		s := &side{name: name, up: &scriptedUpstream{}}
		u := s.up.start(t, answers)
		p := mustNew(t, Config{Upstreams: []*url.URL{u}})
		switch name {
		case "net":
			s.base, _ = frontOn(t, p, "net")
		case "native-indirect":
			p.pool.direct = nil
			s.base, s.f = nativeFront(t, p, true)
		default:
			s.base, s.f = nativeFront(t, p, name == "native")
		}
		sides = append(sides, s)
	}
	hdr := "User-Agent: ua/1\r\nX-Multi: a\r\nx-multi: b\r\nx-lower-case: v\r\n" +
		"X-Forwarded-For: 6.6.6.6\r\nForwarded: for=evil\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\n" +
		"Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: 300\r\nProxy-Authorization: Basic eA==\r\n" +
		"Proxy-Connection: keep-alive\r\nTe: trailers, deflate\r\nTrailer: X-Nothing\r\nIdempotency-Key: k1\r\n"
	type tc struct {
		name, raw string
		n         int
		native    bool
		// netAnswers: net/http answers an HTTP/1.0 request in
		// HTTP/1.0 and the engine in HTTP/1.1, whatever the path.
		netAnswers bool
	}
	var cases []tc
	paths := make([]string, 0, len(answers))
	for path := range answers {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	for _, path := range paths {
		cases = append(cases,
			tc{"GET " + path, "GET " + path + "?q=1&r HTTP/1.1\r\nHost: front.example\r\n" + hdr + "\r\n", 1, true, false},
			tc{"HEAD " + path, "HEAD " + path + " HTTP/1.1\r\nHost: front.example\r\n\r\n", 1, true, false})
	}
	cases = append(cases,
		tc{"keep-alive pair", "GET /cl HTTP/1.1\r\nHost: x\r\n\r\nGET /chunked HTTP/1.1\r\nHost: x\r\n\r\n", 2, true, false},
		tc{"client closes", "GET /cl HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1, true, false},
		tc{"empty query", "GET /cl? HTTP/1.1\r\nHost: x\r\n\r\n", 1, true, false},
		tc{"sub-delims in the path", "GET /a(b)/c;d=e,f!{g} HTTP/1.1\r\nHost: x\r\n\r\n", 1, true, false},
		tc{"POST without a body", "POST /cl HTTP/1.1\r\nHost: x\r\n\r\n", 1, true, false},
		tc{"DELETE", "DELETE /cl HTTP/1.1\r\nHost: x\r\n\r\n", 1, true, false},
		tc{"many fields", "GET /cl HTTP/1.1\r\nHost: x\r\n" + manyFields(40) + hdr + "\r\n", 1, true, false},
		tc{"fields about filling the call's storage", "GET /cl HTTP/1.1\r\nHost: x\r\n" + manyFields(30) + "\r\n", 1, true, false},
		tc{"a target too long for the call's storage", "GET /cl?q=" + strings.Repeat("t", nativeArena/2) + " HTTP/1.1\r\nHost: x\r\n" + manyFields(3) + "\r\n", 1, true, false},
		tc{"POST with a body (bridge)", "POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 1, false, false},
		tc{"HTTP/1.0 (bridge)", "GET /cl HTTP/1.0\r\nHost: x\r\n\r\n", 1, false, true},
		tc{"escaped path (bridge)", "GET /a%20b HTTP/1.1\r\nHost: x\r\n\r\n", 1, false, false},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, seen := make([]string, len(sides)), make([]string, len(sides))
			for i, s := range sides {
				n, calls := s.up.len(), uint64(0)
				if s.f != nil {
					calls = s.f.nativeCalls.Load()
				}
				got[i] = strings.Join(exchange(t, s.base, c.raw, c.n), "---\n")
				seen[i] = fmt.Sprintf("%+v", complete(s.up.since(n)))
				if s.f == nil {
					continue
				}
				want := uint64(0)
				if s.name != "bridge" && c.native {
					want = uint64(c.n)
				}
				if d := s.f.nativeCalls.Load() - calls; d != want {
					t.Errorf("%s: %d requests forwarded natively, want %d", s.name, d, want)
				}
			}
			for i := 1; i < len(sides); i++ {
				if got[0] != got[i] && !(c.netAnswers && sides[i].name == "net") {
					t.Errorf("the client read different answers:\nnative:\n%s\n%s:\n%s", got[0], sides[i].name, got[i])
				}
				if seen[0] != seen[i] {
					t.Errorf("the upstream read different requests:\nnative %s\n%s %s", seen[0], sides[i].name, seen[i])
				}
			}
		})
	}
}

// TestNativeForwardsTheFieldsAsTheyCame: natively, an answer's fields
// reach the client in the order the upstream sent them (the bridge sorts
// them by name, as net/http writes a Header), its hop-by-hop fields and
// those its Connection names dropped, a route quota's RateLimit fields
// first; an error answer, forwarded from a Header (the retry policy
// reads and writes it), goes out in name order.
func TestNativeForwardsTheFieldsAsTheyCame(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("starts its front end itself: runs once, in the fast pass")
	}
	plain := "HTTP/1.1 200 OK\r\nX-B: 2\r\nContent-Type: text/plain\r\nConnection: X-Private\r\nx-a: 1\r\n" +
		"X-Private: secret\r\nKeep-Alive: timeout=5\r\nX-A: 0\r\nRatelimit-Policy: \"upstream\";q=9\r\nContent-Length: 2\r\n\r\nok"
	up := (&scriptedUpstream{}).start(t, map[string]string{
		"/plain": plain,
		"/q/x":   plain,
		"/503":   "HTTP/1.1 503 Service Unavailable\r\nX-B: 2\r\nConnection: X-Private\r\nX-Private: s\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nno",
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, Routes: []Route{
		{Name: "q", PathPrefix: "/q", Quota: &RouteQuota{Rate: 1000, Burst: 1000}},
	}})
	base, f := nativeFront(t, p, true)
	fields := func(path string) []string {
		t.Helper()
		b, err := io.ReadAll(send(t, base, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(b), "\r\n\r\n")
		var out []string
		for _, line := range strings.Split(head, "\r\n")[1:] {
			if !strings.HasPrefix(line, "Date: ") && line != "Connection: close" {
				out = append(out, line)
			}
		}
		return out
	}
	want := []string{"X-B: 2", "Content-Type: text/plain", "X-A: 1", "X-A: 0", `Ratelimit-Policy: "upstream";q=9`, "Content-Length: 2"}
	if got := fields("/plain"); !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q", got, want)
	}
	got := fields("/q/x")
	if len(got) != len(want)+2 || !strings.HasPrefix(got[0], `RateLimit-Policy: "q-quota"`) || !strings.HasPrefix(got[1], `RateLimit: "q-quota"`) || !slices.Equal(got[2:], want) {
		t.Errorf("with a quota: fields %q, want its RateLimit-Policy and RateLimit, then %q", got, want)
	}
	// The retry policy gave up on the 503 and said so in its Header.
	if got, want := fields("/503"), []string{"Content-Length: 2", "Sluice-No-Retry: overloaded", "X-A: 1", "X-B: 2", "Content-Type: text/plain; charset=utf-8"}; !slices.Equal(got, want) {
		t.Errorf("an error answer: fields %q, want %q", got, want)
	}
	if n := f.nativeCalls.Load(); n != 3 {
		t.Errorf("%d calls forwarded natively, want 3", n)
	}
}

// TestNativeRetryOnlyWhenReplayable: a request that meets a keep-alive
// connection the upstream closed before answering is sent again on a
// new one, and a 503 is retried, only when it may be repeated (an
// idempotent method, or an Idempotency-Key in whatever case the client
// wrote it); a POST without one is sent once and answered 502.
func TestNativeRetryOnlyWhenReplayable(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("the native path is the fast engine's")
	}
	up := &scriptedUpstream{}
	up.onRequest = func(path string, before int) bool {
		// The second request on a connection: closed unanswered.
		return !(path == "/stale" && before > 0)
	}
	answers := map[string]string{
		"/stale": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"/busy":  "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
	}
	u := up.start(t, answers)
	p := mustNew(t, Config{Upstreams: []*url.URL{u}, NoBreaker: true})
	base, f := nativeFront(t, p, true)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	send := func(method, path string, hdr ...string) (int, int) {
		t.Helper()
		n := up.len()
		req, _ := http.NewRequest(method, base+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header[hdr[i]] = []string{hdr[i+1]} // as written, not canonical
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, up.len() - n
	}
	// Warm one upstream connection, then each kind of request meets it
	// closed under it.
	for _, r := range []struct {
		method string
		hdr    []string
		status int
		sent   int
	}{
		{http.MethodGet, nil, 200, 2},
		{http.MethodPost, []string{"idempotency-key", "k"}, 200, 2},
		{http.MethodPost, nil, 502, 1},
	} {
		if st, _ := send(http.MethodGet, "/stale"); st != 200 {
			t.Fatalf("warm-up: %d", st)
		}
		if st, sent := send(r.method, "/stale", r.hdr...); st != r.status || sent != r.sent {
			t.Errorf("%s %v on a closed connection: %d after %d sends, want %d after %d", r.method, r.hdr, st, sent, r.status, r.sent)
		}
	}
	if st, sent := send(http.MethodGet, "/busy"); st != 503 || sent < 2 {
		t.Errorf("GET answered 503: %d after %d sends, want retried", st, sent)
	}
	if st, sent := send(http.MethodPost, "/busy"); st != 503 || sent != 1 {
		t.Errorf("POST answered 503: %d after %d sends, want one", st, sent)
	}
	if f.nativeCalls.Load() == 0 {
		t.Fatal("no request took the native path")
	}
	waitIdle(t, p, 5*time.Second)
}

// TestNativeAnswerCutShort: an upstream whose body stalls past the idle
// timeout, and a client that leaves mid-answer, both end the call, free
// the slot and leave the client with a cut answer (never one that
// looks whole).
func TestNativeAnswerCutShort(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("the native path is the fast engine's")
	}
	release := make(chan struct{})
	upstreamGone := make(chan string, 4)
	u := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		v, err := readUpstreamRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		switch v.RequestURI {
		case "/stall":
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
			<-release
		case "/stream":
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk := fmt.Sprintf("%x\r\n%s\r\n", 32<<10, strings.Repeat("x", 32<<10))
			for {
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.WriteString(c, chunk); err != nil {
					upstreamGone <- v.RequestURI
					return
				}
			}
		}
	})
	t.Cleanup(func() { close(release) })
	p := mustNew(t, Config{Upstreams: []*url.URL{u}, UpstreamIdleTimeout: 100 * time.Millisecond})
	base, f := nativeFront(t, p, true)

	// The body stalls: the connection ends before the answer is whole
	// (as on the bridge, what was not yet sent is dropped).
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || strings.Contains(string(got), "\r\n\r\nab") && len(got) >= strings.Index(string(got), "\r\n\r\n")+14 {
		t.Errorf("stalled body: read %q, %v; want the connection closed before the answer is whole", got, err)
	}
	waitIdle(t, p, 5*time.Second)

	// The client leaves mid-answer: the upstream's connection is closed.
	c, err = net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	if _, err := br.Peek(1 << 10); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-upstreamGone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream kept streaming after the client left")
	}
	waitIdle(t, p, 5*time.Second)
	if f.nativeCalls.Load() != 2 {
		t.Errorf("%d requests forwarded natively, want 2", f.nativeCalls.Load())
	}
}

// TestNativeClientLeavingWhileUpstreamIsSlow: the delayed watch sees a
// client that leaves while the upstream has not answered, cancels the
// call and frees the slot.
func TestNativeClientLeavingWhileUpstreamIsSlow(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("the native path is the fast engine's")
	}
	b := newBlock()
	up := backend(t, b.ServeHTTP)
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 1})
	base, f := nativeFront(t, p, true)
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	t.Cleanup(release) // a failed test must not leave the upstream waiting
	ctx, cancel := context.WithCancel(context.Background())
	c := &http.Client{Transport: &http.Transport{}}
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/slow", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	b.next(t)
	cancel()
	<-done
	waitIdle(t, p, 2*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for b.canceled.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream call was not canceled when the client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	if f.nativeCalls.Load() != 1 {
		t.Errorf("%d requests forwarded natively, want 1", f.nativeCalls.Load())
	}
}

// TestNativeForwardedChain: forwarded natively, a trusted proxy's chain
// is kept and this hop appended, and any other peer's claimed chain is
// replaced by its own address.
func TestNativeForwardedChain(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("the native path is the fast engine's")
	}
	for _, tc := range []struct {
		name                    string
		trusted                 []netip.Prefix
		xff, fwd, xfHost, proto string
	}{
		{"trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "203.0.113.9, 127.0.0.1", `for=203.0.113.9, for="127.0.0.1:`, "shop.example", "https"},
		{"untrusted", nil, "127.0.0.1", `for="127.0.0.1:`, "front", "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &scriptedUpstream{}
			u := up.start(t, map[string]string{"/": "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"})
			p := mustNew(t, Config{Upstreams: []*url.URL{u}, TrustedProxies: tc.trusted})
			base, f := nativeFront(t, p, true)
			got := exchange(t, base, "GET / HTTP/1.1\r\nHost: front\r\nx-forwarded-for: 203.0.113.9\r\nForwarded: for=203.0.113.9\r\n"+
				"X-Forwarded-Host: shop.example\r\nX-Forwarded-Proto: https\r\n\r\n", 1)
			seen := up.since(0)
			if len(seen) != 1 || !strings.HasPrefix(got[0], "HTTP/1.1 200") || f.nativeCalls.Load() != 1 {
				t.Fatalf("answer %q, upstream saw %+v, %d native", got, seen, f.nativeCalls.Load())
			}
			h := seen[0].Header
			if xff := h.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != tc.xff {
				t.Errorf("X-Forwarded-For %q, want %q", xff, tc.xff)
			}
			if fwd := h.Values("Forwarded"); len(fwd) != 1 || !strings.HasPrefix(fwd[0], tc.fwd) {
				t.Errorf("Forwarded %q, want it to start %q", fwd, tc.fwd)
			}
			if h.Get("X-Forwarded-Host") != tc.xfHost || h.Get("X-Forwarded-Proto") != tc.proto {
				t.Errorf("X-Forwarded-Host %q, -Proto %q; want %q, %q", h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"), tc.xfHost, tc.proto)
			}
		})
	}
}

// TestNativeCallDeadline: forwarded natively, a call has the proxy's
// own deadline from the request's arrival: an upstream that never
// answers gets 504 within CallTimeout (not the longer HeaderTimeout),
// and is told what is left of it.
func TestNativeCallDeadline(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("the native path is the fast engine's")
	}
	budget := make(chan string, 1)
	stop := make(chan struct{})
	defer close(stop)
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		select {
		case budget <- req.Header.Get("Request-Timeout"):
		default:
		}
		<-stop // never answers
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, HeaderTimeout: 2 * time.Second, CallTimeout: 300 * time.Millisecond,
		NoBreaker: true, EjectAfter: -1})
	base, f := nativeFront(t, p, true)
	start := time.Now()
	resp, err := http.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusGatewayTimeout || took > 1500*time.Millisecond {
		t.Fatalf("hung upstream: %d after %v; want 504 within the 300 ms call timeout", resp.StatusCode, took)
	}
	if v, err := strconv.ParseFloat(<-budget, 64); err != nil || v <= 0 || v > 0.3 {
		t.Errorf("the upstream was told Request-Timeout %v (%v); want what is left of 0.3 s", v, err)
	}
	if f.nativeCalls.Load() != 1 {
		t.Errorf("%d requests forwarded natively, want 1", f.nativeCalls.Load())
	}
	waitIdle(t, p, 5*time.Second)
}
