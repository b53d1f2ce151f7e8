package engine

import (
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// maxCachedRetryAfter bounds the Retry-After values whose refusals are
// kept rendered; larger ones (rare: a long backlog) are rendered each
// time.
const maxCachedRetryAfter = 64

// Refusals writes gate refusals on the fast path, each rendered once per
// gate, reason and Retry-After value by httpgate.AppendRefusal (the
// bytes httpgate.WriteRefusal writes through net/http) and kept. The
// zero value is ready; it is safe for concurrent use.
type Refusals struct {
	// Extra, if not nil, returns header lines ("Name: value\r\n" each)
	// added to every refusal of the named gate with that Retry-After (a
	// quota's RateLimit headers, say). What it returns is kept with the
	// rendering: call Reset when it would return something else.
	Extra func(gate string, retryAfter int) []byte

	cache atomic.Pointer[map[refusalKey]*rendered] // copy on write
	mu    sync.Mutex                               // serialises writers of cache
}

// Reset forgets every rendering (after what Extra returns changed).
func (f *Refusals) Reset() {
	f.mu.Lock()
	f.cache.Store(nil)
	f.mu.Unlock()
}

type refusalKey struct {
	gate   string
	reason admit.Reason
	retry  int
}

type rendered struct {
	status       int
	header, body []byte
	close        bool
}

// Write answers w with the refusal err (a *admit.RejectedError, or any
// other error as a 500).
func (f *Refusals) Write(w *Response, err error) {
	re, ok := err.(*admit.RejectedError)
	if !ok || re.RetryAfterSeconds() > maxCachedRetryAfter {
		f.write(w, f.render(err))
		return
	}
	k := refusalKey{re.Gate(), re.Reason(), re.RetryAfterSeconds()}
	if m := f.cache.Load(); m != nil {
		if r, ok := (*m)[k]; ok {
			f.write(w, r)
			return
		}
	}
	r := f.render(err)
	f.mu.Lock()
	old := f.cache.Load()
	m := make(map[refusalKey]*rendered, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = r
	f.cache.Store(&m)
	f.mu.Unlock()
	f.write(w, r)
}

// WriteWith answers w with the refusal err plus the header lines extra,
// rendered for this answer only (extra varies from one refusal to the
// next: a quota's remaining tokens, say).
func (f *Refusals) WriteWith(w *Response, err error, extra []byte) {
	r := f.render(err)
	r.header = append(r.header, extra...)
	f.write(w, r)
}

func (f *Refusals) render(err error) *rendered {
	status, header, body, closeConn := httpgate.AppendRefusal(nil, err)
	if re, ok := err.(*admit.RejectedError); ok && f.Extra != nil {
		header = append(header, f.Extra(re.Gate(), re.RetryAfterSeconds())...)
	}
	return &rendered{status, header, body, closeConn}
}

func (f *Refusals) write(w *Response, r *rendered) {
	if r.close {
		w.Close()
	}
	w.Write(r.status, r.header, r.body)
}
