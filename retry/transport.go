package retry

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/breaker"
)

// Transport is an http.RoundTripper that sends each request through a
// Policy: deadline propagation, adaptive throttling, the breaker, retries
// with backoff within the budget, Retry-After against the deadline, and the
// no-retry signal. Use it as any http.Client's Transport:
//
//	p, _ := retry.New(retry.Config{Name: "users-api"})
//	client := &http.Client{Transport: &retry.Transport{Policy: p}}
//
// The zero Transport is not usable (it needs a Policy). Safe for concurrent
// use. It never modifies the caller's request: an attempt that needs a
// different header or a fresh body gets a shallow copy.
//
// What is retried: connection failures, 502, 503, 504 and 429, and only
// for requests that are safe to repeat: an idempotent method (GET, HEAD,
// OPTIONS, TRACE, PUT, DELETE) or an Idempotency-Key header, and a body
// that can be replayed (none, or Request.GetBody set, as
// http.NewRequest does for in-memory bodies). When the transport gives up on
// such an answer it passes it up with NoRetryHeader set, so callers above
// do not retry it again. Errors that stop the first attempt: ErrDeadline,
// ErrThrottled, or the breaker's *admit.RejectedError. With
// Config.Breakers each request's URL.Host has its own breaker.
type Transport struct {
	Policy *Policy
	// Next sends each attempt; nil means http.DefaultTransport.
	Next http.RoundTripper
}

// drainLimit is how much of a discarded response body is read so the
// connection can be reused; beyond it the connection is closed instead.
const drainLimit = 4 << 10

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := t.Policy
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return p.roundTrip(req, func(n int, to Timeout) (*http.Response, bool, error) {
		areq, err := p.attemptRequest(req, n, to)
		if err != nil {
			return nil, false, err
		}
		resp, err := next.RoundTrip(areq)
		return resp, true, err
	})
}

// RoundTripWith sends req through the policy as Transport does, each
// attempt made by send: it gets the attempt's number (from 1) and its
// Timeout, and sends req itself, with the deadline header when the
// Timeout is Set (its value written by AppendTimeout). It is for a
// caller that owns its request's storage and can write each attempt's
// header in place, where Transport, which may not modify the request,
// copies the request and its header map for every attempt. A request
// with a body must have one send can replay.
func (p *Policy) RoundTripWith(req *http.Request, send func(n int, to Timeout) (*http.Response, error)) (*http.Response, error) {
	return p.roundTrip(req, func(n int, to Timeout) (*http.Response, bool, error) {
		resp, err := send(n, to)
		return resp, true, err
	})
}

// roundTrip runs req's attempts through send under the policy; send
// reports false when it could not make the attempt (a body it could not
// replay), which counts for nothing.
func (p *Policy) roundTrip(req *http.Request, send func(n int, to Timeout) (*http.Response, bool, error)) (*http.Response, error) {
	ctx := req.Context()
	safe := p.idempotent(req)
	var (
		resp *http.Response
		err  error
	)
	n := 0 // attempts made
	stop, perr := p.DoUpstream(ctx, req.URL.Host, safe, func(attempt int, to Timeout) Outcome {
		n = attempt
		if resp != nil { // a retry: the previous answer is discarded
			io.CopyN(io.Discard, resp.Body, drainLimit)
			resp.Body.Close()
			resp = nil
		}
		var sent bool
		resp, sent, err = send(attempt, to)
		if !sent {
			return Outcome{Accepted: true, Breaker: breaker.Ignored}
		}
		return p.classify(ctx, resp, err)
	})
	if perr != nil {
		if resp != nil {
			resp.Body.Close()
		} else if req.Body != nil && n == 0 {
			// No attempt was made: the RoundTripper contract still says the
			// request body is closed.
			req.Body.Close()
		}
		return nil, perr
	}
	if err != nil {
		return nil, err
	}
	if stop.GaveUp() && retryableStatus(resp.StatusCode) && resp.Header.Get(NoRetryHeader) == "" {
		if resp.Header == nil {
			resp.Header = make(http.Header, 1)
		}
		resp.Header.Set(NoRetryHeader, "overloaded")
	}
	return resp, nil
}

// idempotent reports whether req may be sent more than once.
func (p *Policy) idempotent(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := req.Header[p.idemKey]
	return ok
}

// attemptRequest returns the request for attempt n: the caller's own when
// nothing changes, else a shallow copy with the timeout header and a fresh
// body.
func (p *Policy) attemptRequest(req *http.Request, n int, to Timeout) (*http.Request, error) {
	setTimeout := to.Set && p.deadlineHeader != ""
	replay := n > 1 && req.Body != nil && req.Body != http.NoBody
	if !setTimeout && !replay {
		return req, nil
	}
	// One allocation for the copy, the header's value slice and the
	// value's bytes; the header map is the other two.
	a := new(attemptReq)
	a.r = *req
	r := &a.r
	if replay {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	if setTimeout {
		// maps.Clone copies the map's memory, without hashing each
		// name again as a loop of assignments does.
		h := maps.Clone(req.Header)
		if h == nil {
			h = make(http.Header, 1)
		}
		a.v[0] = a.timeout(to.Left)
		h[p.deadlineHeader] = a.v[:]
		r.Header = h
	}
	return r, nil
}

// attemptReq is an attempt's request with the storage of its timeout
// header's value, so that a deadline costs one allocation for all three.
type attemptReq struct {
	r   http.Request
	v   [1]string
	buf [timeoutLen]byte
}

// timeout formats d into a.buf and returns it as a string that shares
// a.buf's memory instead of copying it. That is safe because a.buf is
// written here once, before the string exists, and never again: an
// attemptReq is made for one attempt and not reused (the request, and so
// the header value, must stay valid after RoundTrip returns, since
// resp.Request points at it). The string keeps a alive.
func (a *attemptReq) timeout(d time.Duration) string {
	b := appendTimeout(a.buf[:0], d)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// classify turns an attempt's answer into an Outcome.
func (p *Policy) classify(ctx context.Context, resp *http.Response, err error) Outcome {
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return Outcome{Done: true}
		}
		// The upstream could not be reached or did not answer: not
		// accepted, worth another try if the request is safe to repeat.
		return Outcome{Retryable: true, Breaker: breaker.Failure}
	}
	switch code := resp.StatusCode; {
	case retryableStatus(code):
		o := Outcome{Retryable: true, Breaker: breaker.Failure}
		if code == http.StatusTooManyRequests {
			o.Breaker = breaker.Ignored // a quota on this client, not a sick upstream
		}
		if resp.Header.Get(NoRetryHeader) != "" {
			o.NoRetry = true
		}
		if v := resp.Header.Get("Retry-After"); v != "" {
			if d, err := ParseRetryAfter(v, p.now()); err == nil {
				o.RetryAfter, o.HasRetryAfter = d, true
			}
		}
		return o
	case code >= 500:
		return Outcome{Accepted: true, Breaker: breaker.Failure}
	default:
		return Outcome{Accepted: true, Breaker: breaker.Success}
	}
}

// CloseIdleConnections closes the idle connections of Next (or of
// http.DefaultTransport), so http.Client.CloseIdleConnections works
// through a Transport.
func (t *Transport) CloseIdleConnections() {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	if c, ok := next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
