package engine

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// pipeConn serves one connection of s over net.Pipe (inside a synctest
// bubble: its deadlines run on the bubble's clock) and returns the
// client's end.
func pipeConn(s *Server) net.Conn {
	client, server := net.Pipe()
	c := newConn(s, server)
	s.trackConn(c, true)
	c.setState(http.StateNew)
	go c.serve()
	return client
}

// The header timeout holds for every request of a keep-alive
// connection, also without an idle timeout; the idle timeout closes a
// connection that sends nothing more.
func TestTimeoutsOnKeepAlive(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	for _, c := range []struct {
		name       string
		cfg        Config
		second     string        // what the client sends after its first answer
		wantClosed time.Duration // when the server closes, after the second write
	}{
		{"header timeout, no idle timeout", Config{Handler: ok, ReadHeaderTimeout: time.Second}, "GET /b HTTP/1.1\r\nHo", time.Second},
		{"idle timeout", Config{Handler: ok, ReadHeaderTimeout: time.Second, IdleTimeout: 3 * time.Second}, "", 3 * time.Second},
		{"idle, then a slow head", Config{Handler: ok, ReadHeaderTimeout: time.Second, IdleTimeout: 3 * time.Second}, "GET /b HTTP/1.1\r\nHo", time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(c.cfg)
				conn := pipeConn(s)
				defer conn.Close()
				br := bufio.NewReader(conn)
				go io.WriteString(conn, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				if c.second != "" {
					if _, err := io.WriteString(conn, c.second); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("read after the timeout: %v, want EOF (the server closed)", err)
				}
				if got := time.Since(start); got != c.wantClosed {
					t.Errorf("closed after %v, want %v", got, c.wantClosed)
				}
			})
		})
	}
}
