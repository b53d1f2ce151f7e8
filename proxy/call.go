package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/hfield"
	"github.com/sluicehq/sluice/internal/upstream"
)

// Defaults for the call's deadlines.
const (
	// DefaultCallTimeout is what a person waits for a page before giving
	// up: the whole call, every attempt included, fits in it.
	DefaultCallTimeout = 30 * time.Second
	// DefaultUpstreamIdleTimeout is nginx's proxy_read_timeout: long
	// enough for server-sent events' keep-alives, short enough that a
	// stalled body frees its slot within a minute.
	DefaultUpstreamIdleTimeout = 60 * time.Second
)

// call is one proxied request on its way to the upstream: the state the
// ReverseProxy's hooks (rewrite, the pool's attempts, modifyResponse,
// upstreamError) share. It is the request's context too, so that reaching
// it costs a Value lookup and no context of its own:
//
//   - a client fault (its body failed) is recorded in it; the pool then
//     ends the attempt as canceled, which neither the retry policy (and so
//     the breaker and throttling) nor the pool holds against the upstream;
//   - Deadline reports the sooner of the client's deadline (Request-Timeout)
//     and the proxy's own total deadline (Config.CallTimeout). The retry
//     policy reads it to fit attempts inside and to send what is left to
//     the upstream; the pool bounds each attempt's wait for headers by it.
//     The proxy's own deadline bounds the wait for the answer, not the
//     answer's body: a long download is bounded by the idle timeouts
//     instead, so nothing cancels the call when it passes.
type call struct {
	context.Context // the request's context
	route           *route
	in              *http.Request // the inbound request, for the stale key
	own             time.Time     // the proxy's total deadline; zero: none
	tunnel          *tunnel       // set for an allowed upgrade

	mu    sync.Mutex
	fault error // the client's fault that ended the call (its body), if any

	// upstreamFailed: the upstream's answer failed after its headers (cut
	// short, or stalled past the idle timeout).
	upstreamFailed atomic.Bool
	// returned: the ReverseProxy returned; later body errors are nobody's.
	returned atomic.Bool

	// first is the storage of the call's first attempt (one allocation
	// for both); firstTaken: it is in use. Never reused: a later
	// attempt has its own.
	first      attempt
	firstTaken atomic.Bool

	// fields are a natively forwarded call's header fields, sent beside
	// the outbound request's Header (see nativeRequest); nil for a
	// bridged call, whose fields are all in its Header.
	fields *upstream.Fields
	// answer receives a natively forwarded call's answer fields as a
	// list (upstream.Limits.Answer); nil for a bridged call, which
	// needs its answer's Header.
	answer *hfield.List
}

// attemptStorage is where the call's next attempt lives: the call's own
// storage for the first, a new attempt after it, or without a call.
func (c *call) attemptStorage() *attempt {
	if c != nil && c.firstTaken.CompareAndSwap(false, true) {
		return &c.first
	}
	return new(attempt)
}

// callKey finds the call in a context derived from it.
type callKey struct{}

func newCall(r *http.Request, rt *route, total time.Duration, now time.Time) *call {
	c := &call{Context: r.Context(), route: rt, in: r}
	if total > 0 {
		c.own = now.Add(total)
	}
	return c
}

// callOf returns the call ctx belongs to, or nil.
func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// Value returns the call itself for callKey.
func (c *call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// WatchCancel and StopWatch let the upstream client watch the call's end
// without context.AfterFunc when the request's context can (a natively
// forwarded call's, see callCtx); see upstream.CancelWatcher.
func (c *call) WatchCancel(f func()) bool {
	w, ok := c.Context.(upstream.CancelWatcher)
	return ok && w.WatchCancel(f)
}

func (c *call) StopWatch() bool {
	if w, ok := c.Context.(upstream.CancelWatcher); ok {
		return w.StopWatch()
	}
	return true
}

// Deadline is the sooner of the client's deadline and the proxy's own.
func (c *call) Deadline() (time.Time, bool) {
	d, ok := c.Context.Deadline()
	if !c.own.IsZero() && (!ok || c.own.Before(d)) {
		return c.own, true
	}
	return d, ok
}

// ownLeft is what is left of the proxy's own deadline (ok false: none).
func (c *call) ownLeft(now time.Time) (time.Duration, bool) {
	if c == nil || c.own.IsZero() {
		return 0, false
	}
	return c.own.Sub(now), true
}

// clientFault records that the client broke the call (its body failed).
// The first fault is kept.
func (c *call) clientFault(err error) {
	c.mu.Lock()
	if c.fault == nil {
		c.fault = err
	}
	c.mu.Unlock()
}

// faulted returns the client's fault, if any.
func (c *call) faulted() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fault
}

// errClientFault ends an attempt the client's body broke. It is a
// cancellation: the retry policy counts nothing for a canceled attempt.
var errClientFault = fmt.Errorf("proxy: the client's request body failed: %w", context.Canceled)

// abortOutcome is the outcome of a call whose ReverseProxy aborted the
// answer midway (net/http's ErrAbortHandler panic: the answer cannot be
// completed): the client's doing, the upstream's, or, when neither is
// known, a real panic, left for the holder to record as one.
func (c *call) abortOutcome() (admit.Outcome, bool) {
	return abortOutcome(c.faulted() != nil, c.Context.Err() != nil, c.upstreamFailed.Load())
}

// abortOutcome decides the outcome of an aborted answer: a client fault
// (its body) drops the work (no latency sample: the upstream was never
// measured), a client gone or cut off (it left, or stopped reading past
// the send timeout, which ends the request's context) cancels it, an
// upstream that failed mid-answer is an error. Neither: not known.
func abortOutcome(clientFault, clientGone, upstreamFailed bool) (admit.Outcome, bool) {
	switch {
	case clientFault:
		return admit.OutcomeDropped, true
	case clientGone:
		return admit.OutcomeCanceled, true
	case upstreamFailed:
		return admit.OutcomeError, true
	}
	return 0, false
}

// clientBody is the inbound request body on its way to the upstream. A
// read that fails (a malformed chunked body, a client that left, one past
// the body timeout) is the client's fault: it is recorded in the call
// before the error reaches the transport, so nothing below counts it
// against the upstream.
type clientBody struct {
	rc io.ReadCloser
	c  *call
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && !b.c.returned.Load() && !errors.Is(err, http.ErrBodyReadAfterClose) {
		b.c.clientFault(err)
	}
	return n, err
}

func (b *clientBody) Close() error { return b.rc.Close() }

// Client fault codes in answer bodies.
const (
	codeBadRequest     = "BAD_REQUEST"     // 400: the request body is malformed
	codeRequestTimeout = "REQUEST_TIMEOUT" // 408: the request body stalled
)

// statusClientGone is the status logged for a client that left (nginx's
// 499): nobody reads the answer.
const statusClientGone = 499

// clientFaultStatus maps the error a request body failed with to the
// answer: 408 when it stalled past a deadline (the body timeout), 499
// when the client left (nobody reads it), else 400 (a malformed body).
// gone says whether the client's connection is known to have ended.
func clientFaultStatus(err error, gone bool) (int, string) {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return http.StatusRequestTimeout, codeRequestTimeout
	case gone || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
		return statusClientGone, ""
	}
	return http.StatusBadRequest, codeBadRequest
}

// answerClientFault answers a call the client's body broke and records
// it as dropped: the upstream is not to blame and its latency was not
// measured.
func answerClientFault(w http.ResponseWriter, r *http.Request, err error) {
	httpgate.SetOutcome(r.Context(), admit.OutcomeDropped)
	if c := callOf(r.Context()); c != nil {
		r = c.in
	}
	gone := r.Context().Err() != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded)
	status, code := clientFaultStatus(err, gone)
	if code == "" {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Connection", "close") // the rest of the body is not read
	detail := "malformed request body"
	if status == http.StatusRequestTimeout {
		detail = "the request body stalled"
	}
	writeJSON(w, status, `{"error":"`+code+`","detail":"`+detail+`"}`+"\n")
}

// writeJSON writes a small JSON answer.
func writeJSON(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// upstreamTimeout is the error of an attempt or an answer the proxy gave
// up waiting for: the upstream's headers did not come within the attempt's
// time (HeaderTimeout, within what is left of CallTimeout), or its body
// stalled past UpstreamIdleTimeout. It is a net.Error whose Timeout is
// true, so it is answered 504 and counted against the upstream.
type upstreamTimeout struct{ what string }

func (e *upstreamTimeout) Error() string   { return "proxy: upstream timeout: " + e.what }
func (e *upstreamTimeout) Timeout() bool   { return true }
func (e *upstreamTimeout) Temporary() bool { return true }

var (
	errHeaderTimeout = &upstreamTimeout{"no response headers in time"}
	errBodyIdle      = &upstreamTimeout{"response body stalled"}
)

var _ net.Error = (*upstreamTimeout)(nil)
