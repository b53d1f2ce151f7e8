package connlimit

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// These tests use real sockets and net/http's own timers, so they use
// short real timeouts (tens of milliseconds); each waits at most a few.

const (
	shortTimeout = 150 * time.Millisecond
	longTimeout  = time.Minute
)

func TestIdleKeepAliveIsClosedAndCounted(t *testing.T) {
	l := startServer(t, Config{MaxConns: 4, IdleTimeout: shortTimeout, ReadHeaderTimeout: longTimeout}, nil)
	c := dial(t, l.Addr())
	c.mustGet("/")
	c.mustGet("/")
	if took := c.waitEOF(ioTimeout); took < shortTimeout/2 {
		t.Errorf("closed after %v, before the idle timeout %v", took, shortTimeout)
	}
	eventually(t, "the idle close to be counted", func() bool { return l.Stats().ClosedIdle == 1 })
	eventually(t, "the slot to be released", func() bool { return l.Stats().Open == 0 })
	if s := l.Stats(); s.ClosedHeaderTimeout != 0 {
		t.Errorf("header timeouts = %d, want 0", s.ClosedHeaderTimeout)
	}
}

func TestSlowHeadersAreClosedAndCounted(t *testing.T) {
	t.Run("first request", func(t *testing.T) {
		l := startServer(t, Config{MaxConns: 4, IdleTimeout: longTimeout, ReadHeaderTimeout: shortTimeout}, nil)
		c := dial(t, l.Addr())
		if _, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\nHost: te"); err != nil {
			t.Fatal(err)
		}
		c.waitEOF(ioTimeout)
		eventually(t, "the header timeout to be counted", func() bool { return l.Stats().ClosedHeaderTimeout == 1 })
		if s := l.Stats(); s.ClosedIdle != 0 {
			t.Errorf("idle closes = %d, want 0", s.ClosedIdle)
		}
	})
	t.Run("second request on a keep-alive connection", func(t *testing.T) {
		// The idle timeout is long, so only the header timeout can close it,
		// although net/http still reports the connection as idle.
		l := startServer(t, Config{MaxConns: 4, IdleTimeout: longTimeout, ReadHeaderTimeout: shortTimeout}, nil)
		c := dial(t, l.Addr())
		c.mustGet("/")
		if _, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		c.waitEOF(ioTimeout)
		eventually(t, "the header timeout to be counted", func() bool { return l.Stats().ClosedHeaderTimeout == 1 })
		if s := l.Stats(); s.ClosedIdle != 0 {
			t.Errorf("idle closes = %d, want 0", s.ClosedIdle)
		}
	})
}

// Closes that are not timeouts are not counted as such.
func TestOrdinaryClosesAreNotCountedAsTimeouts(t *testing.T) {
	l := startServer(t, Config{MaxConns: 8, IdleTimeout: longTimeout, ReadHeaderTimeout: longTimeout}, nil)

	// The client closes an idle keep-alive connection.
	c := dial(t, l.Addr())
	c.mustGet("/")
	_ = c.conn.Close()

	// The client asks to close.
	c2 := dial(t, l.Addr())
	if _, err := io.WriteString(c2.conn, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := c2.read(); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with close: %v %v", resp, err)
	}
	c2.waitEOF(ioTimeout)

	eventually(t, "both connections to be released", func() bool { return l.Stats().Open == 0 })
	if s := l.Stats(); s.ClosedIdle != 0 || s.ClosedHeaderTimeout != 0 {
		t.Errorf("idle %d, header %d; want 0, 0", s.ClosedIdle, s.ClosedHeaderTimeout)
	}
}

// ConfigureServer applies the timeouts and keeps an existing hook.
func TestConfigureServer(t *testing.T) {
	l, err := New(nil, Config{MaxConns: 1, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	var seen []http.ConnState
	srv := &http.Server{ConnState: func(_ net.Conn, s http.ConnState) { seen = append(seen, s) }}
	l.ConfigureServer(srv)
	if srv.ReadHeaderTimeout != DefaultReadHeaderTimeout || srv.IdleTimeout != -1 {
		t.Errorf("timeouts %v, %v; want %v, -1", srv.ReadHeaderTimeout, srv.IdleTimeout, DefaultReadHeaderTimeout)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv.ConnState(a, http.StateNew)
	if len(seen) != 1 || seen[0] != http.StateNew {
		t.Errorf("existing hook saw %v, want [new]", seen)
	}
}

// Over TLS, ConnState sees a *tls.Conn; the idle close is still counted.
func TestIdleCloseCountedOverTLS(t *testing.T) {
	l, err := Listen(t.Context(), "tcp", "127.0.0.1:0", Config{MaxConns: 4, IdleTimeout: shortTimeout, ReadHeaderTimeout: longTimeout, BusyReply: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	_ = ts.Listener.Close()
	ts.Listener = l
	l.ConfigureServer(ts.Config)
	ts.StartTLS()
	defer ts.Close()

	client := ts.Client()
	resp, err := client.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	eventually(t, "the idle TLS connection to be closed and counted", func() bool {
		s := l.Stats()
		return s.ClosedIdle == 1 && s.Open == 0
	})
	if s := l.Stats(); s.ClosedHeaderTimeout != 0 || s.Accepted != 1 {
		t.Errorf("stats %+v, want 1 accepted, no header timeouts", s)
	}
}
