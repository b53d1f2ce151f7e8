package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/hfield"
)

// TestStreamWritesWhatTheBridgeWrites: the same handler code, run
// through the bridge (ServeWith) and through a Stream, puts the same
// bytes on the wire (but Date): the framing (Content-Length within
// 2 KiB, else chunked), trailers, HEAD, the no-body statuses, a header
// with its own Date, Connection: close.
func TestStreamWritesWhatTheBridgeWrites(t *testing.T) {
	big := strings.Repeat("x", 5000)
	answers := map[string]func(w http.ResponseWriter){
		"/small": func(w http.ResponseWriter) {
			w.Header().Set("X-B", "2")
			w.Header().Add("X-A", "1")
			_, _ = w.Write([]byte("hello"))
		},
		"/sniff": func(w http.ResponseWriter) { _, _ = w.Write([]byte("<html>hi</html>")) },
		"/big":   func(w http.ResponseWriter) { _, _ = w.Write([]byte(big)) },
		"/flushed": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("later"))
		},
		"/trailers": func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "X-Sum")
			_, _ = w.Write([]byte("body"))
			w.Header().Set("X-Sum", "7")
			w.Header().Set(http.TrailerPrefix+"X-Late", "1")
		},
		"/length": func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "3")
			_, _ = w.Write([]byte("abc"))
		},
		"/204": func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusNoContent)
		},
		"/304": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotModified)
		},
		"/date": func(w http.ResponseWriter) { w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT") },
	}
	run := func(mode string) string {
		_, addr := serveEngine(t, Config{Fast: fastFunc(func(w *Response, r *Request) bool {
			path, _ := r.Path()
			h := answers[path]
			switch mode {
			case "stream":
				st := w.Stream(nil)
				h(st)
				w.End()
				return true
			case "list":
				// The handler's fields, set before the head, as a
				// list in name order (the order a map's go out in).
				var l hfield.List
				lw := &listWriter{st: w.StreamList(&l), l: &l, h: make(http.Header)}
				h(lw)
				lw.move() // a handler that wrote nothing: its fields still count
				w.End()
				return true
			}
			w.ServeWith(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { h(w) }))
			return true
		})})
		var b strings.Builder
		for _, path := range []string{"/small", "/sniff", "/big", "/flushed", "/trailers", "/length", "/204", "/304", "/date"} {
			for _, m := range []string{"GET", "HEAD"} {
				b.WriteString(rawExchange(t, addr, m+" "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"+m+" "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
			}
		}
		return streamDateLine.ReplaceAllString(b.String(), "Date: (set)\r\n")
	}
	bridge, stream, list := run("bridge"), run("stream"), run("list")
	if bridge != stream {
		t.Errorf("the Stream wrote other bytes than the bridge:\nbridge %q\nstream %q", bridge, stream)
	}
	if bridge != list {
		t.Errorf("the Stream with a list wrote other bytes than the bridge:\nbridge %q\nlist   %q", bridge, list)
	}
}

// listWriter runs a handler on a Stream begun with StreamList: what it
// sets in its Header before the head goes into the list, in name order;
// after the head (trailers) its Header is the Stream's.
type listWriter struct {
	st    *Stream
	l     *hfield.List
	h     http.Header
	moved bool
}

func (lw *listWriter) Header() http.Header {
	if lw.moved {
		return lw.st.Header()
	}
	return lw.h
}

func (lw *listWriter) move() {
	if lw.moved {
		return
	}
	lw.moved = true
	for _, k := range slices.Sorted(maps.Keys(lw.h)) {
		for _, v := range lw.h[k] {
			lw.l.Add(k, v)
		}
	}
}

func (lw *listWriter) WriteHeader(code int) { lw.move(); lw.st.WriteHeader(code) }

func (lw *listWriter) Write(p []byte) (int, error) { lw.move(); return lw.st.Write(p) }

func (lw *listWriter) Flush() { lw.move(); lw.st.Flush() }

// TestStreamListKeepsTheOrder: a Stream begun with a list sends its
// fields in the list's order, then those set through Header, then what
// the engine adds; the head rules apply to the list's fields (a 204's
// Content-Length dropped, a Date kept, an invalid Content-Length
// dropped, Connection: close honoured).
func TestStreamListKeepsTheOrder(t *testing.T) {
	type field struct{ name, value string }
	cases := map[string]struct {
		fields []field
		status int
		body   string
		extra  string // set through Header
		want   string // the head after the status line
		closes bool
	}{
		"/order": {[]field{{"X-B", "2"}, {"X-A", "1"}, {"Content-Type", "text/plain"}, {"X-A", "0"}}, 200, "hello", "X-Map",
			"X-B: 2\r\nX-A: 1\r\nContent-Type: text/plain\r\nX-A: 0\r\nX-Map: m\r\nContent-Length: 5\r\nDate: (set)\r\n", false},
		"/declared": {[]field{{"Content-Length", "2"}, {"Date", "Mon, 02 Jan 2006 15:04:05 GMT"}, {"Content-Type", "text/plain"}}, 200, "ok", "",
			"Content-Length: 2\r\nDate: (set)\r\nContent-Type: text/plain\r\n", false}, // one Date: the list's
		"/204": {[]field{{"Content-Length", "7"}, {"X-A", "1"}}, 204, "", "",
			"X-A: 1\r\nDate: (set)\r\n", false},
		"/bad-length": {[]field{{"Content-Length", "x"}, {"Content-Type", "text/plain"}}, 200, "ok", "",
			"Content-Type: text/plain\r\nContent-Length: 2\r\nDate: (set)\r\n", false},
		"/close": {[]field{{"Connection", "close"}, {"Content-Type", "text/plain"}}, 200, "ok", "",
			"Connection: close\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nDate: (set)\r\n", true},
	}
	_, addr := serveEngine(t, Config{Fast: fastFunc(func(w *Response, r *Request) bool {
		path, _ := r.Path()
		tc := cases[path]
		l := new(hfield.List)
		for _, f := range tc.fields {
			l.Add(f.name, f.value)
		}
		st := w.StreamList(l)
		if tc.extra != "" {
			st.Header().Set(tc.extra, "m")
		}
		st.WriteHeader(tc.status)
		_, _ = st.Write([]byte(tc.body))
		w.End()
		return true
	})})
	for path, tc := range cases {
		t.Run(path, func(t *testing.T) {
			got := rawExchange(t, addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\nGET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			got = streamDateLine.ReplaceAllString(got, "Date: (set)\r\n")
			status := fmt.Sprintf("HTTP/1.1 %d %s\r\n", tc.status, http.StatusText(tc.status))
			one := status + tc.want + "\r\n" + tc.body
			want := one     // the connection closes after it
			if !tc.closes { // the second answer carries the client's close
				closing := status + strings.Replace(tc.want, "Date: (set)\r\n", "Connection: close\r\nDate: (set)\r\n", 1) + "\r\n" + tc.body
				if !strings.HasSuffix(tc.want, "Date: (set)\r\n") { // the engine adds no Date: the close goes last
					closing = status + tc.want + "Connection: close\r\n\r\n" + tc.body
				}
				want = one + closing
			}
			if got != want {
				t.Errorf("answers\n%q\nwant\n%q", got, want)
			}
		})
	}
}

var streamDateLine = regexp.MustCompile(`Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n`)

// TestWatchClientAfterDelay: a request answered within the delay starts
// no read; one still waiting after it sees the client leave (cancel is
// called); Abort closes the connection without the rest of the answer.
// Inside the read loop the watch reads a second descriptor of the
// socket; a byte it reads (the next pipelined request) is kept.
func TestWatchClientAfterDelay(t *testing.T) {
	t.Run("ordinary", func(t *testing.T) { watchClientAfterDelay(t, false) })
	t.Run("loop", func(t *testing.T) { watchClientAfterDelay(t, true) })
}

func watchClientAfterDelay(t *testing.T, loop bool) {
	canceled := make(chan bool, 1)
	var fast FastHandler
	handler := func(w *Response, r *Request) bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		path, _ := r.Path()
		if path == "/quick" {
			w.WatchClient(time.Hour, cancel)
			gone := w.Unwatch()
			if w.c.bg != nil || gone {
				t.Error("a quick answer started the watch's read")
			}
			st := w.Stream(nil)
			_, _ = st.Write([]byte("quick"))
			w.End()
			return true
		}
		if path == "/wait" {
			// Waits past the delay while the client sends its next
			// request: the watch reads its first byte, which stays
			// the connection's.
			w.WatchClient(time.Millisecond, cancel)
			time.Sleep(30 * time.Millisecond)
			gone := w.Unwatch()
			st := w.Stream(nil)
			fmt.Fprintf(st, "waited, gone %v", gone)
			w.End()
			return true
		}
		w.WatchClient(time.Millisecond, cancel)
		select {
		case <-ctx.Done():
			canceled <- true
		case <-time.After(5 * time.Second):
			canceled <- false
		}
		w.Unwatch()
		st := w.Stream(nil)
		st.WriteHeader(http.StatusOK)
		_, _ = st.Write([]byte("never sent"))
		w.Abort()
		return true
	}
	if loop {
		fast = loopFunc(handler)
	} else {
		fast = fastFunc(handler)
	}
	_, addr := serveEngine(t, Config{Fast: fast})
	pc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(pc)
	io.WriteString(pc, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(10 * time.Millisecond) // past the delay: the watch reads
	io.WriteString(pc, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
	for i, want := range []string{"waited, gone false", "quick"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != want {
			t.Fatalf("answer %d: %q, want %q", i, b, want)
		}
	}
	if got := rawExchange(t, addr, "GET /quick HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.HasSuffix(got, "\r\n\r\nquick") {
		t.Fatalf("quick answer %q", got)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
	time.Sleep(10 * time.Millisecond) // past the delay: the watch reads
	c.Close()
	if !<-canceled {
		t.Fatal("the watch did not see the client leave")
	}
}

// TestWatchClientAfterQuickRequests: the connection's watch timer, left
// running by requests answered within their delay (or set for a longer
// delay), still looks for the next request that waits: a client that
// leaves it is seen.
func TestWatchClientAfterQuickRequests(t *testing.T) {
	for _, loop := range []bool{false, true} {
		for _, first := range []time.Duration{time.Millisecond, time.Hour} {
			t.Run(fmt.Sprintf("loop %v, first delay %v", loop, first), func(t *testing.T) {
				watchClientAfterQuickRequests(t, loop, first)
			})
		}
	}
}

func watchClientAfterQuickRequests(t *testing.T, loop bool, first time.Duration) {
	canceled := make(chan bool, 1)
	handler := func(w *Response, r *Request) bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if path, _ := r.Path(); path == "/quick" {
			w.WatchClient(first, cancel)
			w.Unwatch()
			w.Write(200, okLines, []byte("ok"))
			return true
		}
		w.WatchClient(time.Millisecond, cancel)
		select {
		case <-ctx.Done():
			canceled <- true
		case <-time.After(2 * time.Second): // seen within 20 ms, then 250 ms
			canceled <- false
		}
		w.Unwatch()
		w.Abort()
		return true
	}
	var fast FastHandler = fastFunc(handler)
	if loop {
		fast = loopFunc(handler)
	}
	_, addr := serveEngine(t, Config{Fast: fast})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for range 3 {
		io.WriteString(c, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(10 * time.Millisecond) // the watch is under way
	c.Close()
	if !<-canceled {
		t.Fatal("the watch did not see the client leave")
	}
}

// TestWatchTimerStoppedAtClose: the watch timer left running between
// requests is stopped when the connection closes, not left to fire (up
// to its longest delay later) holding the connection.
func TestWatchTimerStoppedAtClose(t *testing.T) {
	watches := make(chan *clientWatch, 1)
	closed := make(chan struct{})
	_, addr := serveEngine(t, Config{
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				close(closed)
			}
		},
		Fast: fastFunc(func(w *Response, r *Request) bool {
			w.WatchClient(time.Hour, func() {})
			w.Unwatch()
			watches <- w.c.watch
			w.Write(200, okLines, []byte("ok"))
			return true
		}),
	})
	if got := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.HasSuffix(got, "\r\n\r\nok") {
		t.Fatalf("answer %q", got)
	}
	wt := <-watches
	<-closed
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.timer.Stop() || wt.running {
		t.Fatal("the closed connection's watch timer is still set")
	}
}

// TestLoopWritesPastTheSocketBuffer: an answer written inside the read
// loop in small pieces, far larger than the socket takes while the
// client does not read, reaches the client whole and in order: what a
// direct write leaves, the connection's own Write sends once there is
// room. The server's send buffer and the client's receive buffer are
// made small, so that writes fill them whatever the machine's defaults.
func TestLoopWritesPastTheSocketBuffer(t *testing.T) {
	const pieces, size = 1024, 1024 // 1 MiB
	piece := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i%26)), size)) }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Fast: loopFunc(func(w *Response, r *Request) bool {
		st := w.Stream(nil)
		st.Header().Set("Content-Type", "application/octet-stream")
		if path, _ := r.Path(); path != "/big" {
			_, _ = st.Write([]byte("small"))
			w.End()
			return true
		}
		for i := range pieces {
			if _, err := st.Write(piece(i)); err != nil {
				break
			}
		}
		w.End()
		return true
	})})
	done := make(chan error, 1)
	go func() { done <- s.Serve(smallSendBuffers{l.(*net.TCPListener)}) }()
	defer func() {
		s.Close()
		<-done
	}()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	// A small answer first, then the large one, on one connection.
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "small" {
		t.Fatalf("first answer %q", b)
	}
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("after %d bytes: %v", len(body), err)
	}
	if len(body) != pieces*size {
		t.Fatalf("got %d bytes, want %d", len(body), pieces*size)
	}
	for i := range pieces {
		if got := body[i*size : (i+1)*size]; string(got) != string(piece(i)) {
			t.Fatalf("piece %d differs: %q...", i, got[:16])
		}
	}
}

// smallSendBuffers is a listener whose connections have a small send
// buffer.
type smallSendBuffers struct{ *net.TCPListener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err == nil {
		_ = c.SetWriteBuffer(4096)
	}
	return c, err
}

// TestFieldValuesCannotSplitTheHead: a CR or LF in a value a handler set
// goes out as a space (as net/http writes it), through the bridge and
// through a Stream, so a value can never end its line and start a field
// or an answer of its own.
func TestFieldValuesCannotSplitTheHead(t *testing.T) {
	set := func(h http.Header) {
		h.Set("X-Evil", "a\r\nX-Injected: 1")
		h.Set("X-Lf", "b\nSet-Cookie: s=1")
	}
	_, addr := serveEngine(t, Config{Fast: fastFunc(func(w *Response, r *Request) bool {
		if path, _ := r.Path(); path == "/stream" {
			st := w.Stream(nil)
			set(st.Header())
			_, _ = st.Write([]byte("ok"))
			w.End()
			return true
		}
		w.ServeWith(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			set(w.Header())
			_, _ = w.Write([]byte("ok"))
		}))
		return true
	})})
	for _, path := range []string{"/bridge", "/stream"} {
		got := rawExchange(t, addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.Contains(got, "X-Evil: a  X-Injected: 1\r\n") || !strings.Contains(got, "X-Lf: b Set-Cookie: s=1\r\n") ||
			strings.Contains(got, "\r\nX-Injected") || strings.Contains(got, "\nSet-Cookie") {
			t.Errorf("%s: %q", path, got)
		}
	}
}
