package httpgate

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/admit"
)

// Error codes in refusal bodies.
const (
	CodeBusy        = "BUSY"         // 503: the gate is full, shedding, or closed
	CodeRateLimited = "RATE_LIMITED" // 429: a per-client quota refused
	CodeInternal    = "INTERNAL"     // 500: Acquire was misused (no holder, handler done)
	CodeBadDeadline = "BAD_DEADLINE" // 400: the deadline header is malformed
)

// Status returns the HTTP status for a refusal with reason r: 429 for a
// quota (ReasonRate), 503 for everything else.
func Status(r admit.Reason) int {
	if r == admit.ReasonRate {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// WriteRefusal is the default RefusalFunc. For a *admit.RejectedError it
// writes the contract's answer: Status(reason), Retry-After from
// RetryAfterSeconds, Content-Type: application/json and {"error":"BUSY"|"RATE_LIMITED","gate":…,"reason":…}; a
// closed gate adds Connection: close. Any other error gets a 500
// {"error":"INTERNAL"}. It never reads the request body and does not
// allocate beyond what net/http does for a response.
func WriteRefusal(w http.ResponseWriter, _ *http.Request, err error) {
	re, ok := err.(*admit.RejectedError) // the common case, without reflection
	if !ok && !errors.As(err, &re) {
		writeJSON(w, http.StatusInternalServerError, append(append([]byte(nil), `{"error":"`...), CodeInternal+`"}`+"\n"...))
		return
	}
	h := w.Header()
	// One allocation holds every header value and the body: under a
	// flood, refusals are most of the garbage the server makes.
	out := new(refusalStorage)
	vals := out.vals[:]
	vals[0] = strconv.Itoa(re.RetryAfterSeconds())
	h["Retry-After"] = vals[0:1:1]
	if re.Reason() == admit.ReasonClosed {
		vals[1] = "close"
		h["Connection"] = vals[1:2:2]
	}
	writeJSONVals(w, Status(re.Reason()), appendRefusalBody(out.body[:0], re), vals[2:])
}

// appendRefusalBody appends the JSON body of a refusal to b:
// {"error":"BUSY"|"RATE_LIMITED","gate":...,"reason":...}.
func appendRefusalBody(b []byte, re *admit.RejectedError) []byte {
	code := CodeBusy
	if re.Reason() == admit.ReasonRate {
		code = CodeRateLimited
	}
	b = append(b, `{"error":"`...)
	b = append(b, code...)
	b = append(b, `","gate":`...)
	b = strconv.AppendQuote(b, re.Gate())
	b = append(b, `,"reason":"`...)
	b = append(b, re.Reason().String()...)
	b = append(b, "\"}\n"...)
	return b
}

// AppendRefusal renders the answer WriteRefusal writes for err as
// HTTP/1.1 header lines and a body, for servers that write the protocol
// themselves and keep refusals pre-rendered: it returns the status, b
// with the header lines appended (Content-Type, Content-Length,
// Retry-After; each line ending in CRLF, without the empty line), the
// body, and whether the connection should close (a closed gate: the
// server adds Connection: close). An error that is not a *admit.RejectedError
// renders the 500 {"error":"INTERNAL"}.
func AppendRefusal(b []byte, err error) (status int, header, body []byte, closeConn bool) {
	re, ok := err.(*admit.RejectedError)
	if !ok && !errors.As(err, &re) {
		body = []byte(`{"error":"` + CodeInternal + `"}` + "\n")
		status = http.StatusInternalServerError
	} else {
		body = appendRefusalBody(nil, re)
		status = Status(re.Reason())
		closeConn = re.Reason() == admit.ReasonClosed
	}
	b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	if re != nil {
		b = append(b, "Retry-After: "...)
		b = strconv.AppendInt(b, int64(re.RetryAfterSeconds()), 10)
		b = append(b, "\r\n"...)
	}
	return status, b, body, closeConn
}

// refusalStorage is the backing store of one refusal's header values and
// body (gate names are at most 64 bytes, so the body fits).
type refusalStorage struct {
	vals [4]string
	body [144]byte
}

// writeJSON writes a complete small JSON response with a Content-Length,
// so it goes out in one write without chunking.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	writeJSONVals(w, status, body, make([]string, 2))
}

// writeJSONVals is writeJSON with storage for two header values. No
// Cache-Control: 4xx and 5xx refusals are not cacheable without explicit
// freshness (RFC 9111, 4.2.2), and every header costs on the refusal path.
func writeJSONVals(w http.ResponseWriter, status int, body []byte, vals []string) {
	h := w.Header()
	vals[0], vals[1] = "application/json", strconv.Itoa(len(body))
	h["Content-Type"] = vals[0:1:1]
	h["Content-Length"] = vals[1:2:2]
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeBadDeadline(w http.ResponseWriter, header string, err error) {
	b := append([]byte(`{"error":"`), CodeBadDeadline+`","header":`...)
	b = strconv.AppendQuote(b, header)
	b = append(b, `,"detail":`...)
	b = strconv.AppendQuote(b, err.Error())
	b = append(b, "}\n"...)
	writeJSON(w, http.StatusBadRequest, b)
}
