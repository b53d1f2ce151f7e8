package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// bigFile writes a file of size bytes and returns its path.
func bigFile(t testing.TB, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fileHandler serves the file at p. viaReadFrom picks io.Copy from the
// *os.File (ReadFrom, sendfile on Linux); otherwise the body is written in
// 32 KiB Writes. done receives the copy's error when the handler returns.
func fileHandler(p string, viaReadFrom bool, done chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(p)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
		if viaReadFrom {
			_, err = io.Copy(w, f)
		} else {
			_, err = io.CopyBuffer(writerOnly{w}, f, make([]byte, 32<<10))
		}
		done <- err
	})
}

// A client that asks for a large response and never reads it is cut off
// about SendTimeout after the socket buffers filled: the handler's write
// fails (so it can release what it holds), the connection closes, and the
// close is counted.
// About 2 s: each case fills real socket buffers with a 64 MiB file before
// the send timeout can start.
func TestStalledReaderIsCutAfterSendTimeout(t *testing.T) {
	p := bigFile(t, 64<<20)
	for _, viaReadFrom := range []bool{true, false} {
		t.Run(fmt.Sprintf("readfrom=%v", viaReadFrom), func(t *testing.T) {
			done := make(chan error, 1)
			l := startServer(t, Config{MaxConns: 4, SendTimeout: shortTimeout, IdleTimeout: longTimeout}, fileHandler(p, viaReadFrom, done))
			c := dial(t, l.Addr())
			if _, err := io.WriteString(c.conn, "GET /big HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			// Never read. The handler must give up on its own: a case
			// passes in about 0.2 s (buffers fill, then the send
			// timeout), so 4 s without the handler ending is a failure
			// and not a slow machine.
			select {
			case err := <-done:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("handler's copy ended with %v, want a deadline error", err)
				}
			case <-time.After(4 * time.Second):
				t.Fatal("the handler still writes to a client that stopped reading 4 s ago")
			}
			eventually(t, "the connection slot to be released", func() bool { return l.Stats().Open == 0 })
			// The failed write is counted before net/http closes the
			// connection, so with the slot released the count is final.
			if s := l.Stats(); s.ClosedSendTimeout != 1 || s.ClosedBodyTimeout != 0 || s.ClosedHeaderTimeout != 0 {
				t.Errorf("send timeouts %d, body timeouts %d, header timeouts %d; want 1, 0, 0", s.ClosedSendTimeout, s.ClosedBodyTimeout, s.ClosedHeaderTimeout)
			}
		})
	}
}

// smallSendBuffers is a listener whose connections have a fixed 64 KiB
// send buffer. Linux wakes a blocked writer only when a third of the send
// buffer has drained, and an autotuned buffer grows to megabytes: a slow
// client would then need longer than a short test timeout to make room,
// although it never stops reading.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// startSmallBufferServer is startServer with smallSendBuffers.
func startSmallBufferServer(t *testing.T, cfg Config, handler http.Handler) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(smallSendBuffers{inner}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	l.ConfigureServer(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return l
}

// slowDial connects with a small receive buffer, so the client's own
// pace, not the kernel's buffers, decides how fast the server can write.
func slowDial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: ioTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A slow but live client gets the whole of a large response even though
// the transfer lasts many times SendTimeout: the deadline is renewed on
// every write, as with nginx's send_timeout, not a cap on the response.
// About 1.5 s a case: the transfer must outlast the send timeout three
// times over, and the timeout must outlast the pauses a loaded 2-core
// machine gives a reader that is live (shortTimeout's 150 ms did not: the
// reader was once cut off after a 300 ms stall).
func TestSlowLiveReaderCompletes(t *testing.T) {
	const size = 6 << 20
	const sendTimeout = 500 * time.Millisecond
	p := bigFile(t, size)
	for _, viaReadFrom := range []bool{true, false} {
		t.Run(fmt.Sprintf("readfrom=%v", viaReadFrom), func(t *testing.T) {
			done := make(chan error, 1)
			l := startSmallBufferServer(t, Config{MaxConns: 4, SendTimeout: sendTimeout, IdleTimeout: longTimeout}, fileHandler(p, viaReadFrom, done))
			conn := slowDial(t, l.Addr())
			if _, err := io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(60 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 16<<10), nil)
			if err != nil {
				t.Fatal(err)
			}
			// About 4 MB/s: one and a half seconds for the file, three times
			// the send timeout.
			var got int64
			buf := make([]byte, 16<<10)
			for {
				n, err := resp.Body.Read(buf)
				got += int64(n)
				if err != nil {
					if err != io.EOF {
						t.Fatalf("after %d of %d bytes (%v): %v", got, size, time.Since(start), err)
					}
					break
				}
				time.Sleep(4 * time.Millisecond)
			}
			took := time.Since(start)
			if got != size {
				t.Fatalf("got %d bytes, want %d", got, size)
			}
			if err := <-done; err != nil {
				t.Errorf("handler's copy: %v", err)
			}
			if took < 3*sendTimeout {
				t.Logf("transfer took only %v; the client was not slow enough to test renewal", took)
			}
			if n := l.Stats().ClosedSendTimeout; n != 0 {
				t.Errorf("%d send-timeout closes for a live client", n)
			}
		})
	}
}

// A request that declares a body and never sends it, to a handler that
// does not read it, is still answered, and its connection closed within
// BodyTimeout: net/http's own discard of the body runs under the
// deadline. Without it the reply never came.
func TestMissingBodyIsAnsweredAndClosed(t *testing.T) {
	l := startServer(t, Config{MaxConns: 4, BodyTimeout: shortTimeout, IdleTimeout: longTimeout}, nil)
	c := dial(t, l.Addr())
	start := time.Now()
	if _, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body, err := c.read()
	if err != nil {
		t.Fatalf("no reply to a request whose body never came: %v", err)
	}
	if resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("reply %d %q, want 200 ok", resp.StatusCode, body)
	}
	c.waitEOF(ioTimeout)
	if took := time.Since(start); took > 20*shortTimeout {
		t.Errorf("closed after %v, want about the body timeout %v", took, shortTimeout)
	}
	eventually(t, "the body-timeout close to be counted", func() bool { return l.Stats().ClosedBodyTimeout == 1 })
	if n := l.Stats().ClosedSendTimeout; n != 0 {
		t.Errorf("%d send timeouts", n)
	}
}

// A handler that reads the body sees the timeout as a read error, once
// the body stops progressing for BodyTimeout; a body that trickles in,
// each byte within the timeout, is read whole although it takes longer.
func TestBodyTimeoutRenewedOnProgress(t *testing.T) {
	readErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			http.Error(w, "slow body", http.StatusRequestTimeout)
			return
		}
		_, _ = io.WriteString(w, strconv.Itoa(len(b)))
	})
	l := startServer(t, Config{MaxConns: 4, BodyTimeout: shortTimeout, IdleTimeout: longTimeout}, h)

	t.Run("trickle", func(t *testing.T) {
		c := dial(t, l.Addr())
		if _, err := io.WriteString(c.conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 8\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for range 8 { // 8 x timeout/3: longer than the timeout, never idle that long
			time.Sleep(shortTimeout / 3)
			if _, err := io.WriteString(c.conn, "b"); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-readErr; err != nil {
			t.Fatalf("trickled body: %v", err)
		}
		resp, body, err := c.read()
		if err != nil || resp.StatusCode != http.StatusOK || body != "8" {
			t.Fatalf("reply %v %q %v, want 200 \"8\"", resp, body, err)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		c := dial(t, l.Addr())
		if _, err := io.WriteString(c.conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 8\r\n\r\nbbb"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-readErr:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("stalled body read ended with %v, want a deadline error", err)
			}
		case <-time.After(ioTimeout):
			t.Fatal("the handler still waits for a body that stopped")
		}
		resp, _, err := c.read()
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("reply %v %v, want 408", resp, err)
		}
		c.waitEOF(ioTimeout)
		eventually(t, "the body-timeout close to be counted", func() bool { return l.Stats().ClosedBodyTimeout == 1 })
	})
}

// Once the body has been read whole, its deadline is lifted: a handler
// that then works longer than BodyTimeout keeps its context (net/http
// watches the connection with a background read that must not inherit
// the deadline) and its connection.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	var canceled atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(3 * shortTimeout):
		case <-r.Context().Done():
			canceled.Store(true)
		}
		_, _ = io.WriteString(w, "ok")
	})
	l := startServer(t, Config{MaxConns: 4, BodyTimeout: shortTimeout, IdleTimeout: longTimeout}, h)
	c := dial(t, l.Addr())
	for range 2 { // the second request reuses the connection
		if _, err := io.WriteString(c.conn, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc"); err != nil {
			t.Fatal(err)
		}
		resp, body, err := c.read()
		if err != nil || resp.StatusCode != http.StatusOK || body != "ok" {
			t.Fatalf("reply %v %q %v, want 200 ok", resp, body, err)
		}
	}
	if canceled.Load() {
		t.Error("the request's context was canceled after its body was read")
	}
	if s := l.Stats(); s.ClosedBodyTimeout != 0 || s.Accepted != 1 {
		t.Errorf("body timeouts %d, accepted %d; want 0 and 1 (one kept-alive connection)", s.ClosedBodyTimeout, s.Accepted)
	}
}

// Negative timeouts turn the wrapper off: ConfigureServer leaves the
// handler as it was.
func TestNegativeTimeoutsLeaveTheHandlerAlone(t *testing.T) {
	l, err := New(nil, Config{MaxConns: 4, SendTimeout: -1, BodyTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := http.NewServeMux()
	srv := &http.Server{Handler: h}
	l.ConfigureServer(srv)
	if srv.Handler != http.Handler(h) {
		t.Errorf("handler wrapped although both timeouts are off")
	}
}

// An over-limit client that speaks cleartext HTTP/2 with prior knowledge
// gets a GOAWAY it can report, naming the refusal, rather than an
// HTTP/1.1 503 that it would read as a protocol error.
func TestOverLimitH2CClientGetsGoAway(t *testing.T) {
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", Config{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
	l.ConfigureServer(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	hold := dial(t, l.Addr())
	hold.mustGet("/")

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	_ = fr.WriteSettings()
	var goaway *http2.GoAwayFrame
	for goaway == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the refusal: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			goaway = g
		}
	}
	if goaway.ErrCode != http2.ErrCodeEnhanceYourCalm || goaway.LastStreamID != 0 || !strings.Contains(string(goaway.DebugData()), `"reason":"max_conns"`) {
		t.Errorf("GOAWAY %v last stream %d debug %q; want ENHANCE_YOUR_CALM, 0 and the busy JSON", goaway.ErrCode, goaway.LastStreamID, goaway.DebugData())
	}
	if n := l.Stats().Rejected[ReasonMaxConns]; n != 1 {
		t.Errorf("rejected %d, want 1", n)
	}
}

// A hijacked connection (a WebSocket upgrade) leaves the request's
// deadlines behind: it may stay quiet for longer than SendTimeout and
// BodyTimeout and still be written and read.
func TestHijackedConnectionHasNoDeadlines(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker) // as WebSocket libraries ask
		if !ok {
			t.Error("the deadline wrapper hides http.Hijacker")
			return
		}
		c, brw, err := hj.Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		time.Sleep(3 * shortTimeout) // quiet for longer than both timeouts
		line, err := brw.ReadString('\n')
		if err != nil {
			t.Errorf("reading after the quiet period: %v", err)
			return
		}
		if _, err := io.WriteString(c, "echo "+line); err != nil {
			t.Errorf("writing after the quiet period: %v", err)
		}
	})
	l := startServer(t, Config{MaxConns: 4, SendTimeout: shortTimeout, BodyTimeout: shortTimeout, IdleTimeout: longTimeout}, h)
	c := dial(t, l.Addr())
	if _, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	status, err := c.br.ReadString('\n')
	if err != nil || !strings.Contains(status, "101") {
		t.Fatalf("upgrade: %q %v", status, err)
	}
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	time.Sleep(4 * shortTimeout)
	if _, err := io.WriteString(c.conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.br.ReadString('\n'); err != nil || got != "echo ping\n" {
		t.Fatalf("after the quiet period: %q %v", got, err)
	}
	if s := l.Stats(); s.ClosedSendTimeout != 0 || s.ClosedBodyTimeout != 0 {
		t.Errorf("timeouts counted on a hijacked connection: %+v", s)
	}
}

// countingWriter counts the write deadlines set through it.
type countingWriter struct {
	http.ResponseWriter
	deadlines int
}

func (c *countingWriter) SetWriteDeadline(time.Time) error { c.deadlines++; return nil }

// A small answer sets its send deadline once, not once per write: the
// renewals within a hundredth of the timeout are skipped.
func TestSendDeadlineSetOncePerSmallAnswer(t *testing.T) {
	cw := &countingWriter{ResponseWriter: httptest.NewRecorder()}
	d := &deadlineWriter{ResponseWriter: cw, rc: http.NewResponseController(cw), timeout: time.Minute}
	d.renew()
	for range 3 {
		if _, err := d.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	d.renew()
	if cw.deadlines != 1 {
		t.Errorf("%d write deadlines set for one small answer, want 1", cw.deadlines)
	}
	d.set = d.set.Add(-time.Second) // as if a second had passed since
	d.renew()
	if cw.deadlines != 2 {
		t.Errorf("a renewal a second later was skipped (%d deadlines)", cw.deadlines)
	}
}
