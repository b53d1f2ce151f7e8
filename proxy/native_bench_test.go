package proxy

import (
	"bytes"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/upstream/upstreamtest"
)

// BenchmarkForwardOnEngine is one admitted GET through sluice's engine
// over real loopback sockets, client to proxy to a canned upstream and
// back, forwarded natively or through the net/http bridge. The
// allocations counted are the whole process's: the raw client and the
// canned upstream allocate nothing per request, so they are the
// proxy's (engine, gates, retry transport, pool, upstream client).
func BenchmarkForwardOnEngine(b *testing.B) {
	for _, bc := range []struct {
		name   string
		native bool
	}{{"native", true}, {"bridge", false}} {
		b.Run(bc.name, func(b *testing.B) {
			up := upstreamtest.Canned(b, 0)
			p, err := New(Config{Upstreams: []*url.URL{{Scheme: "http", Host: up}}})
			if err != nil {
				b.Fatal(err)
			}
			base, f := nativeFront(b, p, bc.native)
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte("GET /x HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench/1\r\nAccept: */*\r\n\r\n")
			end := []byte("hello, world\n")
			buf := make([]byte, 4<<10)
			roundTrip := func() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				have := 0
				for !bytes.HasSuffix(buf[:have], end) {
					n, err := c.Read(buf[have:])
					if err != nil {
						b.Fatalf("after %q: %v", buf[:have], err)
					}
					have += n
				}
				if !bytes.HasPrefix(buf, []byte("HTTP/1.1 200 ")) {
					b.Fatalf("answer %q", buf[:have])
				}
			}
			roundTrip() // the upstream connection, warm
			b.ReportAllocs()
			for b.Loop() {
				roundTrip()
			}
			b.StopTimer()
			if got := f.nativeCalls.Load() > 0; got != bc.native {
				b.Fatalf("native calls %d, want native %v", f.nativeCalls.Load(), bc.native)
			}
		})
	}
}
