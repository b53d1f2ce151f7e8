package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns a Client closed at the test's end.
func newClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c := New(cfg)
	t.Cleanup(c.Close)
	return c
}

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t testing.TB, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &n
}

// rawUpstream is a TCP server whose connections are served by serve, one
// goroutine each, so a test writes exactly the bytes an upstream sends.
type rawUpstream struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newRawUpstream(t testing.TB, serve func(c net.Conn, br *bufio.Reader)) *rawUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{l: l}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *rawUpstream) url() *url.URL {
	return &url.URL{Scheme: "http", Host: u.l.Addr().String(), Path: "/"}
}

func (u *rawUpstream) accepted() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.conns)
}

// answerEach reads requests with net/http's parser and answers each with
// resp (raw bytes), until the connection ends.
func answerEach(resp string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	}
}

func mustGet(t testing.TB, c http.RoundTripper, u string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp, string(b)
}

// synctestRun runs f in a synctest bubble with a dialer whose
// connections are net.Pipe ends served by the function given to serve.
func synctestRun(t *testing.T, f func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), serve func(func(net.Conn)))) {
	synctest.Test(t, func(t *testing.T) {
		var handler func(net.Conn)
		dial := func(context.Context, string, string) (net.Conn, error) {
			a, b := net.Pipe()
			go func() {
				defer b.Close()
				handler(b)
			}()
			return a, nil
		}
		f(t, dial, func(h func(net.Conn)) { handler = h })
	})
}

// newReverseProxy is httputil's ReverseProxy to target over rt, sharing
// the inbound request's trailer map as sluice's proxy does (its values
// come with the end of the body).
func newReverseProxy(target *url.URL, rt http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{Transport: rt, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Trailer = pr.In.Trailer
	}}
}
