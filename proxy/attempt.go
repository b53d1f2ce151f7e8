package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/hfield"
	"github.com/sluicehq/sluice/internal/upstream"
)

// attempt is one try at the upstream: its own context, canceled by one
// timer that bounds first the wait for the answer's headers and then each
// wait for a piece of its body. The timer runs only while the proxy waits
// on the upstream: between two reads of the body the proxy is writing to
// the client, whose slowness is the send timeout's business.
//
// A direct attempt (sluice's own client to an http:// instance, the
// default) has neither: the same two bounds are the client's socket
// deadlines (upstream.Limits), which also count only the waits on the
// upstream, and the call's context is the attempt's. A context and a
// timer per attempt were a tenth of a proxied request's CPU.
//
// Once the headers came, the attempt is the answer's body on its way to
// the client (one allocation for both): once closed, it records the
// instance's health, so that a body the upstream cut short or let stall
// fails the instance, and the breaker, even though the headers looked
// fine. Failures while the client's side has ended (it left, or its own
// body broke the call) are nobody's.
type attempt struct {
	ctx    context.Context
	cancel context.CancelCauseFunc // nil for a direct attempt
	timer  *time.Timer             // nil until needed
	body   atomic.Bool             // past the headers: the timer now times the body
	idle   time.Duration
	// A direct attempt's headers must come within headerTimeout (0:
	// no bound) and by deadline (zero: none).
	headerTimeout time.Duration
	deadline      time.Time
	direct        bool
	fields        *upstream.Fields // the call's fields beside the request's Header (nil: none)
	answer        *hfield.List     // where the answer's fields go as a list (nil: its Header)

	p      *pool
	m      *member
	call   context.Context // the attempt's parent: the call
	rc     io.ReadCloser   // the answer's body
	failed bool            // the status already failed the instance (502, 504)
	status int
	bad    bool // the upstream failed mid-body
	closed bool
}

// newAttempt starts an attempt under parent (the call): its headers must
// come within the pool's header timeout, and within what is left of the
// proxy's own deadline, whichever is sooner. A direct one leaves the
// timing to the client (see attempt).
func (p *pool) newAttempt(parent context.Context, m *member, direct bool) *attempt {
	c := callOf(parent)
	a := c.attemptStorage()
	*a = attempt{idle: p.idleTimeout, p: p, m: m, call: parent, direct: direct}
	if c != nil {
		a.fields, a.answer = c.fields, c.answer
	}
	d := p.headerTimeout
	if direct && p.realClock {
		// The client reads the clock, once for both bounds.
		a.ctx, a.headerTimeout = parent, d
		if c != nil {
			a.deadline = c.own
		}
		return a
	}
	if left, ok := c.ownLeft(p.now()); ok && (d <= 0 || left < d) {
		d = max(left, time.Nanosecond)
	}
	if direct {
		a.ctx, a.headerTimeout = parent, d
		return a
	}
	a.ctx, a.cancel = context.WithCancelCause(parent)
	if d > 0 {
		a.timer = time.AfterFunc(d, a.expire)
	}
	return a
}

// limits are a direct attempt's bounds for the client.
func (a *attempt) limits() upstream.Limits {
	return upstream.Limits{HeaderTimeout: a.headerTimeout, HeaderDeadline: a.deadline, BodyIdleTimeout: a.idle, Answer: a.answer}
}

// end ends the attempt's own context, if it has one.
func (a *attempt) end() {
	if a.cancel != nil {
		a.cancel(nil)
	}
}

// expire ends the attempt: its headers, or the piece of body it waited
// for, did not come in time.
func (a *attempt) expire() {
	if a.body.Load() {
		a.cancel(errBodyIdle)
		return
	}
	a.cancel(errHeaderTimeout)
}

// gotHeaders stops the header timer; from now on the timer, if it has not
// fired already, times the body.
func (a *attempt) gotHeaders() {
	if a.timer == nil || a.timer.Stop() {
		a.body.Store(true)
	}
}

// timedOut reports whether the attempt, which failed with err, ended
// because the upstream took too long to send its headers.
func (a *attempt) timedOut(err error) bool {
	if a.direct {
		return errors.Is(err, upstream.ErrHeaderTimeout)
	}
	return errors.Is(context.Cause(a.ctx), errHeaderTimeout)
}

// arm starts timing one wait for the body; disarm ends it.
func (a *attempt) arm() {
	if a.idle <= 0 || a.direct || !a.body.Load() {
		return
	}
	if a.timer == nil {
		a.timer = time.AfterFunc(a.idle, a.expire)
		return
	}
	a.timer.Reset(a.idle)
}

func (a *attempt) disarm() {
	if a.timer != nil {
		a.timer.Stop()
	}
}

func (a *attempt) Read(buf []byte) (int, error) {
	a.arm()
	n, err := a.rc.Read(buf)
	a.disarm()
	if err != nil && err != io.EOF && !a.bad && a.call.Err() == nil {
		if c := callOf(a.call); c == nil || c.faulted() == nil {
			a.bad = true
			if c != nil {
				c.upstreamFailed.Store(true)
			}
		}
		if errors.Is(err, upstream.ErrBodyIdle) || !a.direct && errors.Is(context.Cause(a.ctx), errBodyIdle) {
			err = errBodyIdle
		}
	}
	return n, err
}

func (a *attempt) Close() error {
	err := a.rc.Close()
	if !a.closed {
		a.closed = true
		a.disarm()
		a.p.record(a.m, a.failed || a.bad)
		if a.bad && countedSuccess(a.status) && a.p.lateFailure != nil {
			a.p.lateFailure()
		}
		a.end()
	}
	return err
}

// countedSuccess reports whether the breaker counted an answer with this
// status as a success when its headers came (see retry's classification):
// a body failure after such an answer must still count against the
// upstream.
func countedSuccess(status int) bool {
	return status < 500 && status != http.StatusTooManyRequests
}
