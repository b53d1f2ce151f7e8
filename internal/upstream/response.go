package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/internal/hfield"
)

// answer is an answer's head and what reading its body needs, in one
// allocation: the Response and the reader of a body whose length is
// declared, the common case.
type answer struct {
	resp  http.Response
	fixed fixedBody
}

// mappedAnswer is an answer parsed into a Header, with the values of its
// first fields in the same allocation (a head with more takes a slice of
// its own); an answer whose fields go to a list needs no room for them.
type mappedAnswer struct {
	answer
	vals [answerFields]string
}

// answerFields is how many field values an answer holds inline: most
// heads have fewer.
const answerFields = 12

// parseResponse parses a response head (status line and fields, up to
// and including the empty line). One string holds every string of the
// head, so a head costs the header map, that string and the answer,
// whatever its size (a slice of values besides past answerFields).
//
// It is strict where a lenient reading could frame the answer another
// way than a peer would: CRLF line ends only, no obsolete line folding,
// field names that are tokens followed by the colon, values without
// control bytes but HTAB.
//
// With list, the fields go into list, in order, and the answer's Header
// is nil (see Limits.Answer).
func parseResponse(b []byte, list *hfield.List) (*answer, error) {
	s := string(b)
	i := strings.Index(s, "\r\n")
	line := s[:i]
	if len(line) < 12 || line[:7] != "HTTP/1." || line[7] != '0' && line[7] != '1' || line[8] != ' ' ||
		!isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) || len(line) > 12 && line[12] != ' ' {
		return nil, badResponse("status line " + quoteShort(line))
	}
	for j := 12; j < len(line); j++ {
		if c := line[j]; c < ' ' && c != '\t' || c == 0x7f {
			return nil, badResponse("control byte in the reason phrase")
		}
	}
	code := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if code < 100 {
		return nil, badResponse("status " + line[9:12])
	}
	var a *answer
	var room *[answerFields]string
	if list != nil {
		a = new(answer)
	} else {
		m := new(mappedAnswer)
		a, room = &m.answer, &m.vals
	}
	a.resp = http.Response{
		Status:     strings.TrimLeft(line[9:], " "),
		StatusCode: code,
		Proto:      line[:8],
		ProtoMajor: 1,
		ProtoMinor: int(line[7] - '0'),
	}
	rest := s[i+2 : len(s)-2] // the field lines, each ending in CRLF
	// Each line ends in CRLF (a lone LF is refused below): counting the
	// LFs, one byte, is the vectorised count.
	var h http.Header
	var vals []string
	if list != nil {
		list.Reset()
	} else {
		n := strings.Count(rest, "\n")
		h = make(http.Header, n)
		vals = room[:min(n, answerFields)]
		if n > answerFields {
			vals = make([]string, n)
		}
	}
	for k := 0; rest != ""; k++ {
		j := strings.Index(rest, "\r\n")
		fl := rest[:j]
		rest = rest[j+2:]
		if fl[0] == ' ' || fl[0] == '\t' {
			return nil, badResponse("obsolete line folding")
		}
		colon := strings.IndexByte(fl, ':')
		if colon <= 0 || !httpguts.ValidHeaderFieldName(fl[:colon]) {
			return nil, badResponse("field " + quoteShort(fl))
		}
		name, value := fl[:colon], trimOWS(fl[colon+1:])
		for x := 0; x < len(value); x++ {
			if c := value[x]; c < ' ' && c != '\t' || c == 0x7f {
				return nil, badResponse("control byte in field " + quoteShort(name))
			}
		}
		if !isCanonical(name) {
			name = http.CanonicalHeaderKey(name)
		}
		if list != nil {
			list.Add(name, value)
			continue
		}
		vals[k] = value
		if old, ok := h[name]; ok {
			h[name] = append(old, value)
		} else {
			h[name] = vals[k : k+1 : k+1]
		}
	}
	a.resp.Header = h
	return a, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// isCanonical reports whether a valid field name is already in
// http.CanonicalHeaderKey's form.
func isCanonical(name string) bool {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, s) + `"`
}

// readBody reads body bytes: from the buffer if it holds some, else from
// the connection straight into p, each wait under BodyIdleTimeout.
func (cn *conn) readBody(p []byte) (int, error) {
	if cn.w > cn.r {
		n := copy(p, cn.buf[cn.r:cn.w])
		cn.r += n
		return n, nil
	}
	cn.bodyWait()
	n, err := cn.nc.Read(p)
	if n > 0 {
		return n, nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return 0, cn.bodyErr(err)
}

// bodyErr names why a body read failed: the request's context (its
// cause), the idle timeout, or the connection.
func (cn *conn) bodyErr(err error) error {
	switch {
	case cn.canceled.Load() && cn.ctx != nil:
		return context.Cause(cn.ctx)
	case isTimeout(err):
		return ErrBodyIdle
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	}
	return err
}

// readLine returns the next line of a chunked body without its CRLF; a
// line longer than limit, or ended by a bare LF, is an error.
func (cn *conn) readLine(limit int) (string, error) {
	for {
		if i := bytes.IndexByte(cn.buf[cn.r:cn.w], '\n'); i >= 0 {
			line := cn.buf[cn.r : cn.r+i+1]
			if i == 0 || line[i-1] != '\r' {
				return "", errBadChunk
			}
			if i-1 > limit {
				return "", errBadChunk
			}
			cn.r += i + 1
			return string(line[:i-1]), nil
		}
		if cn.w-cn.r > limit+2 {
			return "", errBadChunk
		}
		cn.bodyWait()
		if err := cn.fill(); err != nil {
			return "", cn.bodyErr(err)
		}
	}
}

var (
	errBadChunk   = errors.New(ErrBadResponse.Error() + ": malformed chunked body")
	errBodyClosed = http.ErrBodyReadAfterClose
)

// Bounds of a chunked answer's metadata.
const (
	maxChunkLine = 4 << 10
	maxTrailer   = 16 << 10
)

// exchangeBody is what every kind of answer body shares: it ends the
// exchange exactly once, at the body's end (the connection may go back
// to the pool) or at Close before it (the connection closes).
type exchangeBody struct {
	cn       *conn
	err      error // sticky: io.EOF at the end
	finished bool
}

func (b *exchangeBody) finish(ok bool) {
	if !b.finished {
		b.finished = true
		b.cn.done(ok)
	}
}

func (b *exchangeBody) fail(err error) error {
	b.err = err
	b.finish(false)
	return err
}

func (b *exchangeBody) Close() error {
	b.finish(false)
	if b.err == nil {
		b.err = errBodyClosed
	}
	return nil
}

// fixedBody is a body of Content-Length bytes.
type fixedBody struct {
	exchangeBody
	left int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.cn.readBody(p)
	b.left -= int64(n)
	if b.left == 0 {
		b.err = io.EOF
		b.finish(true)
		return n, io.EOF
	}
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

// untilCloseBody is a body that ends when the upstream closes the
// connection.
type untilCloseBody struct{ exchangeBody }

func (b *untilCloseBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.cn.readBody(p)
	if err == io.ErrUnexpectedEOF && !b.cn.canceled.Load() {
		b.err = io.EOF
		b.finish(false)
		return n, io.EOF
	}
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

// chunkedBody is a chunked body; its trailer section fills the
// response's Trailer.
type chunkedBody struct {
	exchangeBody
	resp    *http.Response
	left    int64 // of the current chunk
	inChunk bool
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	for !b.inChunk {
		line, err := b.cn.readLine(maxChunkLine)
		if err != nil {
			return 0, b.fail(err)
		}
		size, ok := parseChunkSize(line)
		if !ok {
			return 0, b.fail(errBadChunk)
		}
		if size == 0 {
			if err := b.readTrailer(); err != nil {
				return 0, b.fail(err)
			}
			b.err = io.EOF
			b.finish(true)
			return 0, io.EOF
		}
		b.left, b.inChunk = size, true
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.cn.readBody(p)
	b.left -= int64(n)
	if err != nil {
		return n, b.fail(err)
	}
	if b.left == 0 {
		b.inChunk = false
		line, err := b.cn.readLine(0)
		if err != nil || line != "" {
			return n, b.fail(errBadChunk)
		}
	}
	return n, nil
}

// readTrailer reads the trailer section into the response's Trailer
// (replacing declared names' nil values, as net/http merges them); the
// fields that frame or route a message are dropped.
func (b *chunkedBody) readTrailer() error {
	total := 0
	for {
		line, err := b.cn.readLine(maxTrailer - total)
		if err != nil {
			return err
		}
		if line == "" {
			return nil
		}
		total += len(line) + 2
		colon := strings.IndexByte(line, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' || !httpguts.ValidHeaderFieldName(line[:colon]) {
			return errBadChunk
		}
		name, value := http.CanonicalHeaderKey(line[:colon]), trimOWS(line[colon+1:])
		if !httpguts.ValidHeaderFieldValue(value) {
			return errBadChunk
		}
		switch name {
		case "Content-Length", "Transfer-Encoding", "Trailer", "Host":
			continue
		}
		if b.resp.Trailer == nil {
			b.resp.Trailer = make(http.Header)
		}
		if _, declared := b.resp.Trailer[name]; declared && b.resp.Trailer[name] == nil {
			b.resp.Trailer[name] = []string{value}
		} else {
			b.resp.Trailer[name] = append(b.resp.Trailer[name], value)
		}
	}
}

// parseChunkSize parses "1*HEXDIG [ chunk-ext ]"; extensions are checked
// for control bytes and dropped.
func parseChunkSize(line string) (int64, bool) {
	ext := len(line)
	if i := strings.IndexByte(line, ';'); i >= 0 {
		ext = i
	}
	digits := strings.TrimRight(line[:ext], " \t")
	if ext == len(line) {
		digits = line
	}
	if digits == "" || len(digits) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	for i := ext; i < len(line); i++ {
		if c := line[i]; c < ' ' && c != '\t' || c == 0x7f {
			return 0, false
		}
	}
	return n, true
}

// upgraded is the connection after a 101 answer: a tunnel's upstream end
// (io.ReadWriteCloser, as httputil.ReverseProxy wants it), starting with
// the bytes already read past the head. It belongs to the caller: no
// pool, no deadlines.
type upgraded struct{ cn *conn }

func (u *upgraded) Read(p []byte) (int, error) {
	cn := u.cn
	if cn.w > cn.r {
		n := copy(p, cn.buf[cn.r:cn.w])
		cn.r += n
		return n, nil
	}
	return cn.nc.Read(p)
}

func (u *upgraded) Write(p []byte) (int, error) { return u.cn.nc.Write(p) }

func (u *upgraded) Close() error {
	u.cn.close()
	return nil
}
