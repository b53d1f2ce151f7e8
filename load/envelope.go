package load

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Envelope is the JSON body a sluice gate sends with a refusal:
// {"error":"BUSY","gate":"disk","reason":"full"}. Other servers may send
// anything; ParseEnvelope then reports ok == false.
type Envelope struct {
	Error  string `json:"error"`
	Gate   string `json:"gate"`
	Reason string `json:"reason"`
}

// maxLabel bounds gate and reason strings taken from a server, so a hostile
// body cannot blow up the report.
const maxLabel = 64

// ParseEnvelope reads a refusal body. ok is true when the body is a JSON
// object with a non-empty "error" string; gate and reason may be empty.
// Labels longer than 64 bytes or with control characters are rejected.
func ParseEnvelope(body []byte) (e Envelope, ok bool) {
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return Envelope{}, false
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		return Envelope{}, false
	}
	if !cleanLabel(e.Error) || !cleanLabel(e.Gate) || !cleanLabel(e.Reason) {
		return Envelope{}, false
	}
	return e, true
}

func cleanLabel(s string) bool {
	if len(s) > maxLabel {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// Transport error kinds, the keys of Counts.TransportErrors.
const (
	ErrKindRefused = "connection_refused"
	ErrKindReset   = "connection_reset"
	ErrKindTimeout = "timeout"
	ErrKindEOF     = "eof"
	ErrKindDNS     = "dns"
	ErrKindTLS     = "tls"
	ErrKindOther   = "other"
)

// errorKind names the kind of a transport error (one of the ErrKind
// constants).
func errorKind(err error) string {
	var dnsErr *net.DNSError
	var tlsErr tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrKindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ErrKindReset
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return ErrKindTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrKindEOF
	case errors.As(err, &dnsErr):
		return ErrKindDNS
	case errors.As(err, &tlsErr), errors.As(err, &certErr):
		return ErrKindTLS
	}
	return ErrKindOther
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
