package load

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestParseEnvelope(t *testing.T) {
	cases := []struct {
		body string
		want Envelope
		ok   bool
	}{
		{`{"error":"BUSY","gate":"disk","reason":"full"}`, Envelope{"BUSY", "disk", "full"}, true},
		{" {\"error\":\"RATE_LIMITED\",\"gate\":\"quota\"}\n", Envelope{"RATE_LIMITED", "quota", ""}, true},
		{`{"error":"BUSY"}`, Envelope{Error: "BUSY"}, true},
		{`{"gate":"disk"}`, Envelope{}, false},
		{`Service Unavailable`, Envelope{}, false},
		{``, Envelope{}, false},
		{`{"error":"BUSY","gate":"` + strings.Repeat("g", 65) + `"}`, Envelope{}, false},
		{`{"error":"BUSY","gate":"a\u0001b"}`, Envelope{}, false},
		{`{"error":1}`, Envelope{}, false},
	}
	for _, c := range cases {
		got, ok := ParseEnvelope([]byte(c.body))
		if ok != c.ok || got != c.want {
			t.Errorf("ParseEnvelope(%q) = %+v, %v; want %+v, %v", c.body, got, ok, c.want, c.ok)
		}
	}
}

func TestErrorKind(t *testing.T) {
	wrap := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: err}}
	}
	cases := map[error]string{
		wrap(syscall.ECONNREFUSED):    ErrKindRefused,
		wrap(syscall.ECONNRESET):      ErrKindReset,
		context.DeadlineExceeded:      ErrKindTimeout,
		io.ErrUnexpectedEOF:           ErrKindEOF,
		&net.DNSError{Err: "no such"}: ErrKindDNS,
		errors.New("strange"):         ErrKindOther,
	}
	for err, want := range cases {
		if got := errorKind(err); got != want {
			t.Errorf("errorKind(%v) = %q, want %q", err, got, want)
		}
	}
}
