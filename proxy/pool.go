package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/upstream"
)

// pool is the set of upstream instances: an http.RoundTripper that sends
// each attempt to the next instance not ejected (round-robin), and ejects
// an instance after EjectAfter consecutive failures for EjectFor (passive
// health: no probes, the traffic is the probe). When every instance is
// ejected it sends to the one whose ejection ends first, rather than
// refusing: a whole pool marked down is more often the proxy's view than
// the truth, and the breaker above decides about the service as a whole.
//
// One mutex guards the cursor and the health records; it is held for a
// few comparisons per attempt, never while sending.
type pool struct {
	next       http.RoundTripper
	ejectAfter int
	ejectFor   time.Duration
	now        func() time.Time
	logger     *slog.Logger
	// headerTimeout bounds each attempt's wait for headers, idleTimeout
	// each wait for a piece of the body (0: none); lateFailure, when
	// set, is told of an answer that failed after its headers.
	headerTimeout, idleTimeout time.Duration
	lateFailure                func()
	// direct is sluice's own client when next is the default transport:
	// its attempts to http:// instances are direct (see attempt).
	direct *upstream.Client
	// realClock: now is time.Now, so a call's own deadline is one a
	// socket can take as it is.
	realClock bool

	mu      sync.Mutex
	members []*member
	cursor  int

	first atomic.Pointer[url.URL] // members[0]'s URL, read without mu
}

type member struct {
	url      *url.URL
	failures int       // consecutive, guarded by pool.mu
	until    time.Time // ejected until, guarded by pool.mu
	inflight int
	sent     uint64
	ejected  uint64
}

func newPool(urls []*url.URL, next http.RoundTripper, ejectAfter int, ejectFor time.Duration, now func() time.Time, logger *slog.Logger) *pool {
	p := &pool{next: next, ejectAfter: ejectAfter, ejectFor: ejectFor, now: now, logger: logger}
	if t, ok := next.(*transport); ok {
		p.direct = t.plain
	}
	p.setMembers(urls)
	return p
}

// base is the URL a request is rewritten for (the first instance's): its
// path prefixes every request's; the instance is chosen per attempt.
func (p *pool) base() *url.URL { return p.first.Load() }

// setMembers makes urls the instances. An instance already a member keeps
// its health record and counters; one no longer listed leaves the
// rotation, and its attempts in flight finish. urls is not empty.
func (p *pool) setMembers(urls []*url.URL) (added, removed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := make(map[string]*member, len(p.members))
	for _, m := range p.members {
		old[m.url.String()] = m
	}
	members := make([]*member, 0, len(urls))
	for _, u := range urls {
		m := old[u.String()]
		if m == nil {
			m = &member{url: u}
			added++
		}
		delete(old, u.String())
		members = append(members, m)
	}
	p.members, p.cursor = members, 0
	p.first.Store(urls[0])
	return added, len(old)
}

// pick chooses the instance for one attempt.
func (p *pool) pick() *member {
	var now time.Time // read when an instance was ever ejected
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.members)
	var soonest *member
	for i := range n {
		m := p.members[(p.cursor+i)%n]
		if !m.until.IsZero() && now.IsZero() {
			now = p.now()
		}
		if m.until.IsZero() || !m.until.After(now) {
			p.cursor = (p.cursor + i + 1) % n
			m.inflight++
			m.sent++
			return m
		}
		if soonest == nil || m.until.Before(soonest.until) {
			soonest = m
		}
	}
	soonest.inflight++
	soonest.sent++
	return soonest
}

// RoundTrip sends req to one instance. It does not modify req: the attempt
// is a shallow copy with the instance's scheme and host, and the attempt's
// own context (see attempt). The instance's health is recorded when the
// answer's body is closed, so that an answer whose body fails counts
// against it and the instance's inflight count lasts as long as the slot
// the answer holds.
func (p *pool) RoundTrip(req *http.Request) (*http.Response, error) {
	m := p.pick()
	direct := p.direct != nil && m.url.Scheme == "http"
	a := p.newAttempt(req.Context(), m, direct)
	out := req
	if !direct {
		out = req.WithContext(a.ctx)
		if a.fields != nil {
			out.Header = fieldsHeader(req.Header, a.fields)
		}
	}
	if req.URL.Host != m.url.Host || req.URL.Scheme != m.url.Scheme {
		// Another instance than the one the request was rewritten for
		// (the first). With one upstream this never happens. The Host
		// header stays what the rewrite made it: empty (the instance's
		// own) or, with PreserveHost, the client's.
		if out == req {
			cp := *req
			out = &cp
		}
		u := *req.URL
		u.Scheme, u.Host = m.url.Scheme, m.url.Host
		out.URL = &u
	}
	var resp *http.Response
	var err error
	if direct {
		resp, err = p.direct.RoundTripFields(out, a.fields, a.limits())
	} else {
		resp, err = p.next.RoundTrip(out)
	}
	a.gotHeaders()
	if err != nil {
		a.end()
		c := callOf(req.Context())
		switch {
		case c != nil && c.faulted() != nil:
			// The client's body broke the attempt: nothing against the
			// instance, and a cancellation to the retry policy, so that
			// neither the breaker nor throttling counts it.
			err = errClientFault
		case a.timedOut(err) && req.Context().Err() == nil:
			err = errHeaderTimeout
		}
		// A canceled caller (a client gone, or one whose body broke the
		// call) says nothing about the instance.
		p.record(m, !errors.Is(err, context.Canceled) && req.Context().Err() == nil)
		return nil, err
	}
	a.failed = resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout
	a.status = resp.StatusCode
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// A tunnel: its body is the connection, bounded by the tunnel's
		// own idle timeout, and the attempt's context must outlive it.
		p.record(m, a.failed)
		return resp, nil
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		a.end()
		p.record(m, a.failed)
		return resp, nil
	}
	a.rc = resp.Body
	resp.Body = a
	return resp, nil
}

// fieldsHeader is h with a call's fields added, for a transport that
// takes only a Header (net/http's, for https): a new map, and an empty
// User-Agent when none is among them, so that the transport adds none
// (as sluice's client adds none to a request with Fields).
func fieldsHeader(h http.Header, f *upstream.Fields) http.Header {
	out := h.Clone()
	if out == nil {
		out = make(http.Header)
	}
	f.AddTo(out)
	if _, ok := out["User-Agent"]; !ok {
		out["User-Agent"] = []string{""}
	}
	return out
}

func (p *pool) record(m *member, failed bool) {
	p.mu.Lock()
	m.inflight--
	if !failed {
		m.failures = 0
		p.mu.Unlock()
		return
	}
	m.failures++
	eject := p.ejectAfter > 0 && m.failures >= p.ejectAfter
	if eject {
		m.failures = 0
		m.until = p.now().Add(p.ejectFor)
		m.ejected++
	}
	p.mu.Unlock()
	if eject && p.logger != nil {
		p.logger.Warn("upstream ejected", "upstream", m.url.Host, "for", p.ejectFor)
	}
}

// UpstreamState is one instance's health, for /state.
type UpstreamState struct {
	URL      string `json:"url"`
	Healthy  bool   `json:"healthy"`
	Inflight int    `json:"inflight"`
	Sent     uint64 `json:"sent"`
	Ejected  uint64 `json:"ejections"`
	// Failures is the current run of consecutive failures.
	Failures int `json:"consecutive_failures"`
}

func (p *pool) state() []UpstreamState {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]UpstreamState, len(p.members))
	for i, m := range p.members {
		out[i] = UpstreamState{URL: m.url.String(), Healthy: !m.until.After(now), Inflight: m.inflight, Sent: m.sent, Ejected: m.ejected, Failures: m.failures}
	}
	return out
}

func (p *pool) closeIdle() {
	type idleCloser interface{ CloseIdleConnections() }
	if c, ok := p.next.(idleCloser); ok {
		c.CloseIdleConnections()
	}
}
