package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// attempt is one try at the upstream: its own context, canceled by one
// timer that bounds first the wait for the answer's headers and then each
// wait for a piece of its body. The timer runs only while the proxy waits
// on the upstream: between two reads of the body the proxy is writing to
// the client, whose slowness is the send timeout's business.
//
// Once the headers came, the attempt is the answer's body on its way to
// the client (one allocation for both): once closed, it records the
// instance's health, so that a body the upstream cut short or let stall
// fails the instance, and the breaker, even though the headers looked
// fine. Failures while the client's side has ended (it left, or its own
// body broke the call) are nobody's.
type attempt struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // nil until needed
	body   atomic.Bool // past the headers: the timer now times the body
	idle   time.Duration

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
// proxy's own deadline, whichever is sooner.
func (p *pool) newAttempt(parent context.Context, m *member) *attempt {
	a := &attempt{idle: p.idleTimeout, p: p, m: m, call: parent}
	a.ctx, a.cancel = context.WithCancelCause(parent)
	d := p.headerTimeout
	if left, ok := callOf(parent).ownLeft(p.now()); ok && (d <= 0 || left < d) {
		d = max(left, time.Nanosecond)
	}
	if d > 0 {
		a.timer = time.AfterFunc(d, a.expire)
	}
	return a
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

// timedOut reports whether the attempt ended because the upstream took
// too long to send its headers.
func (a *attempt) timedOut() bool { return errors.Is(context.Cause(a.ctx), errHeaderTimeout) }

// arm starts timing one wait for the body; disarm ends it.
func (a *attempt) arm() {
	if a.idle <= 0 || !a.body.Load() {
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
		if errors.Is(context.Cause(a.ctx), errBodyIdle) {
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
		a.cancel(nil)
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
