package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpmatrix"
)

// upstreamView is what an upstream received of one request, read off
// the raw bytes of its connection.
type upstreamView struct {
	Method, RequestURI, Host, Proto string
	Header                          http.Header // framing fields excluded
	Body                            string
	Trailer                         http.Header
	// Framing is the framing fields as written: "Content-Length: 5",
	// "Transfer-Encoding: chunked". A request has one at most.
	Framing []string
	Err     string // the bytes did not read as a request
}

// rawRecorder is a raw upstream that reads each request off its
// connection's bytes (so it sees every request the proxy wrote, a
// second one hidden in a first's body included), records what it read
// and answers 200 "ok", keeping the connection.
type rawRecorder struct {
	mu   sync.Mutex
	seen []upstreamView
}

func (r *rawRecorder) add(v upstreamView) {
	r.mu.Lock()
	r.seen = append(r.seen, v)
	r.mu.Unlock()
}

// since returns the views recorded after the first n.
func (r *rawRecorder) since(n int) []upstreamView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[n:])
}

func (r *rawRecorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func recordingUpstream(t *testing.T) (*url.URL, *rawRecorder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &rawRecorder{}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					v, err := readUpstreamRequest(br)
					if errors.Is(err, io.EOF) {
						return
					}
					if err != nil {
						rec.add(upstreamView{Err: err.Error()})
						return
					}
					rec.add(v)
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}, rec
}

// readUpstreamRequest reads one request from br: the head line by line
// (every line CRLF-ended), then exactly the body its one framing says.
// io.EOF means the connection ended cleanly between requests.
func readUpstreamRequest(br *bufio.Reader) (upstreamView, error) {
	var head strings.Builder
	var v upstreamView
	for first := true; ; first = false {
		line, err := br.ReadString('\n')
		if err != nil {
			if first && line == "" {
				return v, io.EOF
			}
			return v, fmt.Errorf("head cut short: %q", head.String()+line)
		}
		if !strings.HasSuffix(line, "\r\n") {
			return v, fmt.Errorf("bare LF in the head: %q", line)
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
		name, _, _ := strings.Cut(line, ":")
		if n := strings.ToLower(strings.TrimSpace(name)); n == "content-length" || n == "transfer-encoding" {
			v.Framing = append(v.Framing, strings.TrimSpace(line))
		}
	}
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head.String())))
	if err != nil {
		return v, fmt.Errorf("head %q: %v", head.String(), err)
	}
	if len(v.Framing) > 1 {
		return v, fmt.Errorf("%d framing fields: %q", len(v.Framing), v.Framing)
	}
	var body []byte
	switch {
	case slices.Equal(req.TransferEncoding, []string{"chunked"}):
		if body, err = io.ReadAll(httputil.NewChunkedReader(br)); err != nil {
			return v, fmt.Errorf("chunked body: %v", err)
		}
		tp := strings.Builder{}
		for {
			line, err := br.ReadString('\n')
			if err != nil || !strings.HasSuffix(line, "\r\n") {
				return v, fmt.Errorf("trailer section: %q %v", line, err)
			}
			if line == "\r\n" {
				break
			}
			tp.WriteString(line)
		}
		if tp.Len() > 0 {
			tr, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: t\r\n" + tp.String() + "\r\n")))
			if err != nil {
				return v, fmt.Errorf("trailer %q: %v", tp.String(), err)
			}
			v.Trailer = tr.Header
			v.Trailer.Del("Host")
		}
	case req.ContentLength > 0:
		body = make([]byte, req.ContentLength)
		if _, err := io.ReadFull(br, body); err != nil {
			return v, fmt.Errorf("body of %d bytes: %v", req.ContentLength, err)
		}
	}
	req.Header.Del("Content-Length")
	v.Method, v.RequestURI, v.Host, v.Proto = req.Method, req.RequestURI, req.Host, req.Proto
	v.Header, v.Body = req.Header, string(body)
	return v, nil
}

// rawStatuses writes raw to a new connection to base and returns the
// status of each of the first n answers read back (fewer if the
// connection ends first).
func rawStatuses(t *testing.T, base, raw string, n int) []int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method := http.MethodGet
	if strings.HasPrefix(raw, "HEAD ") {
		method = http.MethodHead
	}
	var out []int
	for range n {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp.StatusCode)
		method = http.MethodGet
	}
	return out
}

// comparable returns v with what differs between any two connections
// through the proxy replaced: the upstream's own address (each side has
// its upstream), the client's port in Forwarded, and the remaining
// time a Request-Timeout carries.
func (v upstreamView) comparable() upstreamView {
	v.Host = "upstream"
	h := v.Header.Clone()
	if h.Get("Request-Timeout") != "" {
		h.Set("Request-Timeout", "(set)")
	}
	for i, f := range h.Values("Forwarded") {
		h["Forwarded"][i] = forwardedPort.ReplaceAllString(f, `for="$1"`)
	}
	v.Header = h
	return v
}

var forwardedPort = regexp.MustCompile(`for="([^"]*):[0-9]+"`)

// complete returns the requests the upstream read whole: a request cut
// short (the proxy abandons the upstream connection when the client's
// body turns out malformed) is never served.
func complete(vs []upstreamView) []upstreamView {
	var out []upstreamView
	for _, v := range vs {
		if !strings.Contains(v.Err, "unexpected EOF") {
			out = append(out, v.comparable())
		}
	}
	return out
}

// TestUpstreamViewMatrixOnBothEngines sends the engine's request matrix
// through the proxy on each front end and diffs what the upstream
// receives: the answers, and for each request the upstream got, its
// method, target, Host, version, header fields after the hop-by-hop ones
// are gone (X-Forwarded-For included), body, trailers and its one
// framing. Where the engine refuses what net/http takes (the matrix's
// Net cases), the engine's upstream must see nothing at all. It starts
// both front ends itself, so it runs in the fast pass only.
func TestUpstreamViewMatrixOnBothEngines(t *testing.T) {
	if testEngine != "fast" {
		t.Skip("starts both front ends itself: runs once, in the fast pass")
	}
	type side struct {
		base string
		rec  *rawRecorder
	}
	var sides [2]side
	for i, e := range []string{"net", "fast"} {
		up, rec := recordingUpstream(t)
		base, _ := frontOn(t, mustNew(t, Config{Upstreams: []*url.URL{up}}), e)
		sides[i] = side{base, rec}
	}
	for _, c := range httpmatrix.Requests() {
		t.Run(c.Name, func(t *testing.T) {
			var statuses [2][]int
			var views [2][]upstreamView
			for i, s := range sides {
				n := s.rec.len()
				statuses[i] = rawStatuses(t, s.base, c.Raw, c.Answers())
				views[i] = s.rec.since(n)
				views[i] = complete(views[i])
				for _, v := range views[i] {
					if v.Err != "" {
						t.Errorf("%s: the upstream could not read what the proxy wrote: %s", []string{"net", "fast"}[i], v.Err)
					}
				}
			}
			net, fast := statuses[0], statuses[1]
			if c.Net != nil {
				// The front ends differ here on purpose (the matrix says
				// why): each answers as the matrix says, and the one that
				// refuses sends nothing upstream.
				if !slices.Equal(fast, c.Engine) || !slices.Equal(net, c.Net) {
					t.Fatalf("answers: fast %v (want %v), net %v (want %v)", fast, c.Engine, net, c.Net)
				}
				for i, st := range statuses {
					if st[len(st)-1] >= 400 && len(views[i]) != 0 {
						t.Errorf("%s refused, yet the upstream saw %+v", []string{"net", "fast"}[i], views[i])
					}
				}
				return
			}
			if !slices.Equal(net, fast) {
				t.Fatalf("answers differ: net %v, fast %v", net, fast)
			}
			if c.Engine[len(c.Engine)-1] >= 400 && (len(views[0]) != 0 || len(views[1]) != 0) {
				t.Errorf("a request both front ends refuse reached the upstream: net %+v, fast %+v", views[0], views[1])
			}
			if fmt.Sprintf("%+v", views[0]) != fmt.Sprintf("%+v", views[1]) {
				t.Errorf("the upstream saw different requests:\nnet  %+v\nfast %+v", views[0], views[1])
			}
		})
	}
}

// TestSmugglingNeverReachesUpstream sends each smuggling attack through
// the proxy as raw bytes. Whatever the front end makes of them, the
// upstream reads exactly the requests the client got answers for, each
// with one framing, so it can never be handed a request the proxy did
// not see; on sluice's engine the attack is refused whole and nothing
// reaches the upstream.
func TestSmugglingNeverReachesUpstream(t *testing.T) {
	up, rec := recordingUpstream(t)
	base, _ := front(t, mustNew(t, Config{Upstreams: []*url.URL{up}}))
	for _, a := range httpmatrix.Smuggling() {
		t.Run(a.Name, func(t *testing.T) {
			n := rec.len()
			// A last request closes the connection, so every answer
			// the front end gives is read back.
			got := rawStatuses(t, base, a.Raw+"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 3)
			seen := complete(rec.since(n))
			for _, v := range seen {
				if v.Err != "" {
					t.Errorf("the upstream could not read what the proxy wrote: %s", v.Err)
				}
			}
			if testEngine == "fast" {
				if len(got) != 1 || got[0] != http.StatusBadRequest && got[0] != http.StatusNotImplemented {
					t.Errorf("answers %v, want one refusal (400 or 501)", got)
				}
				if len(seen) != 0 {
					t.Errorf("the upstream saw %d requests: %+v", len(seen), seen)
				}
				return
			}
			ok := 0
			for _, st := range got {
				if st == http.StatusOK {
					ok++
				}
			}
			if len(seen) != ok {
				t.Errorf("the upstream read %d requests for %d answered (%v): %+v", len(seen), ok, got, seen)
			}
		})
	}
}
