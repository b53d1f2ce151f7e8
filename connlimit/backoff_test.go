package connlimit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// scriptedListener returns the errors in its script one per Accept, then
// connections from conns. It stands in for the kernel only where the
// kernel cannot be made to fail on cue; the flood test does it for real.
type scriptedListener struct {
	script []error
	conns  chan net.Conn
	calls  []time.Time // when each Accept was called
	closed chan struct{}
}

func newScripted(errs ...error) *scriptedListener {
	return &scriptedListener{script: errs, conns: make(chan net.Conn, 1), closed: make(chan struct{})}
}

func (s *scriptedListener) Accept() (net.Conn, error) {
	s.calls = append(s.calls, time.Now())
	if len(s.script) > 0 {
		err := s.script[0]
		s.script = s.script[1:]
		return nil, err
	}
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *scriptedListener) Close() error   { close(s.closed); return nil }
func (s *scriptedListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// Temporary errors are paced by a doubling pause with a cap, counted by
// kind, and the pause resets after a success.
func TestAcceptBacksOffOnTemporaryErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := []error{
			acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE),
			acceptErr(syscall.ENFILE), acceptErr(syscall.ENOBUFS), acceptErr(syscall.EMFILE),
			acceptErr(syscall.ECONNABORTED),
		}
		inner := newScripted(errs...)
		l, err := New(inner, Config{MaxConns: 4, MaxAcceptBackoff: 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()

		server, client := net.Pipe()
		defer client.Close()
		inner.conns <- server
		start := time.Now()
		c, err := l.Accept()
		if err != nil {
			t.Fatalf("Accept: %v", err)
		}
		defer c.Close()

		want := []time.Duration{0, 5, 10, 20, 40, 40, 40, 40} // ms after start, capped at 40
		var acc time.Duration
		if len(inner.calls) != len(want) {
			t.Fatalf("%d inner Accept calls, want %d", len(inner.calls), len(want))
		}
		for i, at := range inner.calls {
			acc += want[i] * time.Millisecond
			if got := at.Sub(start); got != acc {
				t.Errorf("inner Accept %d at %v, want %v", i, got, acc)
			}
		}
		s := l.Stats()
		wantKinds := map[string]uint64{AcceptErrEMFILE: 4, AcceptErrENFILE: 1, AcceptErrNoMem: 1, AcceptErrOther: 1}
		if fmt.Sprint(s.AcceptErrors) != fmt.Sprint(wantKinds) || s.Backoffs != uint64(len(errs)) {
			t.Errorf("accept errors %v, back-offs %d; want %v, %d", s.AcceptErrors, s.Backoffs, wantKinds, len(errs))
		}

		// After a success the next error starts again from the minimum.
		inner.script = []error{acceptErr(syscall.EMFILE)}
		server2, client2 := net.Pipe()
		defer client2.Close()
		inner.conns <- server2
		start = time.Now()
		c2, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		if got := time.Since(start); got != MinAcceptBackoff {
			t.Errorf("pause after recovery %v, want %v", got, MinAcceptBackoff)
		}
	})
}

// A back-off in progress ends as soon as the Listener is closed.
func TestCloseInterruptsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make([]error, 100)
		for i := range errs {
			errs[i] = acceptErr(syscall.EMFILE)
		}
		inner := newScripted(errs...)
		l, err := New(inner, Config{MaxConns: 1, MaxAcceptBackoff: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			_, err := l.Accept()
			done <- err
		}()
		time.Sleep(time.Minute) // deep into a long pause
		start := time.Now()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		err = <-done
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept = %v, want net.ErrClosed", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Accept returned %v after Close, want at once", waited)
		}
	})
}

// A permanent error is returned at once, without a pause.
func TestPermanentAcceptErrorIsReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("listener broken")
		l, err := New(newScripted(boom), Config{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		start := time.Now()
		if _, err := l.Accept(); !errors.Is(err, boom) {
			t.Fatalf("Accept = %v, want %v", err, boom)
		}
		if time.Since(start) != 0 || l.Stats().Backoffs != 0 {
			t.Errorf("permanent error paused or counted a back-off")
		}
	})
}

func TestClassifyAcceptError(t *testing.T) {
	for _, tc := range []struct {
		err       error
		kind      string
		temporary bool
	}{
		{acceptErr(syscall.EMFILE), AcceptErrEMFILE, true},
		{acceptErr(syscall.ENFILE), AcceptErrENFILE, true},
		{acceptErr(syscall.ENOMEM), AcceptErrNoMem, true},
		{acceptErr(syscall.ENOBUFS), AcceptErrNoMem, true},
		{acceptErr(syscall.ECONNABORTED), AcceptErrOther, true},
		{&net.OpError{Op: "accept", Err: net.ErrClosed}, "", false},
		{errors.New("plain"), "", false},
	} {
		kind, temporary := classifyAcceptError(tc.err)
		if temporary != tc.temporary || (temporary && kind.String() != tc.kind) {
			t.Errorf("classify(%v) = %v, %v; want %q, %v", tc.err, kind, temporary, tc.kind, tc.temporary)
		}
	}
}
