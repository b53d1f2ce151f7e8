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

// scriptedListener plays its script, one item per Accept: an error is
// returned as is, a net.Conn is accepted; then Accept blocks until Close.
// It stands in for the kernel only where the kernel cannot be made to
// fail on cue; the flood test makes EMFILE happen for real.
type scriptedListener struct {
	script []any
	calls  []time.Time // when each Accept was called
	closed chan struct{}
}

func newScripted(script ...any) *scriptedListener {
	return &scriptedListener{script: script, closed: make(chan struct{})}
}

func (s *scriptedListener) Accept() (net.Conn, error) {
	s.calls = append(s.calls, time.Now())
	if len(s.script) > 0 {
		item := s.script[0]
		s.script = s.script[1:]
		if c, ok := item.(net.Conn); ok {
			return c, nil
		}
		return nil, item.(error)
	}
	<-s.closed
	return nil, net.ErrClosed
}

// pipe returns the server end of a new in-memory connection; the client
// end is closed when the test ends.
func pipe(t *testing.T) net.Conn {
	server, client := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return server
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
		script := []any{
			acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE),
			acceptErr(syscall.ENFILE), acceptErr(syscall.ENOBUFS), acceptErr(syscall.EMFILE),
			acceptErr(syscall.ECONNABORTED), pipe(t),
		}
		inner := newScripted(script...)
		l, err := New(inner, Config{MaxConns: 1, MaxAcceptBackoff: 40 * time.Millisecond, BusyReply: []byte{}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()

		start := time.Now()
		c, err := l.Accept()
		if err != nil {
			t.Fatalf("Accept: %v", err)
		}
		defer c.Close()

		want := []time.Duration{0, 5, 10, 20, 40, 40, 40, 40} // ms since the previous call, capped at 40
		checkCalls(t, inner.calls, start, want)
		s := l.Stats()
		wantKinds := map[string]uint64{AcceptErrEMFILE: 4, AcceptErrENFILE: 1, AcceptErrNoMem: 1, AcceptErrOther: 1}
		if fmt.Sprint(s.AcceptErrors) != fmt.Sprint(wantKinds) || s.Backoffs != 7 {
			t.Errorf("accept errors %v, back-offs %d; want %v, 7", s.AcceptErrors, s.Backoffs, wantKinds)
		}

		// After a success the next shortage starts again from the shortest
		// pause, also within one Accept call (here the success is a
		// connection refused because the only slot is taken).
		inner.script = []any{
			acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), pipe(t),
			acceptErr(syscall.EMFILE), pipe(t),
		}
		inner.calls = nil
		start = time.Now()
		go func() {
			// Free the slot between the refusal (at +15ms) and the last
			// connection (at +20ms).
			time.Sleep(17 * time.Millisecond)
			_ = c.Close()
		}()
		c2, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		checkCalls(t, inner.calls, start, []time.Duration{0, 5, 10, 0, 5})
		if s := l.Stats(); s.Rejected[ReasonMaxConns] != 1 || s.Accepted != 2 {
			t.Errorf("rejected %d, accepted %d; want 1, 2", s.Rejected[ReasonMaxConns], s.Accepted)
		}
	})
}

// checkCalls asserts the inner Accept calls came at the given gaps (ms).
func checkCalls(t *testing.T, calls []time.Time, start time.Time, gapsMS []time.Duration) {
	t.Helper()
	if len(calls) != len(gapsMS) {
		t.Fatalf("%d inner Accept calls, want %d", len(calls), len(gapsMS))
	}
	at := start
	for i, call := range calls {
		at = at.Add(gapsMS[i] * time.Millisecond)
		if !call.Equal(at) {
			t.Errorf("inner Accept %d at +%v, want +%v", i, call.Sub(start), at.Sub(start))
		}
	}
}

// A back-off in progress ends as soon as the Listener is closed.
func TestCloseInterruptsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make([]any, 100)
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
