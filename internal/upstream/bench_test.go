package upstream

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// cannedUpstream answers every request head it reads (bodies of the
// benchmark's size skipped) with the same small response, so that a
// benchmark measures the client, not a server.
func cannedUpstream(b *testing.B, bodyLen int) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\nContent-Length: 13\r\n\r\nhello, world\n")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				have := 0
				for {
					n, err := c.Read(buf[have:])
					if err != nil {
						return
					}
					have += n
					for {
						i := bytes.Index(buf[:have], []byte("\r\n\r\n"))
						if i < 0 || have < i+4+bodyLen {
							break
						}
						end := i + 4 + bodyLen
						copy(buf, buf[end:have])
						have -= end
						if _, err := c.Write(resp); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	b.Cleanup(func() { l.Close() })
	return "http://" + l.Addr().String() + "/bench/path?q=1"
}

func benchRoundTrip(b *testing.B, rt http.RoundTripper, method string, bodyLen int) {
	u := cannedUpstream(b, bodyLen)
	body := strings.Repeat("b", bodyLen)
	hdr := http.Header{"Accept": {"*/*"}, "User-Agent": {"bench"}, "X-Forwarded-For": {"10.0.0.1"}, "X-Request-Id": {"abc"}}
	b.ReportAllocs()
	for b.Loop() {
		var r io.Reader
		if bodyLen > 0 {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, u, r)
		req.Header = hdr
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// One small GET and one POST of 1 KiB, through this client and through
// net/http's Transport (compression off, as this client has it), to the
// same canned upstream on loopback.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name    string
		method  string
		bodyLen int
	}{{"GET", "GET", 0}, {"POST1KiB", "POST", 1 << 10}} {
		b.Run(tc.name+"/upstream", func(b *testing.B) {
			c := New(Config{})
			defer c.Close()
			benchRoundTrip(b, c, tc.method, tc.bodyLen)
		})
		b.Run(tc.name+"/nethttp", func(b *testing.B) {
			t := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128}
			defer t.CloseIdleConnections()
			benchRoundTrip(b, t, tc.method, tc.bodyLen)
		})
	}
}
