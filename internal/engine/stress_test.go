package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Clients pipeline requests on many connections, through the fast path
// and the bridge, while the server shuts down. Sampled invariants: every
// answer a client reads is whole and answers its own request, in order;
// a connection ends only between answers; no request is answered twice;
// after Shutdown returns, every connection is closed and Serve has
// returned.
func TestShutdownWhilePipelining(t *testing.T) {
	var handled atomic.Int64
	fast := fastFunc(func(w *Response, r *Request) bool {
		p, _ := r.Path()
		if !strings.HasPrefix(p, "/fast/") {
			return false
		}
		handled.Add(1)
		w.Write(200, []byte("Content-Length: "+fmt.Sprint(len(p))+"\r\n"), []byte(p))
		return true
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		io.WriteString(w, r.URL.Path)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Handler: h, Fast: fast, IdleTimeout: time.Minute, ReadHeaderTimeout: time.Minute})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()

	const clients, perClient = 16, 40
	var answered atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				return // the listener may already be closed
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			go func() {
				for i := range perClient {
					kind := "fast"
					if i%3 == 0 {
						kind = "net"
					}
					if _, err := fmt.Fprintf(conn, "GET /%s/%d/%d HTTP/1.1\r\nHost: x\r\n\r\n", kind, c, i); err != nil {
						return
					}
				}
			}()
			br := bufio.NewReader(conn)
			for i := range perClient {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return // closed between answers: fine during shutdown
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Errorf("client %d: answer %d cut short: %v", c, i, err)
					return
				}
				kind := "fast"
				if i%3 == 0 {
					kind = "net"
				}
				if want := fmt.Sprintf("/%s/%d/%d", kind, c, i); string(b) != want {
					t.Errorf("client %d: answer %d is %q, want %q", c, i, b, want)
					return
				}
				answered.Add(1)
				if resp.Close {
					return
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}
	wg.Wait()
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	if open != 0 {
		t.Errorf("%d connections still tracked after Shutdown", open)
	}
	if a, h := answered.Load(), handled.Load(); a > h {
		t.Errorf("%d answers read for %d requests handled", a, h)
	}
	t.Logf("%d requests handled, %d answers read before the shutdown closed the connections", handled.Load(), answered.Load())
}

// fastFunc is a FastHandler from a function.
type fastFunc func(w *Response, r *Request) bool

func (f fastFunc) ServeFast(w *Response, r *Request) bool { return f(w, r) }
