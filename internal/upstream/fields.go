package upstream

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Fields are request header fields kept as the lines they are written
// as, in the order they were added: for a caller that has a head as a
// list (a proxy forwarding the head it parsed), so that it builds no
// http.Header and the client neither hashes, sorts nor checks the
// fields again for each try. Each field is checked once, when it is
// added, by the rules the client applies to Header (a token name, a
// value without CR, LF or NUL), so the lines can never read as more or
// less than the fields added.
//
// The zero Fields holds none. Fields are not safe for concurrent
// writes; once built they may be sent by any number of round trips.
type Fields struct {
	b []byte // "Name: value\r\n" lines
}

// Reset empties f and makes buf's storage the first it writes into
// (grown when the lines outgrow it): a caller with room of its own
// builds small heads without an allocation.
func (f *Fields) Reset(buf []byte) { f.b = buf[:0] }

// Add adds the field name (written as given) with value (its leading
// and trailing white space dropped, as for Header). It refuses, with
// ErrInvalidRequest, a name or value that is not a valid field, and the
// fields the client writes itself from the request's other parts: Host,
// Content-Length, Transfer-Encoding, Trailer and Connection.
func (f *Fields) Add(name, value string) error { return f.add(name, value, false) }

// AddCanonical is Add with name written in its canonical form (as
// http.CanonicalHeaderKey writes a token: upper case first and after
// each hyphen, lower case elsewhere), without a string for it.
func (f *Fields) AddCanonical(name, value string) error { return f.add(name, value, true) }

func (f *Fields) add(name, value string, canonical bool) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return invalid("field name %q", name)
	}
	value = strings.TrimSpace(value)
	if !httpguts.ValidHeaderFieldValue(value) {
		return invalid("value of field %q", name)
	}
	if clientsOwnField(name) {
		return invalid("field %q is the client's own", name)
	}
	if canonical {
		f.b = appendCanonical(f.b, name)
	} else {
		f.b = append(f.b, name...)
	}
	f.b = append(f.b, ": "...)
	f.b = append(f.b, value...)
	f.b = append(f.b, "\r\n"...)
	return nil
}

// clientsOwnField reports whether a field name (any case) is one the
// client writes itself, never from Fields: the framing, Host, and the
// connection's own options.
func clientsOwnField(name string) bool {
	// By length first: most names match none of the five lengths, and
	// each field of every forwarded request comes through here.
	var k string
	switch len(name) {
	case len("Host"):
		k = "Host"
	case len("Content-Length"):
		k = "Content-Length"
	case len("Transfer-Encoding"):
		k = "Transfer-Encoding"
	case len("Trailer"):
		k = "Trailer"
	case len("Connection"):
		k = "Connection"
	default:
		return false
	}
	return strings.EqualFold(name, k)
}

// Len is the size of the fields' lines in bytes.
func (f *Fields) Len() int { return len(f.b) }

// Truncate drops the fields added after the first n bytes of lines (n
// a Len reported before): a caller that sends the same fields again
// with another last one (a retry's own deadline) rewrites only that.
func (f *Fields) Truncate(n int) { f.b = f.b[:n] }

// AddTo adds the fields to h (names as added), for a round trip on
// another transport than this client.
func (f *Fields) AddTo(h http.Header) {
	for rest := string(f.b); rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\r\n")
		name, value, _ := strings.Cut(line, ": ")
		h[name] = append(h[name], value)
	}
}

// appendCanonical appends a token field name as http.CanonicalHeaderKey
// writes it.
func appendCanonical(b []byte, name string) []byte {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
		upper = c == '-'
	}
	return b
}
