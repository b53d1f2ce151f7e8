package engine

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// With FastBodies, the fast path answers a POST without reading its body:
// the engine drops the unread body and the connection carries the next
// request; a body too large to drop, or one the client waits to send
// (Expect: 100-continue), closes the connection after the answer.
func TestFastPathAnswersRequestsWithBodies(t *testing.T) {
	h := &echo{}
	_, addr := serveEngine(t, Config{Handler: h, FastBodies: true, Fast: fastFunc(func(w *Response, r *Request) bool {
		if r.Method() != "POST" {
			return false
		}
		w.Write(503, []byte("Content-Length: 4\r\n"), []byte("busy"))
		return true
	})})
	t.Run("small body dropped, connection kept", func(t *testing.T) {
		raw := rawExchange(t, addr, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		rs := readResponses(t, raw, "POST", "GET")
		if len(rs) != 2 || rs[0].StatusCode != 503 || rs[0].Close || rs[1].StatusCode != 200 {
			t.Fatalf("want 503 kept, then 200: %q", raw)
		}
		if !h.saw("/next") || h.saw("hello") {
			t.Fatalf("the handler saw %v", h.seen)
		}
	})
	t.Run("chunked body dropped", func(t *testing.T) {
		raw := rawExchange(t, addr, "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /next2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		rs := readResponses(t, raw, "POST", "GET")
		if len(rs) != 2 || rs[0].StatusCode != 503 || rs[1].StatusCode != 200 || !h.saw("/next2") {
			t.Fatalf("want 503 then 200: %q", raw)
		}
	})
	t.Run("body over the drain bound closes", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
		go io.Copy(c, io.LimitReader(zeros{}, 10_000_000))
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "POST"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || !resp.Close {
			t.Fatalf("want 503 with Connection: close, got %d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("expect 100-continue closes", func(t *testing.T) {
		raw := rawExchange(t, addr, "POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		rs := readResponses(t, raw, "POST")
		if len(rs) != 1 || rs[0].StatusCode != 503 || !rs[0].Close || strings.Contains(raw, "100 Continue") {
			t.Fatalf("want a final 503 with Connection: close and no 100: %q", raw)
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Without FastBodies, a request with a body never reaches the fast path.
func TestFastPathWithoutFastBodiesSkipsBodies(t *testing.T) {
	h := &echo{}
	_, addr := serveEngine(t, Config{Handler: h, Fast: fastFunc(func(w *Response, r *Request) bool {
		w.Write(503, []byte("Content-Length: 0\r\n"), nil)
		return true
	})})
	rs := readResponses(t, rawExchange(t, addr, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"), "POST")
	if len(rs) != 1 || rs[0].StatusCode != 200 || !h.saw("/p") {
		t.Fatalf("the handler did not serve the POST: %v", rs)
	}
}

// ServeWith hands a request the fast path decided on to a handler of its
// choosing, body included, and the fast path regains control after the
// answer (to release what it holds).
func TestServeWithHandsOff(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	chosen := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		note("handler " + string(b))
		w.Header().Set("X-Chosen", "1")
		io.WriteString(w, "got "+string(b))
	})
	_, addr := serveEngine(t, Config{FastBodies: true, Fast: fastFunc(func(w *Response, r *Request) bool {
		if v := r.Get("X-Decision"); v != "" {
			note("decided " + v)
			w.ServeWith(chosen)
			note("released " + v)
			return true
		}
		return false
	})})
	raw := rawExchange(t, addr, "POST /a HTTP/1.1\r\nHost: x\r\nX-Decision: one\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	rs := readResponses(t, raw, "POST", "GET")
	if len(rs) != 2 || rs[0].StatusCode != 200 || rs[0].Header.Get("X-Chosen") != "1" || rs[1].StatusCode != 404 {
		t.Fatalf("want the chosen handler's 200, then Config.Handler's 404: %q", raw)
	}
	if b, _ := io.ReadAll(rs[0].Body); string(b) != "got abc" {
		t.Fatalf("body %q", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ",") != "decided one,handler abc,released one" {
		t.Fatalf("order %v", order)
	}
}

// A handler hijacks the connection to switch protocols: it gets the
// bytes the client sent after the request, the engine stops tracking the
// connection (ConnState StateHijacked, Shutdown does not wait for it),
// and the handler's own writes reach the client.
func TestHijack(t *testing.T) {
	states := make(chan http.ConnState, 16)
	hijacked := make(chan struct{})
	s, addr := serveEngine(t, Config{
		ConnState: func(_ net.Conn, st http.ConnState) { states <- st },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := w.Write([]byte("x")); err != http.ErrHijacked {
				t.Errorf("Write after Hijack: %v, want ErrHijacked", err)
			}
			if _, _, err := http.NewResponseController(w).Hijack(); err != http.ErrHijacked {
				t.Errorf("second Hijack: %v", err)
			}
			close(hijacked)
			go func() {
				defer conn.Close()
				io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
				line, _ := brw.ReadString('\n')
				io.WriteString(conn, "echo: "+line)
			}()
		}),
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// The line after the head arrives with it: the engine has read it
	// and must hand it over.
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nping\n")
	<-hijacked
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown waited for a hijacked connection: %v", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("%v %v", resp, err)
	}
	line, _ := br.ReadString('\n')
	if line != "echo: ping\n" {
		t.Fatalf("after the upgrade: %q", line)
	}
	var seen []http.ConnState
	for len(states) > 0 {
		seen = append(seen, <-states)
	}
	if len(seen) == 0 || seen[len(seen)-1] != http.StateHijacked {
		t.Fatalf("states %v, want the last StateHijacked", seen)
	}
}

// Answer trailers: a chunked answer carries the values of the names its
// Trailer field declares and of fields named with http.TrailerPrefix, as
// net/http sends them; an answer that declares trailers is chunked even
// when it is short.
func TestAnswerTrailers(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "short")
		w.Header().Set("X-Sum", "42")
		w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
		w.Header().Set(http.TrailerPrefix+"Content-Length", "9") // never a trailer
	})
	_, eaddr := serveEngine(t, Config{Handler: h})
	naddr := netServer(t, h)
	for _, addr := range []string{eaddr, naddr} {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// net/http sends even a framing field as a trailer; the engine
		// leaves it out.
		if string(b) != "short" || resp.ContentLength != -1 || resp.Trailer.Get("X-Sum") != "42" || resp.Trailer.Get("X-Late") != "yes" || addr == eaddr && resp.Trailer.Get("Content-Length") != "" {
			t.Errorf("%s: body %q, length %d, trailer %v", addr, b, resp.ContentLength, resp.Trailer)
		}
	}
}

// Request trailers reach the handler in Request.Trailer once the body has
// been read, as net/http delivers them; framing fields are dropped.
func TestRequestTrailers(t *testing.T) {
	got := make(chan http.Header, 1)
	_, addr := serveEngine(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Trailer"]; ok {
			t.Error("the Trailer field stayed in Header")
		}
		if v, ok := r.Trailer["X-Sum"]; !ok || v != nil {
			t.Errorf("before the body: trailer %v", r.Trailer)
		}
		io.ReadAll(r.Body)
		got <- r.Trailer.Clone()
	})})
	rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"+
		"3\r\nabc\r\n0\r\nX-Sum: 9\r\nContent-Length: 99\r\nX-Extra: e\r\n\r\n")
	tr := <-got
	if tr.Get("X-Sum") != "9" || tr.Get("X-Extra") != "e" || tr.Get("Content-Length") != "" {
		t.Fatalf("trailer %v", tr)
	}
}

// A handler that leaves a goroutine reading its body behind: once the
// handler returns, that reader gets ErrBodyReadAfterClose and never
// touches the connection again, which carries the next request.
func TestBodyReaderLeftBehind(t *testing.T) {
	leaked := make(chan error, 1)
	_, addr := serveEngine(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/leak" {
			io.WriteString(w, "next")
			return
		}
		go func() {
			buf := make([]byte, 1)
			for {
				if _, err := r.Body.Read(buf); err != nil {
					leaked <- err
					return
				}
			}
		}()
		io.WriteString(w, "left")
	})})
	raw := rawExchange(t, addr, "POST /leak HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabcdefGET /n HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	rs := readResponses(t, raw, "POST", "GET")
	if len(rs) != 2 || rs[1].StatusCode != 200 {
		t.Fatalf("%q", raw)
	}
	if b, _ := io.ReadAll(rs[1].Body); string(b) != "next" {
		t.Fatalf("second answer %q", b)
	}
	if err := <-leaked; err != io.EOF && err != http.ErrBodyReadAfterClose {
		t.Fatalf("the reader left behind got %v", err)
	}
}

// A write that fails (here: the send timeout, on a client that stopped
// reading) cancels the request's context, as net/http does, so a handler
// streaming to that client learns it is gone.
func TestWriteErrorCancelsTheRequest(t *testing.T) {
	canceled := make(chan error, 1)
	_, addr := serveEngine(t, Config{SendTimeout: 100 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		canceled <- r.Context().Err()
	})})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	if err := <-canceled; err == nil {
		t.Fatal("the handler's context outlived a failed write")
	}
}
