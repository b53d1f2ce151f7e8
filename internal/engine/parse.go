package engine

import (
	"bytes"
	"errors"
	"net/url"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// field is one header field of a parsed head: slices into the
// connection's read buffer, valid until the next request is read.
type field struct{ name, value []byte }

// head is a parsed request head. Every slice points into the
// connection's read buffer.
type head struct {
	method []byte
	target []byte
	minor  int // HTTP/1.minor: 0 or 1
	fields []field

	host          []byte
	hasHost       bool
	contentLength int64 // -1: none declared
	chunked       bool
	close         bool // the client asked to close, or HTTP/1.0 without keep-alive
	keepAlive     bool // Connection: keep-alive (HTTP/1.0)
	expect        bool // Expect: 100-continue
	upgrade       bool // Connection: upgrade with an Upgrade field
}

// hasBody reports whether the request declares a body.
func (h *head) hasBody() bool { return h.chunked || h.contentLength > 0 }

// reset empties h, keeping the fields slice's storage.
func (h *head) reset() {
	*h = head{fields: h.fields[:0], contentLength: -1}
}

// A parseError is a request the engine refuses before any handler sees
// it. It carries the status of the answer (400, 417, 431, 501, 505) and
// a short reason for the body; the connection is closed after it.
type parseError struct {
	status int
	reason string
}

func (e *parseError) Error() string { return strconv.Itoa(e.status) + " " + e.reason }

var (
	errBadRequestLine   = &parseError{400, "malformed request line"}
	errBadMethod        = &parseError{400, "invalid method"}
	errBadTarget        = &parseError{400, "invalid request target"}
	errBadVersion       = &parseError{400, "malformed HTTP version"}
	errVersion          = &parseError{505, "HTTP version not supported"}
	errBareLF           = &parseError{400, "line not ended by CRLF"}
	errObsFold          = &parseError{400, "obsolete line folding"}
	errBadFieldName     = &parseError{400, "invalid header field name"}
	errSpaceBeforeColon = &parseError{400, "whitespace before colon"}
	errBadFieldValue    = &parseError{400, "invalid header field value"}
	errNoHost           = &parseError{400, "missing Host header"}
	errTwoHosts         = &parseError{400, "more than one Host header"}
	errBadHost          = &parseError{400, "malformed Host header"}
	errBadLength        = &parseError{400, "malformed Content-Length"}
	errTwoLengths       = &parseError{400, "more than one Content-Length"}
	errLengthAndTE      = &parseError{400, "both Content-Length and Transfer-Encoding"}
	errTwoTE            = &parseError{400, "more than one Transfer-Encoding"}
	errTEInHTTP10       = &parseError{400, "Transfer-Encoding in an HTTP/1.0 request"}
	errUnsupportedTE    = &parseError{501, "unsupported transfer encoding"}
	errExpectation      = &parseError{417, "unsupported expectation"}
	errHeadTooLarge     = &parseError{431, "request header fields too large"}
	errAsteriskNotOpts  = &parseError{400, "asterisk-form target with a method other than OPTIONS"}
	errNeedMore         = errors.New("engine: incomplete request head")
)

// maxLeadingCRLF is how many empty lines before a request line are
// skipped (RFC 9112 section 2.2: a server should ignore at least one).
const maxLeadingCRLF = 4

// parseHead parses the request head at the start of buf into h. It
// returns the head's length in bytes (including the empty line that ends
// it), errNeedMore when buf holds no complete head yet, or a *parseError.
//
// The rules are strict on purpose, so that every request has exactly one
// reading and no peer in front of the engine can read it another way:
// lines end with CRLF only; no obsolete line folding; field names are
// tokens followed directly by a colon; field values hold no control
// characters but HTAB; one Host for HTTP/1.1 (at most one for 1.0);
// a body is framed either by one Content-Length of plain digits or by one
// Transfer-Encoding that is exactly "chunked" (HTTP/1.1 only), never both.
func parseHead(buf []byte, h *head) (int, error) {
	h.reset()
	start := 0
	for range maxLeadingCRLF {
		if len(buf)-start >= 2 && buf[start] == '\r' && buf[start+1] == '\n' {
			start += 2
			continue
		}
		break
	}
	b := buf[start:]
	end := bytes.Index(b, crlfcrlf)
	if end < 0 {
		// Fail early on what can never become a valid head.
		if i := bytes.IndexByte(b, '\n'); i >= 0 && (i == 0 || b[i-1] != '\r') {
			return 0, errBareLF
		}
		return 0, errNeedMore
	}
	block := b[:end+2] // every line, each with its CRLF
	n := start + end + 4

	lineEnd := bytes.Index(block, crlf)
	if err := parseRequestLine(block[:lineEnd], h); err != nil {
		return 0, err
	}
	rest := block[lineEnd+2:]
	for len(rest) > 0 {
		i := bytes.Index(rest, crlf)
		line := rest[:i]
		rest = rest[i+2:]
		if err := parseField(line, h); err != nil {
			return 0, err
		}
	}
	if err := h.check(); err != nil {
		return 0, err
	}
	return n, nil
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

// parseRequestLine reads "method SP target SP HTTP/1.x".
func parseRequestLine(line []byte, h *head) error {
	if bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return errBareLF
	}
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		if sp1 == 0 {
			return errBadMethod
		}
		return errBadRequestLine
	}
	method := line[:sp1]
	for _, c := range method {
		if !httpguts.IsTokenRune(rune(c)) {
			return errBadMethod
		}
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 {
		return errBadRequestLine
	}
	target, version := rest[:sp2], rest[sp2+1:]
	if len(target) == 0 {
		return errBadTarget
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f { // visible ASCII only: no spaces, controls or raw bytes
			return errBadTarget
		}
	}
	switch {
	case string(version) == "HTTP/1.1":
		h.minor = 1
	case string(version) == "HTTP/1.0":
		h.minor = 0
	case len(version) == 8 && string(version[:5]) == "HTTP/" && isDigit(version[5]) && version[6] == '.' && isDigit(version[7]):
		return errVersion
	default:
		return errBadVersion
	}
	if err := checkTarget(method, target); err != nil {
		return err
	}
	h.method, h.target = method, target
	return nil
}

// checkTarget accepts the four forms of RFC 9112 section 3.2, as net/http
// reads them: origin-form ("/a?b", percent-escapes well formed),
// asterisk-form for OPTIONS only, absolute-form ("http://host/a") and
// authority-form for CONNECT ("host:443"), the last two as
// url.ParseRequestURI parses them.
func checkTarget(method, target []byte) error {
	switch {
	case target[0] == '/':
		for i := 0; i < len(target); i++ {
			if target[i] == '%' && (i+2 >= len(target) || !isHex(target[i+1]) || !isHex(target[i+2])) {
				if q := bytes.IndexByte(target, '?'); q < 0 || i < q {
					return errBadTarget // net/http refuses a bad escape in the path (the query is the handler's)
				}
			}
		}
		return nil
	case len(target) == 1 && target[0] == '*':
		if string(method) != "OPTIONS" {
			return errAsteriskNotOpts
		}
		return nil
	case string(method) == "CONNECT":
		if _, err := url.ParseRequestURI("http://" + string(target)); err != nil {
			return errBadTarget
		}
		return nil
	case bytes.Contains(target, []byte("://")):
		if _, err := url.ParseRequestURI(string(target)); err != nil {
			return errBadTarget
		}
		return nil
	}
	return errBadTarget
}

func isHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseField reads one "name: value" line and applies the fields that
// frame the message.
func parseField(line []byte, h *head) error {
	if len(line) == 0 {
		return errBadFieldName
	}
	if line[0] == ' ' || line[0] == '\t' {
		return errObsFold
	}
	colon := bytes.IndexByte(line, ':')
	if colon == 0 {
		return errBadFieldName // an empty name
	}
	if colon < 0 {
		if bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
			return errBareLF
		}
		return errBadFieldName
	}
	name := line[:colon]
	for i, c := range name {
		if !httpguts.IsTokenRune(rune(c)) {
			if (c == ' ' || c == '\t') && i > 0 && isOnlyWhitespace(name[i:]) {
				return errSpaceBeforeColon
			}
			if c == '\r' || c == '\n' {
				return errBareLF
			}
			return errBadFieldName
		}
	}
	value := line[colon+1:]
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			if c == '\r' || c == '\n' {
				return errBareLF
			}
			return errBadFieldValue
		}
	}
	value = trimOWS(value)
	h.fields = append(h.fields, field{name, value})

	switch len(name) {
	case 4:
		if asciiEqualFold(name, "host") {
			if h.hasHost {
				return errTwoHosts
			}
			h.hasHost, h.host = true, value
		}
	case 6:
		if asciiEqualFold(name, "expect") {
			if !asciiEqualFold(value, "100-continue") {
				return errExpectation
			}
			h.expect = true
		}
	case 10:
		if asciiEqualFold(name, "connection") {
			forEachToken(value, func(tok []byte) {
				switch {
				case asciiEqualFold(tok, "close"):
					h.close = true
				case asciiEqualFold(tok, "keep-alive"):
					h.keepAlive = true
				case asciiEqualFold(tok, "upgrade"):
					h.upgrade = true
				}
			})
		}
	case 14:
		if asciiEqualFold(name, "content-length") {
			if h.contentLength >= 0 {
				return errTwoLengths
			}
			n, ok := parseLength(value)
			if !ok {
				return errBadLength
			}
			h.contentLength = n
		}
	case 17:
		if asciiEqualFold(name, "transfer-encoding") {
			if h.chunked {
				return errTwoTE
			}
			if !asciiEqualFold(value, "chunked") {
				return errUnsupportedTE
			}
			h.chunked = true
		}
	}
	return nil
}

// check applies the rules that need the whole head.
func (h *head) check() error {
	if h.chunked && h.contentLength >= 0 {
		return errLengthAndTE
	}
	if h.chunked && h.minor == 0 {
		return errTEInHTTP10
	}
	if h.minor == 1 && !h.hasHost {
		return errNoHost
	}
	if h.hasHost && !httpguts.ValidHostHeader(string(h.host)) {
		return errBadHost
	}
	if h.minor == 0 && !h.keepAlive {
		h.close = true
	}
	if h.contentLength < 0 && !h.chunked {
		h.contentLength = 0
	}
	return nil
}

// parseLength parses 1*DIGIT into a non-negative int64.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 { // 18 digits cannot overflow int64
		return 0, false
	}
	var n int64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func isOnlyWhitespace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// forEachToken calls f for every comma-separated element of v, trimmed.
func forEachToken(v []byte, f func([]byte)) {
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		var tok []byte
		if i < 0 {
			tok, v = v, nil
		} else {
			tok, v = v[:i], v[i+1:]
		}
		if tok = trimOWS(tok); len(tok) > 0 {
			f(tok)
		}
	}
}

// asciiEqualFold reports whether b equals the lower-case ASCII string s,
// ignoring ASCII case in b.
func asciiEqualFold[T ~string | ~[]byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
