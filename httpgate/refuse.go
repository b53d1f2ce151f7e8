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
	code := CodeBusy
	if re.Reason() == admit.ReasonRate {
		code = CodeRateLimited
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
	b := append(out.body[:0], `{"error":"`...)
	b = append(b, code...)
	b = append(b, `","gate":`...)
	b = strconv.AppendQuote(b, re.Gate())
	b = append(b, `,"reason":"`...)
	b = append(b, re.Reason().String()...)
	b = append(b, "\"}\n"...)
	writeJSONVals(w, Status(re.Reason()), b, vals[2:])
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
