//go:build unix && !(solaris || illumos || aix)

package rawsock

import (
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"
)

// onFD runs f with c's socket.
func onFD(t *testing.T, c net.Conn, f func(fd int)) {
	t.Helper()
	if err := Of(c).Control(func(fd uintptr) { f(int(fd)) }); err != nil {
		t.Fatal(err)
	}
}

// until polls cond for up to a second: loopback delivery is quick, but
// not part of the sender's write on every kernel.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("never %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestQuiet(t *testing.T) {
	c, s := pair(t)
	quiet := func() (q bool) {
		onFD(t, c, func(fd int) { q = Quiet(fd) })
		return q
	}
	if !quiet() {
		t.Fatal("an idle connection is not quiet")
	}
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	until(t, "not quiet with a byte waiting", func() bool { return !quiet() })
	var b [1]byte
	if n, err := c.Read(b[:]); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if !quiet() {
		t.Fatal("not quiet once the byte was read (the look must not consume it, nor see it twice)")
	}
	s.Close()
	until(t, "not quiet after the peer's end", func() bool { return !quiet() })
}

func TestReadAndWriteNow(t *testing.T) {
	c, s := pair(t)
	var buf [64]byte
	onFD(t, c, func(fd int) {
		if n, err := Read(fd, buf[:]); n != -1 || err != syscall.EAGAIN {
			t.Errorf("read of an empty socket: %d, %v, want -1, EAGAIN", n, err)
		}
	})
	// A small send buffer and a peer that does not read: the socket
	// takes part of a large write, then nothing.
	if err := s.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	var sent int
	onFD(t, s, func(fd int) {
		sent = WriteNow(fd, big)
		if sent <= 0 || sent >= len(big) {
			t.Fatalf("WriteNow took %d of %d bytes, want part of them", sent, len(big))
		}
		for range 100 { // what the kernel still took, until it takes nothing
			n := WriteNow(fd, big[sent:])
			if n == 0 {
				return
			}
			sent += n
		}
		t.Fatal("a socket whose peer does not read never filled")
	})
	if WriteNow(0, nil) != 0 {
		t.Error("WriteNow of nothing did something")
	}
	// The peer reads exactly what was taken, in order (its buffer grown
	// now, so that the window opens at once).
	if err := c.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, sent)
	rbuf := make([]byte, 16<<10)
	for end := time.Now().Add(time.Second); len(got) < sent; {
		var n int
		var err error
		onFD(t, c, func(fd int) { n, err = Read(fd, rbuf) })
		if err == syscall.EAGAIN {
			if time.Now().After(end) {
				t.Fatalf("%d of the %d bytes WriteNow reported taken came", len(got), sent)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil || n <= 0 {
			t.Fatalf("read %d, %v after %d of %d bytes", n, err, len(got), sent)
		}
		got = append(got, rbuf[:n]...)
	}
	if !bytes.Equal(got, big[:sent]) {
		t.Fatal("the bytes read are not those WriteNow reported taken")
	}
}
