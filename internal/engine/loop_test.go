package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// loopFunc is a FastHandler that runs inside the read loop.
type loopFunc func(w *Response, r *Request) bool

func (f loopFunc) ServeFast(w *Response, r *Request) bool { return f(w, r) }
func (loopFunc) ReadLoop() bool                           { return true }

// declineLoop sends every request on to Config.Handler, after the read
// loop parsed it: the ordinary path's answers, the loop's reading.
func withLoop(cfg Config) Config {
	cfg.Fast = loopFunc(func(*Response, *Request) bool { return false })
	return cfg
}

// forEachReadPath runs test on the ordinary path and on the read loop.
func forEachReadPath(t *testing.T, test func(t *testing.T, path func(Config) Config)) {
	t.Run("ordinary", func(t *testing.T) { test(t, func(c Config) Config { return c }) })
	t.Run("loop", func(t *testing.T) { test(t, withLoop) })
}

var okLines = []byte("Content-Type: text/plain\r\nContent-Length: 2\r\n")

// answerOK is a loop FastHandler that answers every request "ok".
var answerOK = loopFunc(func(w *Response, r *Request) bool {
	w.Write(200, okLines, []byte("ok"))
	return true
})

// getOK sends a GET for path on c and reads its "ok" answer.
func getOK(t *testing.T, c net.Conn, br *bufio.Reader, path string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("GET %s: body %q", path, b)
	}
}

// dial opens a connection to addr, closed at the test's end.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// A request answered in the read loop costs one read: the loop waits
// after a read that emptied the socket instead of reading again to find
// it empty.
func TestLoopReadsOncePerRequest(t *testing.T) {
	s, addr := serveEngine(t, Config{Fast: answerOK})
	c, br := dial(t, addr)
	const n = 200
	for i := range n {
		getOK(t, c, br, fmt.Sprintf("/%d", i))
	}
	c.Close()
	testutil.EventuallyWithin(t, 5*time.Second, "the connection's end", func() bool { return s.loopReads.Load() > 0 })
	// n reads with a request each, the one that sees the end, and a
	// little slack for a wake-up that finds nothing (readiness raised
	// while the goroutine ran); two reads per request would be 2n.
	if got := s.loopReads.Load(); got < n+1 || got > n+n/10 {
		t.Errorf("%d reads for %d requests, want about one each", got, n)
	}
}

// notingConn is a wrapper that keeps books on reads, as connlimit.Conn
// does: the loop reads under it and reports each read.
type notingConn struct {
	net.Conn
	reads, noted, bytes atomic.Int64
}

func (c *notingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}
func (c *notingConn) NetConn() net.Conn { return c.Conn }
func (c *notingConn) NoteRead(n int, err error) {
	c.noted.Add(1)
	c.bytes.Add(int64(n))
}

type notingListener struct {
	net.Listener
	conns chan *notingConn
}

func (l notingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	nc := &notingConn{Conn: c}
	l.conns <- nc
	return nc, nil
}

// The loop reads under a wrapper that hands out its connection, and
// tells the wrapper of every read with bytes.
func TestLoopTellsTheWrapperOfItsReads(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := notingListener{inner, make(chan *notingConn, 1)}
	s := New(Config{Fast: answerOK})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() {
		s.Close()
		<-done
	}()
	reqs := "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
	raw := rawExchange(t, inner.Addr().String(), reqs+reqs+reqs)
	if got := strings.Count(raw, "HTTP/1.1 200 OK"); got != 3 {
		t.Fatalf("%d answers, want 3: %q", got, raw)
	}
	nc := <-l.conns
	testutil.EventuallyWithin(t, 5*time.Second, "the connection's end", func() bool { return s.loopReads.Load() > 0 })
	if r := nc.reads.Load(); r != 0 {
		t.Errorf("the wrapper's Read was called %d times; the loop reads the socket itself", r)
	}
	if b := nc.bytes.Load(); b != int64(3*len(reqs)) {
		t.Errorf("the wrapper heard of %d bytes read, want %d", b, 3*len(reqs))
	}
	if nc.noted.Load() == 0 {
		t.Error("the wrapper heard of no read")
	}
}

// A head that arrives a byte at a time stays under the header timeout
// that its first byte started, however often the loop waits for the
// next byte (slowloris).
func TestLoopHeaderTimeoutHoldsAcrossWaits(t *testing.T) {
	_, addr := serveEngine(t, Config{ReadHeaderTimeout: 300 * time.Millisecond, Fast: answerOK})
	c, br := dial(t, addr)
	getOK(t, c, br, "/a")
	closed := make(chan time.Time, 1)
	go func() {
		io.Copy(io.Discard, br)
		closed <- time.Now()
	}()
	start := time.Now()
	head := "GET /b HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 50)
	for i := 0; i < len(head); i++ {
		select {
		case at := <-closed:
			if d := at.Sub(start); d > 2*time.Second {
				t.Fatalf("closed %v after the head began, want about 300ms", d)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := c.Write([]byte{head[i]}); err != nil {
			return // closed under the write: the timeout held
		}
	}
	t.Fatalf("a head trickled for %v without the header timeout closing the connection", time.Since(start))
}

// A client that half-closes right after its request: when the end
// comes with the request's bytes, no readiness follows the read that
// took them; the sweeper sees it, and the connection closes after
// the answer. Here the second request and the end arrive while the
// first is being answered, so the wake-up that reads them is the last.
func TestLoopSeesAnEndThatCameWithTheRequest(t *testing.T) {
	_, addr := serveEngine(t, Config{Fast: loopFunc(func(w *Response, r *Request) bool {
		if p, _ := r.Path(); p == "/slow" {
			time.Sleep(10 * time.Millisecond)
		}
		w.Write(200, okLines, []byte("ok"))
		return true
	})})
	c, br := dial(t, addr)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Requests close together first (a busy connection, which the
	// loop does not read again before it waits).
	for range 3 {
		getOK(t, c, br, "/a")
	}
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(2 * time.Millisecond) // the server is answering it
	io.WriteString(c, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	c.(*net.TCPConn).CloseWrite()
	start := time.Now()
	b, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("no end within 5 s after the client's (%q): %v", b, err)
	}
	if got := strings.Count(string(b), "200 OK"); got != 2 {
		t.Fatalf("%d answers: %q", got, b)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the connection closed %v after the client's end, want within about %v", d, 2*loopSweep)
	}
}

// The idle timeout closes a connection that waits in the loop.
func TestLoopIdleTimeout(t *testing.T) {
	_, addr := serveEngine(t, Config{IdleTimeout: 200 * time.Millisecond, Fast: answerOK})
	c, br := dial(t, addr)
	getOK(t, c, br, "/a")
	start := time.Now()
	c.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read on an idle connection: %v, want EOF", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout", d)
	}
}

// On one connection, pipelined: answers from the loop, a request with a
// body (read outside it), one the FastHandler declines (the bridge), one
// finished through Continue and one through ContinueWith, in order.
func TestLoopHandsOffAndComesBack(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "bridge %s %s", r.URL.Path, b)
	})
	// Without FastBodies the request with a body goes to the handler
	// without being offered to the FastHandler, as on the ordinary path.
	_, addr := serveEngine(t, Config{Handler: h, Fast: loopFunc(func(w *Response, r *Request) bool {
		p, _ := r.Path()
		switch {
		case p == "/decline":
			return false
		case p == "/continue":
			w.Continue(func() {
				// What only the ordinary path may do: the bridge.
				w.ServeWith(h)
			})
		case p == "/with":
			w.ContinueWith(h)
		default:
			w.Write(200, []byte("Content-Length: 4\r\n"), []byte("loop"))
		}
		return true
	})})
	reqs := []string{
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"GET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /decline HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /continue HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /with HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	}
	want := []string{"loop", "bridge /p hello", "loop", "bridge /decline ", "bridge /continue ", "bridge /with ", "loop"}
	for _, pipelined := range []bool{true, false} {
		t.Run(fmt.Sprintf("pipelined=%v", pipelined), func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			if pipelined {
				io.WriteString(c, strings.Join(reqs, ""))
			}
			for i, req := range reqs {
				if !pipelined {
					io.WriteString(c, req)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				b, _ := io.ReadAll(resp.Body)
				if string(b) != want[i] {
					t.Errorf("answer %d: %q, want %q", i, b, want[i])
				}
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("after Connection: close: %v, want EOF", err)
			}
		})
	}
}

// A ReadLoopHandler that calls ServeWith itself would read the
// connection under the loop's lock: it panics, the connection closes,
// the server goes on.
func TestLoopRefusesServeWithInside(t *testing.T) {
	var mu testutil.SyncBuffer
	_, addr := serveEngine(t, Config{ErrorLog: log.New(&mu, "", 0), Fast: loopFunc(func(w *Response, r *Request) bool {
		if p, _ := r.Path(); p == "/bad" {
			w.ServeWith(http.NotFoundHandler())
			return true
		}
		w.Write(200, okLines, []byte("ok"))
		return true
	})})
	raw := rawExchange(t, addr, "GET /bad HTTP/1.1\r\nHost: x\r\n\r\n")
	if raw != "" {
		t.Errorf("answer %q, want the connection closed", raw)
	}
	if !strings.Contains(mu.String(), "inside the read loop") {
		t.Errorf("log %q does not say why", mu.String())
	}
	if raw := rawExchange(t, addr, "GET /good HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(raw, "200 OK") {
		t.Errorf("the next connection got %q", raw)
	}
}

// Close ends connections waiting in the loop at once.
func TestLoopCloseEndsWaitingConnections(t *testing.T) {
	s, addr := serveEngine(t, Config{Fast: answerOK})
	var conns []net.Conn
	for range 8 {
		c, br := dial(t, addr)
		getOK(t, c, br, "/a")
		conns = append(conns, c)
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
			t.Errorf("connection %d still open after Close (%d, %v)", i, n, err)
		}
	}
}

// Close does not wait for a request served inside the loop (a request
// forwarded to a slow upstream waits there): the socket is shut down at
// once, and the request's watch sees the client's end.
func TestLoopCloseDoesNotWaitForARequest(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1)
	s, addr := serveEngine(t, Config{Fast: loopFunc(func(w *Response, r *Request) bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w.WatchClient(time.Millisecond, cancel)
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-release:
		}
		w.Unwatch()
		w.Write(200, okLines, []byte("ok"))
		return true
	})})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited for the request in the loop")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Errorf("after Close the client read %q, %v; want the end", b, err)
	}
}

// A connection whose requests come further apart than loopSweep/8 reads
// again before it waits, so the sweeper never needs to look at it.
func TestLoopSlowConnectionNeedsNoSweeper(t *testing.T) {
	s, addr := serveEngine(t, Config{Fast: answerOK})
	c, br := dial(t, addr)
	for i := range 4 {
		if i > 0 {
			time.Sleep(loopSweep/8 + 20*time.Millisecond)
		}
		getOK(t, c, br, "/a")
		if s.sweeping.Load() {
			t.Fatalf("request %d: the sweeper runs for a connection that sends a request every %v", i, loopSweep/8+20*time.Millisecond)
		}
	}
}
