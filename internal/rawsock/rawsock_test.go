package rawsock

import (
	"net"
	"testing"
)

func TestOf(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
