package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// ioTimeout bounds every blocking read in the tests; a hang fails the
// test instead of stalling it.
const ioTimeout = 5 * time.Second

// startServer serves an http.Server on a connlimit Listener on loopback
// and shuts both down when the test ends.
func startServer(t testing.TB, cfg Config, handler http.Handler) *Listener {
	t.Helper()
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if handler == nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "ok")
		})
	}
	srv := &http.Server{Handler: handler, ErrorLog: nil}
	l.ConfigureServer(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return l
}

// rawClient is one HTTP/1.1 connection under the test's control, so the
// test knows exactly which socket each request uses.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

func dial(t testing.TB, addr net.Addr) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawClient{t: t, conn: c, br: bufio.NewReader(c)}
}

// get sends a GET and reads the whole response.
func (c *rawClient) get(path string) (*http.Response, string, error) {
	if _, err := fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		return nil, "", err
	}
	return c.read()
}

// read reads one response.
func (c *rawClient) read() (*http.Response, string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(body), err
}

// mustGet is get that fails the test unless the answer is 200 "ok".
func (c *rawClient) mustGet(path string) {
	c.t.Helper()
	resp, body, err := c.get(path)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || body != "ok" {
		c.t.Fatalf("GET %s: %d %q, want 200 \"ok\"", path, resp.StatusCode, body)
	}
}

// waitEOF fails the test unless the server closes the connection (EOF or
// reset) within d, and returns how long that took.
func (c *rawClient) waitEOF(d time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	_ = c.conn.SetReadDeadline(start.Add(d))
	n, err := c.br.Read(make([]byte, 1))
	if n > 0 || err == nil {
		c.t.Fatalf("read %d unexpected bytes, want the server to close", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after %v", d)
	}
	return time.Since(start)
}

// checkBusyReply asserts resp is the connection-level overload contract.
func checkBusyReply(t testing.TB, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	for h, want := range map[string]string{
		"Retry-After":  "1",
		"Content-Type": "application/json",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if !resp.Close {
		t.Errorf("response does not announce Connection: close")
	}
	if want := `{"error":"BUSY","gate":"connections","reason":"max_conns"}`; strings.TrimSpace(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
}

// eventually waits for state that another goroutine reaches.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	// Every state awaited here (a close counted, a slot released) follows
	// its cause within milliseconds, and the timeouts under test are
	// 150 ms: 3 s is 20 times that, and a mutant that keeps the state
	// from coming fails in 3 s, not 10.
	testutil.EventuallyWithin(t, 3*time.Second, what, cond)
}
