package connlimit

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/netutil"
)

// The contrast the package exists for: over the limit, netutil's
// LimitListener stops calling Accept, so the next client waits in the
// backlog with no answer; connlimit answers it at once.
func TestOverLimitIsAnsweredUnlikeLimitListener(t *testing.T) {
	const unanswered = 300 * time.Millisecond

	t.Run("netutil.LimitListener leaves the client waiting", func(t *testing.T) {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.NotFoundHandler()}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(netutil.LimitListener(inner, 1)) }()
		defer func() { _ = srv.Close(); <-done }()

		held := dial(t, inner.Addr())
		if resp, _, err := held.get("/"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("first client: %v %v", resp, err)
		}
		waiting := dial(t, inner.Addr()) // the handshake completes in the backlog
		if _, err := waiting.conn.Write([]byte("GET / HTTP/1.1\r\nHost: t\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = waiting.conn.SetReadDeadline(time.Now().Add(unanswered))
		_, err = waiting.br.ReadByte()
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("over-limit client read %v, want no answer within %v", err, unanswered)
		}
		// Freeing the slot lets it through: it was queued, not refused.
		_ = held.conn.Close()
		if resp, _, err := waiting.read(); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("queued client after the slot freed: %v %v", resp, err)
		}
	})

	t.Run("connlimit answers at once", func(t *testing.T) {
		l := startServer(t, Config{MaxConns: 1}, http.NotFoundHandler())
		held := dial(t, l.Addr())
		if resp, _, err := held.get("/"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("first client: %v %v", resp, err)
		}
		start := time.Now()
		resp, body, err := dial(t, l.Addr()).get("/")
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		checkBusyReply(t, resp, body)
		if took >= unanswered {
			t.Errorf("busy reply took %v, want well under %v", took, unanswered)
		}
		t.Logf("busy reply after %v", took)
	})
}
