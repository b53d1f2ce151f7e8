package connlimit

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// scriptConn is a net.Conn whose next Read result the script decides;
// it lets the ConnState classifier be driven event by event. The real
// sockets tests (timeouts_test.go) check the same logic end to end.
type scriptConn struct {
	net.Conn // nil: only Read and Close are used
	next     error
}

func (s *scriptConn) Read(p []byte) (int, error) {
	if s.next != nil {
		return 0, s.next
	}
	return copy(p, "x"), nil
}

func (s *scriptConn) Close() error { return nil }

// runConnScript plays a script on one Conn of l and returns how the close
// was classified ("idle", "header" or "none"). Letters:
// n a i c = ConnState New, Active, Idle, Closed;
// r = a read that returns data, t = a read that hits a deadline, e = a
// read that ends with EOF.
func runConnScript(t *testing.T, l *Listener, script string) string {
	t.Helper()
	sc := &scriptConn{}
	c := &Conn{Conn: sc, l: l}
	l.c.open.Add(1)
	before := l.Stats()
	buf := make([]byte, 8)
	for _, ev := range script {
		switch ev {
		case 'n':
			l.ConnState(c, http.StateNew)
		case 'a':
			l.ConnState(c, http.StateActive)
		case 'i':
			l.ConnState(c, http.StateIdle)
		case 'c':
			_ = c.Close()
			l.ConnState(c, http.StateClosed)
		case 'r', 't', 'e':
			sc.next = map[rune]error{'r': nil, 't': os.ErrDeadlineExceeded, 'e': io.EOF}[ev]
			_, _ = c.Read(buf)
		default:
			t.Fatalf("bad script letter %q", ev)
		}
	}
	after := l.Stats()
	idle := after.ClosedIdle - before.ClosedIdle
	header := after.ClosedHeaderTimeout - before.ClosedHeaderTimeout
	switch {
	case idle == 0 && header == 0:
		return "none"
	case idle == 1 && header == 0:
		return "idle"
	case idle == 0 && header == 1:
		return "header"
	}
	t.Fatalf("script %q counted %d idle and %d header closes for one connection", script, idle, header)
	return ""
}

// The sequences net/http produces, and how each close is classified.
func TestConnStateClassification(t *testing.T) {
	l, err := New(nil, Config{MaxConns: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ script, want, what string }{
		{"nc", "none", "closed before any read (Shutdown)"},
		{"ntc", "header", "nothing sent before the header timeout"},
		{"nrtac", "header", "partial headers, then the header timeout (net/http turns active)"},
		{"nrtc", "header", "partial headers, closed while still new"},
		{"nratitc", "idle", "a request, net/http's aborted background read, then the idle timeout"},
		{"nraitc", "idle", "a request, then the idle timeout"},
		{"nrairtac", "header", "keep-alive: the next request's headers too slow"},
		{"nrairtc", "header", "keep-alive: a few bytes, then the deadline, still idle"},
		{"nraiec", "none", "the client closed the idle connection"},
		{"nratc", "none", "Connection: close after the aborted background read"},
		{"nraic", "none", "Shutdown closed the idle connection"},
		{"nrartc", "none", "a deadline inside the handler (ReadTimeout on the body)"},
		{"ntcc", "header", "Closed reported twice counts once"},
		{"nraitcntc", "idle", "a Conn is classified once, whatever follows"},
	} {
		if got := runConnScript(t, l, tc.script); got != tc.want {
			t.Errorf("%s (%q): %s, want %s", tc.what, tc.script, got, tc.want)
		}
	}
	if got := l.Stats().Open; got != 0 {
		t.Errorf("Open = %d after every script closed its Conn, want 0", got)
	}
}

// Whatever the sequence, a connection counts at most one timeout close,
// only when it closes, and only if some read hit a deadline.
func FuzzConnStateScript(f *testing.F) {
	for _, s := range []string{"nc", "ntc", "nrtac", "nratitc", "nrairtac", "nraiec", "ntcc", "tttt", "cicici"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script string) {
		script = strings.Map(func(r rune) rune {
			if strings.ContainsRune("naicrte", r) {
				return r
			}
			return -1
		}, script)
		if len(script) > 64 {
			script = script[:64]
		}
		l, err := New(nil, Config{MaxConns: 1000, BusyWriteTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got := runConnScript(t, l, script) // fails on a double count
		if got != "none" && (!strings.Contains(script, "t") || !strings.Contains(script, "c")) {
			t.Fatalf("script %q classified %s without a deadline read and a close", script, got)
		}
	})
}
