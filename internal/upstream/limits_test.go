package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A request's own Limits, beside the Config's, on a synthetic clock:
// the sooner bound wins, the header bound counts the dial, and a body's
// idle bound counts only the waits for its bytes.
func TestLimits(t *testing.T) {
	synctestRun(t, func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), serve func(func(net.Conn))) {
		serve(func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				switch req.URL.Path {
				case "/ok":
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					continue
				case "/body":
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
				case "/pieces": // three writes: on a pipe, each waits for its read
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n")
					io.WriteString(c, "abc")
					io.WriteString(c, "def")
					continue
				}
				io.Copy(io.Discard, c) // silent until the client gives up and closes
				return
			}
		})
		c := New(Config{Dial: dial, HeaderTimeout: 10 * time.Second})
		defer c.Close()
		took := func(path string, lim Limits) (time.Duration, error) {
			t.Helper()
			start := time.Now()
			req, _ := http.NewRequest("GET", "http://up"+path, nil)
			resp, err := c.RoundTripLimits(req, lim)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			return time.Since(start), err
		}
		for _, tc := range []struct {
			name       string
			lim        Limits
			deadlineIn time.Duration // from the start: Limits.HeaderDeadline
			want       time.Duration
		}{
			{"the request's timeout, sooner", Limits{HeaderTimeout: 2 * time.Second}, 0, 2 * time.Second},
			{"the request's deadline, sooner", Limits{HeaderTimeout: 5 * time.Second}, time.Second, time.Second},
			{"the client's, sooner", Limits{HeaderTimeout: time.Hour}, 0, 10 * time.Second},
		} {
			if tc.deadlineIn > 0 {
				tc.lim.HeaderDeadline = time.Now().Add(tc.deadlineIn)
			}
			if d, err := took("/head", tc.lim); !errors.Is(err, ErrHeaderTimeout) || d != tc.want {
				t.Errorf("%s: %v after %v, want ErrHeaderTimeout after %v", tc.name, err, d, tc.want)
			}
		}

		// A long header bound first, then a short idle one: the head's
		// deadline, left on the socket, must not stand for the body's.
		if d, err := took("/body", Limits{HeaderTimeout: time.Hour, BodyIdleTimeout: 3 * time.Second}); !errors.Is(err, ErrBodyIdle) || d != 3*time.Second {
			t.Errorf("stalled body: %v after %v, want ErrBodyIdle after 3s", err, d)
		}
		// A long bound on one exchange, a short one on the next on the
		// same connection: the short one holds.
		if _, err := took("/ok", Limits{HeaderTimeout: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if d, err := took("/head", Limits{HeaderTimeout: time.Second}); !errors.Is(err, ErrHeaderTimeout) || d != time.Second {
			t.Errorf("after a long bound: %v after %v, want ErrHeaderTimeout after 1s", err, d)
		}

		// A caller slower than the idle bound between its reads is not
		// the upstream stalling.
		req, _ := http.NewRequest("GET", "http://up/pieces", nil)
		resp, err := c.RoundTripLimits(req, Limits{BodyIdleTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		rest, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(buf)+string(rest) != "abcdef" {
			t.Errorf("slow caller: %q%q, %v; want abcdef", buf, rest, err)
		}

		// The header bound counts a dial that hangs.
		hang := New(Config{DialTimeout: 10 * time.Second, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}})
		defer hang.Close()
		start := time.Now()
		req, _ = http.NewRequest("GET", "http://up/", nil)
		if _, err := hang.RoundTripLimits(req, Limits{HeaderTimeout: 2 * time.Second}); !errors.Is(err, ErrHeaderTimeout) || time.Since(start) != 2*time.Second {
			t.Errorf("hung dial: %v after %v, want ErrHeaderTimeout after 2s", err, time.Since(start))
		}
	})
}

// A head's deadline left on a pooled connection's socket (the next
// exchange moves it) does not make the connection look closed when it
// is looked at before a request with a body.
func TestDeadlineLeftOnPooledConnection(t *testing.T) {
	s, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	c := newClient(t, Config{})
	send := func(method string, body io.Reader) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL, body)
		resp, err := c.RoundTripLimits(req, Limits{HeaderTimeout: 20 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("GET", nil)
	time.Sleep(60 * time.Millisecond) // past the GET's header deadline
	send("POST", strings.NewReader("some body"))
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one pooled", n)
	}
}

// watchCtx is a CancelWatcher: the client watches it through one
// function instead of context.AfterFunc.
type watchCtx struct {
	context.Context
	cancelCtx context.CancelFunc
	mu        sync.Mutex
	f         func()
	watches   atomic.Int32
}

func newWatchCtx() *watchCtx {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchCtx{Context: ctx, cancelCtx: cancel}
}

func (w *watchCtx) WatchCancel(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		return false
	}
	w.watches.Add(1)
	if w.Err() != nil {
		go f()
		return true
	}
	w.f = f
	return true
}

func (w *watchCtx) StopWatch() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := w.f != nil
	w.f = nil
	return ok
}

func (w *watchCtx) cancel() {
	w.cancelCtx()
	w.mu.Lock()
	f := w.f
	w.f = nil
	w.mu.Unlock()
	if f != nil {
		f()
	}
}

// A CancelWatcher's end ends the exchange, and once the exchange is over
// the watch is gone: a later end does not close the connection, which
// has gone back to the pool.
func TestCancelWatcher(t *testing.T) {
	synctestRun(t, func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), serve func(func(net.Conn))) {
		serve(func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path == "/silent" {
					io.Copy(io.Discard, c)
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		})
		var dials atomic.Int32
		c := New(Config{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}})
		defer c.Close()
		get := func(ctx *watchCtx, path string) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://up"+path, nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				return err
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			return err
		}
		first := newWatchCtx()
		if err := get(first, "/"); err != nil {
			t.Fatal(err)
		}
		first.cancel() // after the exchange: nothing to end
		if err := get(newWatchCtx(), "/"); err != nil {
			t.Fatal(err)
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("%d connections dialed, want 1: a finished exchange's watch closed the pooled one", n)
		}
		if first.watches.Load() != 1 {
			t.Errorf("the context was watched %d times, want once", first.watches.Load())
		}

		w := newWatchCtx()
		start := time.Now()
		go func() { time.Sleep(time.Second); w.cancel() }()
		if err := get(w, "/silent"); !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Errorf("ended while waiting: %v after %v, want context.Canceled after 1s", err, time.Since(start))
		}
	})
}
