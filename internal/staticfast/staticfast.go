// Package staticfast puts package static's core on the engine's fast
// path: a GET or HEAD that static.Handler.Decide answers (a cache hit, a
// plain cold read, a disk-gate refusal, a 404 or 403) is written from
// the answer's rendered bytes, without an *http.Request; everything else
// goes to the engine's net/http bridge and static's ServeHTTP, so the
// rules are written once, in static.
package staticfast

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/static"
)

// Config configures a Fast.
type Config struct {
	// DeadlineHeader, if not empty, names a request header that makes a
	// request take the net/http path (where httpgate.Deadline turns it
	// into the request's deadline, or answers 400 when it is malformed).
	DeadlineHeader string
}

// Fast is an engine.FastHandler over a static.Handler.
type Fast struct {
	h        *static.Handler
	deadline string
	refusals engine.Refusals
}

// New returns the fast path for h.
func New(h *static.Handler, cfg Config) *Fast {
	return &Fast{h: h, deadline: http.CanonicalHeaderKey(cfg.DeadlineHeader)}
}

// ReadLoop reports that ServeFast may run inside the engine's read
// loop: it writes its answers at once and passes the rest (which the
// engine then serves outside the loop).
func (f *Fast) ReadLoop() bool { return true }

// ServeFast answers what static's core decides, and passes the rest.
func (f *Fast) ServeFast(w *engine.Response, r *engine.Request) bool {
	p, ok := r.Path()
	if !ok || f.deadline != "" && r.Has(f.deadline) {
		return false
	}
	a := f.h.Decide(static.Request{Method: r.Method(), Path: p, Header: r})
	switch a.Kind() {
	case static.AnswerFile, static.AnswerError:
		w.Write(a.Status(), a.Header(), a.Body())
	case static.AnswerRefusal:
		f.refusals.Write(w, a.Err())
	default:
		return false
	}
	return true
}
