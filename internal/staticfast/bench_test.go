package staticfast

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/static"
)

// serveBench serves h on the named front end and returns its address.
func serveBench(b *testing.B, front string, h *static.Handler) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var stop func()
	switch front {
	case "engine":
		s := engine.New(engine.Config{Handler: h, Fast: New(h, Config{DeadlineHeader: "Request-Timeout"})})
		go s.Serve(l)
		stop = func() { s.Close() }
	case "bridge": // the engine without the fast path: every request through its net/http bridge
		s := engine.New(engine.Config{Handler: h})
		go s.Serve(l)
		stop = func() { s.Close() }
	case "net/http":
		s := &http.Server{Handler: h}
		go s.Serve(l)
		stop = func() { s.Close() }
	}
	b.Cleanup(stop)
	return l.Addr().String()
}

// roundTrips sends the request b.N times on one keep-alive connection
// and reads each answer (its head, and want body bytes after it).
func roundTrips(b *testing.B, addr, req string, status string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	reqb := []byte(req)
	read := func() {
		n := 0
		for {
			m, err := c.Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += m
			if i := bytes.Index(buf[:n], []byte("\r\n\r\n")); i >= 0 {
				head := buf[:i]
				cl := 0
				if j := bytes.Index(head, []byte("Content-Length: ")); j >= 0 {
					k := bytes.IndexByte(head[j:], '\r')
					cl, _ = strconv.Atoi(string(head[j+16 : j+k]))
				}
				if !bytes.HasPrefix(buf, []byte(status)) {
					b.Fatalf("answer %q", buf[:min(n, 80)])
				}
				for n < i+4+cl {
					m, err := c.Read(buf[n:])
					if err != nil {
						b.Fatal(err)
					}
					n += m
				}
				return
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(reqb); err != nil {
			b.Fatal(err)
		}
		read()
	}
}

// The cost of a cache hit and of a disk-gate refusal through each front
// end, over a loopback keep-alive connection (client and server in one
// process: allocs/op are the server's, the client allocates nothing).
func BenchmarkServe(b *testing.B) {
	page := bytes.Repeat([]byte("x"), 1100)
	for _, front := range []string{"engine", "bridge", "net/http"} {
		b.Run("hit/"+front, func(b *testing.B) {
			h, err := static.New(static.Config{FS: fstest.MapFS{"page.html": {Data: page, ModTime: time.Unix(1e9, 0)}}})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			roundTrips(b, serveBench(b, front, h), "GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200")
		})
		b.Run("refusal/"+front, func(b *testing.B) {
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "cold.html"), page, 0o644); err != nil {
				b.Fatal(err)
			}
			h, err := static.New(static.Config{Root: dir, WorkLimit: 1, CacheBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			p, err := h.Gate().Acquire(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Done(admit.OutcomeOK)
			roundTrips(b, serveBench(b, front, h), "GET /cold.html HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 503")
		})
	}
}
