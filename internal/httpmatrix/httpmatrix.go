// Package httpmatrix is the request matrix that sluice's HTTP/1.1
// front ends are checked against: raw requests, from the ordinary to the
// malformed and the ambiguous, each with the statuses sluice's engine
// answers and, where net/http answers otherwise, its statuses and the
// reason the engine differs. The engine's tests diff its handler's view
// of each request against net/http's; the proxy's diff what the upstream
// receives through each front end. One list, so the two cannot drift.
package httpmatrix

import (
	"strconv"
	"strings"
)

// Case is one raw request (or a pipeline) and the answers expected.
type Case struct {
	Name string
	Raw  string
	// N is how many answers the connection carries (zero: one).
	N int
	// Engine is the statuses sluice's engine answers, in order.
	Engine []int
	// Net is net/http's, when they differ from Engine; Why says why the
	// engine differs.
	Net []int
	Why string
}

// Answers is how many answers c's connection carries.
func (c Case) Answers() int { return max(c.N, 1) }

// NetStatuses is the statuses net/http answers.
func (c Case) NetStatuses() []int {
	if c.Net != nil {
		return c.Net
	}
	return c.Engine
}

// Requests returns the matrix (a new slice each call).
func Requests() []Case {
	big := strings.Repeat("a", 70<<10)
	return []Case{
		{Name: "GET origin-form", Raw: "GET /a/b?c=d HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{200}},
		{Name: "HEAD", Raw: "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{200}},
		{Name: "lower-case method (a token)", Raw: "get / HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{200}},
		{Name: "POST with Content-Length", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", Engine: []int{200}},
		{Name: "POST chunked", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", Engine: []int{200}},
		{Name: "chunked, upper case", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", Engine: []int{200}},
		{Name: "chunk extension", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0\r\n\r\n", Engine: []int{200}},
		{Name: "chunked with a trailer", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n", Engine: []int{200}},
		{Name: "declared trailers", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTrailer: x-sum, X-Other\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 7\r\n\r\n", Engine: []int{200}},
		{Name: "Trailer without chunking", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTrailer: X-Sum\r\nContent-Length: 2\r\n\r\nhi", Engine: []int{200}},
		{Name: "Content-Length declared as a trailer", Raw: "POST /p HTTP/1.1\r\nHost: x\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Engine: []int{400}},
		{Name: "absolute-form target", Raw: "GET http://example.com/abs?q=1 HTTP/1.1\r\nHost: other\r\n\r\n", Engine: []int{200}},
		{Name: "asterisk-form OPTIONS", Raw: "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{200}},
		{Name: "asterisk-form GET", Raw: "GET * HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}, Net: []int{200},
			Why: "asterisk-form is for OPTIONS only (RFC 9112 section 3.2.4)"},
		{Name: "HTTP/1.0 without Host", Raw: "GET /old HTTP/1.0\r\n\r\n", Engine: []int{200}},
		{Name: "HTTP/1.0 with Host", Raw: "GET /old HTTP/1.0\r\nHost: x\r\n\r\n", Engine: []int{200}},
		{Name: "HTTP/1.1 without Host", Raw: "GET / HTTP/1.1\r\n\r\n", Engine: []int{400}},
		{Name: "two Host fields", Raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Engine: []int{400}},
		{Name: "malformed Host", Raw: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", Engine: []int{400}},
		{Name: "pipelined", Raw: "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n", N: 2, Engine: []int{200, 200}},
		{Name: "Expect 100-continue", Raw: "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", Engine: []int{100, 200}, N: 2},
		{Name: "unknown expectation", Raw: "POST /e HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nhi", Engine: []int{417}},
		{Name: "upgrade a handler ignores", Raw: "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", Engine: []int{200}},
		{Name: "obs-fold", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", Engine: []int{400}, Net: []int{200},
			Why: "obsolete line folding is refused (RFC 9112 section 5.2 allows either), so no peer can read the folded line as a field of its own"},
		{Name: "control byte in a value", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", Engine: []int{400}},
		{Name: "NUL in a value", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", Engine: []int{400}},
		{Name: "space in a field name", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n", Engine: []int{400}},
		{Name: "space before the colon", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", Engine: []int{400}},
		{Name: "empty field name", Raw: "GET / HTTP/1.1\r\nHost: x\r\n: b\r\n\r\n", Engine: []int{400}},
		{Name: "bad percent-escape in the path", Raw: "GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}},
		{Name: "relative target", Raw: "GET a/b HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}},
		{Name: "field without a colon", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n", Engine: []int{400}},
		{Name: "bare LF line ends", Raw: "GET / HTTP/1.1\nHost: x\n\n", Engine: []int{400}, Net: []int{200},
			Why: "only CRLF ends a line: a peer that reads bare LF otherwise cannot disagree on where the head ends"},
		{Name: "bare CR in a value", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", Engine: []int{400}},
		{Name: "Content-Length and Transfer-Encoding", Raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			Engine: []int{400}, Net: []int{200}, Why: "two framings in one request are refused, never reconciled (RFC 9112 section 6.3)"},
		{Name: "two equal Content-Lengths", Raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
			Engine: []int{400}, Net: []int{200}, Why: "one Content-Length only: a peer that keeps the other copy must not get a say"},
		{Name: "two different Content-Lengths", Raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!", Engine: []int{400}},
		{Name: "Content-Length list", Raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\nhi", Engine: []int{400}},
		{Name: "Content-Length with a sign", Raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\nhi", Engine: []int{400}},
		{Name: "Content-Length not a number", Raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x2\r\n\r\nhi", Engine: []int{400}},
		{Name: "Transfer-Encoding gzip, chunked", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", Engine: []int{501}},
		{Name: "Transfer-Encoding chunked, chunked", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", Engine: []int{501}},
		{Name: "Transfer-Encoding identity", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", Engine: []int{501}},
		{Name: "obfuscated Transfer-Encoding", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", Engine: []int{501}},
		{Name: "two Transfer-Encoding fields", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			Engine: []int{400}, Net: []int{501}, Why: "a repeated framing field is malformed, not merely unsupported"},
		{Name: "Transfer-Encoding in HTTP/1.0", Raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			Engine: []int{400}, Net: []int{200}, Why: "HTTP/1.0 has no chunked framing (RFC 9112 section 6.1)"},
		{Name: "bad chunk size", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", Engine: []int{400}},
		{Name: "chunk size overflow", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nx\r\n0\r\n\r\n", Engine: []int{400}},
		{Name: "chunk data longer than its size", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n", Engine: []int{400}},
		{Name: "chunk extension with a control byte", Raw: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\x01\r\nhi\r\n0\r\n\r\n",
			Engine: []int{400}, Net: []int{200}, Why: "extensions are checked before they are dropped"},
		{Name: "head over 64 KiB", Raw: "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n", Engine: []int{431}, Net: []int{200},
			Why: "the engine bounds a head at 64 KiB (nginx: 32 KiB); net/http at 1 MiB"},
		{Name: "HTTP/2.0 request line", Raw: "GET / HTTP/2.0\r\nHost: x\r\n\r\n", Engine: []int{505}},
		{Name: "HTTP/1.2", Raw: "GET / HTTP/1.2\r\nHost: x\r\n\r\n", Engine: []int{505}, Net: []int{200},
			Why: "only HTTP/1.0 and HTTP/1.1 are spoken here"},
		{Name: "garbage version", Raw: "GET / HTTX/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}},
		{Name: "invalid method", Raw: "G@T / HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}},
		{Name: "two spaces in the request line", Raw: "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}},
		{Name: "raw byte in the target", Raw: "GET /\xe9 HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{400}, Net: []int{200},
			Why: "a target is visible ASCII (RFC 9112 section 3.2); raw bytes must be percent-encoded"},
		{Name: "leading empty line", Raw: "\r\nGET /lead HTTP/1.1\r\nHost: x\r\n\r\n", Engine: []int{200}, Net: []int{400},
			Why: "RFC 9112 section 2.2 asks a server to ignore at least one empty line before a request"},
	}
}

// Smuggled is the request each of Smuggling's attacks hides in what
// precedes it: a server (or an upstream behind a proxy) that ever sees
// its target read the bytes two ways.
const Smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

// Attack is one raw request whose framing has more than one reading,
// followed by Smuggled.
type Attack struct{ Name, Raw string }

// Smuggling returns the attacks: two framings (CL.TE, TE.CL), two
// Content-Lengths, obfuscated Transfer-Encodings, bad chunks. Each must
// be refused before anything sees it, so Smuggled is never read as a
// request.
func Smuggling() []Attack {
	n := strconv.Itoa(len(Smuggled))
	hexN := strconv.FormatInt(int64(len(Smuggled)), 16)
	return []Attack{
		{"CL.TE", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + Smuggled},
		{"TE.CL", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\n" + Smuggled},
		{"two Content-Lengths", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: " + n + "\r\n\r\n" + Smuggled},
		{"Content-Length list", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0, " + n + "\r\n\r\n" + Smuggled},
		{"TE with a space before the colon", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + Smuggled},
		{"TE folded", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: " + n + "\r\n\r\n" + Smuggled},
		{"TE not exactly chunked", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + Smuggled},
		{"TE with a vertical tab", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \vchunked\r\n\r\n0\r\n\r\n" + Smuggled},
		{"TE repeated", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + Smuggled},
		{"TE in HTTP/1.0", "POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + Smuggled},
		{"bare LF in the framing", "POST /a HTTP/1.1\r\nHost: x\r\nX: y\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n" + Smuggled},
		{"bare CR in the framing", "POST /a HTTP/1.1\r\nHost: x\r\nX: y\rTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n" + Smuggled},
		{"chunk longer than its size", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n" + Smuggled},
		{"chunk size with a prefix", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x" + hexN + "\r\n" + Smuggled + "\r\n0\r\n\r\n"},
		{"chunk line ended by LF", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + hexN + "\n" + Smuggled + "\r\n0\r\n\r\n"},
		{"negative chunk size", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n" + Smuggled + "\r\n0\r\n\r\n"},
	}
}
