// Package upstreamtest holds the canned upstream that the upstream
// client's benchmarks, in this module and in bench/, measure against.
package upstreamtest

import (
	"bytes"
	"net"
	"testing"
)

// Canned starts a server on a loopback port that answers every request
// head it reads (and the bodyLen bytes of body after it) with the same
// small 200, so that a benchmark measures the client, not a server. It
// returns the server's host:port; the listener closes with tb's cleanup.
func Canned(tb testing.TB, bodyLen int) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\nContent-Length: 13\r\n\r\nhello, world\n")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go answer(c, resp, bodyLen)
		}
	}()
	tb.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

func answer(c net.Conn, resp []byte, bodyLen int) {
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
}
