package rawsock

import (
	"net"
	"testing"
)

func TestOf(t *testing.T) {
	c, _ := pair(t)
	if Of(c) == nil {
		t.Error("no socket for a *net.TCPConn")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Of(a) != nil {
		t.Error("a socket for net.Pipe")
	}
}

// pair is a connected loopback TCP pair, closed at the test's end.
func pair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}
