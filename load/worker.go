package load

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// worker sends requests one at a time. It owns prepared requests (one per
// target) and a body buffer, so the steady state allocates only inside
// net/http.
type worker struct {
	e        *engine
	id       int
	ctx      context.Context
	reqs     []*http.Request
	bodies   [][]byte
	buf      []byte
	first    atomic.Int64 // first response byte, ns since base
	lastBody []byte       // last refusal body and its parse, to skip re-parsing
	lastEnv  Envelope
	lastOK   bool
	h1       *h1Worker
}

func (e *engine) newWorker(ctx context.Context, id int) *worker {
	wk := &worker{e: e, id: id, buf: make([]byte, 4096)}
	if e.h1 != nil {
		wk.h1 = e.h1.newWorker(e.h1hosts)
	}
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() {
		wk.first.Store(int64(time.Since(e.base)))
	}}
	wk.ctx = httptrace.WithClientTrace(ctx, trace)
	if e.h1 != nil {
		return wk // requests are serialised once, in e.h1t
	}
	for _, t := range e.cfg.Targets {
		req, err := http.NewRequestWithContext(wk.ctx, t.Method, t.URL, nil)
		if err != nil { // CheckTarget accepted it, so this cannot happen
			panic(err)
		}
		for k, vs := range t.Header {
			for _, v := range vs {
				if http.CanonicalHeaderKey(k) == "Host" {
					req.Host = v
					continue
				}
				req.Header.Add(k, v)
			}
		}
		if len(t.Body) > 0 {
			body := t.Body
			req.ContentLength = int64(len(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		wk.reqs = append(wk.reqs, req)
		wk.bodies = append(wk.bodies, t.Body)
	}
	return wk
}

func (wk *worker) openLoop(q <-chan arrival, nstripes int) {
	s := wk.id % nstripes
	for a := range q {
		if wk.ctx.Err() != nil {
			p := a.win.pace
			sec := a.win.sec(a.sched)
			p.mu.Lock()
			p.c.Dropped++
			p.c.DropReasons[DropCanceled]++
			p.timeline[sec].Dropped++
			if len(p.phases) > 0 {
				p.phases[a.phase].c.Dropped++
			}
			p.mu.Unlock()
			a.win.wg.Done()
			continue
		}
		wk.do(a, a.win.stripes[s])
		a.win.wg.Done()
	}
}

func (wk *worker) closedLoop(w *winRec, nstripes int) {
	st := w.stripes[wk.id%nstripes]
	pk := newPicker(wk.e.cfg.Pick, wk.e.cfg.Targets, wk.id)
	end := w.start + w.dur
	for {
		now := time.Since(wk.e.base)
		if now >= end || wk.ctx.Err() != nil {
			return
		}
		sec := w.sec(now)
		st.mu.Lock()
		st.c.Scheduled++
		st.timeline[sec].Scheduled++
		st.mu.Unlock()
		wk.do(arrival{sched: now, win: w, target: pk.pick()}, st)
	}
}

// outcome classes, in the order Counts lists them.
const (
	classOK = iota
	classRefused
	classHTTPError
	classTransport
	classUnfinished
)

// exchange sends one request and reads the answer, keeping the first
// len(wk.buf) body bytes in wk.buf.
func (wk *worker) exchange(target int) (status, n int, first time.Duration, err error) {
	e := wk.e
	if wk.h1 != nil {
		r, err := wk.h1.do(&e.h1t[target], wk.buf, e.base, wk.canceled)
		return r.status, r.n, r.first, err
	}
	req := wk.reqs[target]
	if b := wk.bodies[target]; len(b) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	wk.first.Store(0)
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return 0, 0, 0, err
	}
	n, err = io.ReadFull(resp.Body, wk.buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	} else if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	return resp.StatusCode, n, time.Duration(wk.first.Load()), err
}

func (wk *worker) canceled() bool { return wk.ctx.Err() != nil }

func (wk *worker) do(a arrival, st *stripe) {
	e := wk.e
	sent := time.Since(e.base)
	status, n, first, err := wk.exchange(a.target)
	var (
		class  = classOK
		kind   string
		env    Envelope
		hasEnv bool
	)
	if err == nil {
		switch {
		case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			class = classRefused
			env, hasEnv = wk.envelope(wk.buf[:n])
		case status >= 400:
			class = classHTTPError
		}
	}
	done := time.Since(e.base)
	if err != nil {
		if wk.ctx.Err() != nil {
			class = classUnfinished
		} else {
			class = classTransport
			kind = errorKind(err)
		}
	}
	if first == 0 || first < sent {
		first = done
	}
	sec := a.win.sec(a.sched)
	st.mu.Lock()
	st.c.Sent++
	tl := &st.timeline[sec]
	switch class {
	case classOK:
		st.c.OK++
		tl.OK++
	case classRefused:
		st.c.Refused++
		tl.Refused++
		k := refusalKey{status: status}
		if hasEnv {
			k.gate, k.reason = env.Gate, env.Reason
		}
		st.refusals[k]++
	case classHTTPError:
		st.c.HTTPError++
		tl.Errors++
	case classTransport:
		st.c.TransportError++
		tl.Errors++
		st.terr[kind]++
	case classUnfinished:
		st.c.Unfinished++
		tl.Errors++
	}
	if class <= classHTTPError {
		if status >= 100 && status < 600 {
			st.status[status]++
		} else {
			st.status[0]++
		}
		record(st.h.wait, sent-a.sched)
		record(st.h.req, done-sent)
		record(st.h.resp, done-a.sched)
		record(st.h.fb, first-sent)
		if class == classOK {
			record(st.h.okResp, done-a.sched)
		}
	}
	if len(st.phases) > 0 {
		pt := &st.phases[a.phase]
		pt.add(class)
		if class <= classHTTPError {
			record(pt.resp, done-a.sched)
			if class == classOK {
				record(pt.okResp, done-a.sched)
			}
		}
	}
	st.mu.Unlock()
	if class <= classHTTPError {
		a.win.lat.record(sec, done-a.sched, class == classOK)
	}
}

// envelope parses a refusal body, reusing the last parse when the body is
// the same (a gate sends the same bytes every time).
func (wk *worker) envelope(body []byte) (Envelope, bool) {
	if wk.lastBody != nil && bytes.Equal(body, wk.lastBody) {
		return wk.lastEnv, wk.lastOK
	}
	env, ok := ParseEnvelope(body)
	wk.lastBody = append(wk.lastBody[:0], body...)
	wk.lastEnv, wk.lastOK = env, ok
	return env, ok
}
