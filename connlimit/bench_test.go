//go:build unix

package connlimit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkConnection measures one whole connection as a client sees it
// over loopback: dial, send a request with Connection: close, read the
// answer to EOF, close. Client and server share the process (and the
// machine's cores), so the figures compare paths rather than give a
// server's capacity:
//
//   - plain:    net/http on a bare net.Listener, answering 200;
//   - served:   the same server on a connlimit.Listener with room;
//   - refused:  the same server on a connlimit.Listener whose only slot is
//     held, answering the busy 503 without net/http (the default polite
//     refusal: wait for the request, reply, FIN, wait for the close);
//   - refused_fast: the same with RefuseLinger < 0 (reply and close on
//     the accept path).
//
// cpu-ns/op is the process's user+system CPU time per connection
// (getrusage), the cost that matters when refusals arrive in a flood.
func BenchmarkConnection(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	b.Run("plain", func(b *testing.B) {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		serve(b, inner, handler)
		benchConnections(b, inner.Addr(), http.StatusOK, false)
	})
	b.Run("served", func(b *testing.B) {
		l := startServer(b, Config{MaxConns: 4096}, handler)
		benchConnections(b, l.Addr(), http.StatusOK, false)
		if s := l.Stats(); s.Rejected[ReasonMaxConns] != 0 {
			b.Fatalf("%d connections refused on the served path", s.Rejected[ReasonMaxConns])
		}
	})
	for _, mode := range []struct {
		name   string
		linger time.Duration
	}{{"refused", 0}, {"refused_fast", -1}} {
		linger := mode.linger
		b.Run(mode.name, func(b *testing.B) {
			l := startServer(b, Config{MaxConns: 1, RefuseLinger: linger}, handler)
			dial(b, l.Addr()).mustGet("/") // holds the only slot
			benchConnections(b, l.Addr(), http.StatusServiceUnavailable, linger < 0)
			if s := l.Stats(); s.Accepted != 1 {
				b.Fatalf("accepted %d, want only the held connection", s.Accepted)
			}
		})
	}
}

func serve(b *testing.B, l net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close(); <-done })
}

// benchConnections runs the client loop. With allowReset, a reset after
// the whole reply is counted (resets/op) instead of failing: the
// refused_fast path closes with the request unread, which resets.
func benchConnections(b *testing.B, addr net.Addr, wantStatus int, allowReset bool) {
	b.Helper()
	req := []byte("GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
	want := []byte("HTTP/1.1 " + strconv.Itoa(wantStatus) + " ")
	buf := make([]byte, 4096)
	resets := 0
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
		n, err := io.ReadFull(c, buf[:len(want)])
		if err != nil || string(buf[:n]) != string(want) {
			b.Fatalf("answer %q, %v; want %q", buf[:n], err, want)
		}
		for err == nil {
			_, err = c.Read(buf)
		}
		switch {
		case err == io.EOF:
		case errors.Is(err, syscall.ECONNRESET) && allowReset:
			resets++
		default:
			b.Fatalf("reading to EOF: %v", err)
		}
		_ = c.Close()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) +
		syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if allowReset {
		b.ReportMetric(float64(resets)/float64(b.N), "resets/op")
	}
}

// BenchmarkKeepAliveRequest measures one request on a kept-alive
// connection over loopback, with the send and body timeouts off and on
// (their default, 60 s): the per-request cost of the deadline wrapper
// (a ResponseController, a write deadline set before the handler, before
// each write and after it). The handler writes 2 bytes, so the figure is
// the wrapper's share of the cheapest request.
func BenchmarkKeepAliveRequest(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	for _, mode := range []struct {
		name    string
		timeout time.Duration
	}{{"timeouts_off", -1}, {"timeouts_on", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			l := startServer(b, Config{MaxConns: 16, SendTimeout: mode.timeout, BodyTimeout: mode.timeout}, handler)
			c := dial(b, l.Addr())
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ReportAllocs()
			for b.Loop() {
				c.mustGet("/")
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) +
				syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime)
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
