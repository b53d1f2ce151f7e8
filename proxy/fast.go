package proxy

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/engine"
)

// FastPath returns the proxy's decisions for sluice's HTTP/1.1 engine:
// pass it as server.Config.Fast, with FastBodies. For every request the
// engine parsed, before any *http.Request exists, it takes the decisions
// ServeHTTP takes, with the same rules: the route (the first whose host,
// methods and path prefix match), the route's quota (the same key and
// bucket), and the route's gate and the upstream gate, each tried
// without waiting. Then:
//
//   - a refusal is written from bytes rendered once per gate, reason and
//     Retry-After (httpgate.AppendRefusal: the answer WriteRefusal
//     writes; a quota's carries its RateLimit headers);
//   - an admitted request without a body is forwarded natively (see
//     native.go): no *http.Request for it, no ReverseProxy, no
//     background read, the same retry transport, pool and answer rules;
//     its slots are released with the answer's outcome;
//   - another admitted request goes through the engine's net/http bridge
//     to the forwarding ServeHTTP would do (ReverseProxy, retries,
//     breaker, balancing, the call's deadlines, trailers, stale copies),
//     its slots handed to the request's holder (httpgate.ServeAdmitted),
//     which releases them with the answer's outcome;
//   - a request the fast path does not decide goes to ServeHTTP whole:
//     an upgrade, a Request-Timeout (whose deadline must bound a queued
//     wait), a gate with a queue (a request may wait in it, which needs
//     the request's context; every gate that orders requests by class
//     has one), a target that is not a plain path, and a refusal that a
//     stale copy may answer.
//
// So a refusal, most of what an overloaded proxy answers, costs the
// parse, the decision and one write: no request, context, header map or
// goroutine.
func (p *Proxy) FastPath() engine.FastHandler {
	f := &fastPath{p: p}
	f.refusals.Extra = f.quotaHeader
	return f
}

type fastPath struct {
	p        *Proxy
	refusals engine.Refusals
	// table is the route table the kept refusals were rendered for: a
	// Reload may change a quota's RateLimit-Policy.
	table atomic.Pointer[[]*route]
	// nativeCalls counts the requests forwarded natively (native.go);
	// noNative sends every admitted request through the bridge (tests
	// and benchmarks compare the two).
	nativeCalls atomic.Uint64
	noNative    bool
}

// ServeFast decides r (see FastPath).
func (f *fastPath) ServeFast(w *engine.Response, r *engine.Request) bool {
	p := f.p
	path, ok := r.Path()
	if !ok || r.Has("Upgrade") || r.Has(httpgate.DefaultDeadlineHeader) {
		return false
	}
	if t := p.table.Load(); f.table.Load() != t {
		f.refusals.Reset()
		f.table.Store(t)
	}
	rt := p.matchParts(r.Host(), r.Method(), path)
	// The gates in the order ServeHTTP takes them: the route's own, then
	// the upstream gate (Cost slots), or the upstream gate alone.
	first, second := p.upstream, (*gateSet)(nil)
	weight := int64(1)
	if rt != nil {
		weight = int64(rt.Cost)
		if rt.gates != nil {
			first = rt.gates
			if !rt.Streaming {
				second = p.upstream
			}
		}
	}
	// A gate with a queue (every gate that orders its requests by class
	// has one, so classes never reach the fast path): the request may
	// wait, under its context, which ServeHTTP has.
	if first.queued || second != nil && second.queued {
		return false
	}
	var qa httpgate.QuotaAnswer
	if rt != nil && rt.rule != nil {
		var err error
		qa, err = rt.rule.Decide(context.Background(), rt.key(r.RemoteAddrString(), r), rt.Cost)
		if err != nil {
			f.refusals.Write(w, err) // 429 with its RateLimit headers (Extra)
			return true
		}
	}
	firstReq := admit.Request{Weight: weight}
	if second != nil {
		firstReq.Weight = 1 // a route's own gate: one slot; Cost is the upstream gate's
	}
	adm, err := p.mw.TryAdmit(first.gate, firstReq)
	if err == nil && second != nil {
		if err = adm.TryAcquire(second.gate, admit.Request{Weight: weight}); err != nil {
			if f.staleMayAnswer(r, err) {
				w.ContinueWith(&refusedHandler{p: p, adm: adm, err: err, qa: qa})
				return true
			}
			// As ServeHTTP records it: the route's slot ends with the
			// refusal's 503.
			adm.Release(admit.OutcomeError)
		}
	}
	if err != nil {
		if f.staleMayAnswer(r, err) {
			w.ContinueWith(&refusedHandler{p: p, err: err, qa: qa})
			return true
		}
		if qa.Policy != "" {
			f.refusals.WriteWith(w, err, quotaLines(qa))
			return true
		}
		f.refusals.Write(w, err)
		return true
	}
	if f.native(r) {
		f.forwardNative(w, r, adm, qa, rt)
		return true
	}
	w.ContinueWith(&admittedHandler{p: p, rt: rt, adm: adm, qa: qa})
	return true
}

// ReadLoop reports that ServeFast may run inside the engine's read
// loop: what goes through the bridge it hands over with ContinueWith.
// A natively forwarded request stays in the loop (its watch for the
// client looks at the socket there instead of reading it).
func (f *fastPath) ReadLoop() bool { return true }

// staleMayAnswer reports whether a stale copy could answer this refusal
// instead (ServeHTTP's refuseOrStale decides, through the bridge).
func (f *fastPath) staleMayAnswer(r *engine.Request, err error) bool {
	if f.p.stale == nil {
		return false
	}
	if m := r.Method(); m != http.MethodGet && m != http.MethodHead {
		return false
	}
	re, ok := err.(*admit.RejectedError)
	return ok && re.Reason().Overload()
}

// quotaHeader is the refusals' Extra: a quota's refusal carries its
// RateLimit-Policy and RateLimit headers, as httpgate.Quota writes them.
func (f *fastPath) quotaHeader(gate string, retry int) []byte {
	for _, rt := range f.p.routes() {
		if rt.rule != nil && rt.QuotaName() == gate {
			return quotaLines(httpgate.QuotaAnswer{Policy: rt.rule.Policy(), RateLimit: rt.rule.RefusedRateLimit(retry)})
		}
	}
	return nil
}

// quotaLines renders a quota's RateLimit headers as header lines.
func quotaLines(a httpgate.QuotaAnswer) []byte {
	if a.Policy == "" {
		return nil
	}
	b := make([]byte, 0, 64)
	b = append(b, "RateLimit-Policy: "...)
	b = append(b, a.Policy...)
	b = append(b, "\r\n"...)
	if a.RateLimit != "" {
		b = append(b, "RateLimit: "...)
		b = append(b, a.RateLimit...)
		b = append(b, "\r\n"...)
	}
	return b
}

// setQuotaHeaders adds a quota's RateLimit headers to an answer, as
// httpgate.Quota does.
func setQuotaHeaders(w http.ResponseWriter, a httpgate.QuotaAnswer) {
	if a.Policy == "" {
		return
	}
	h := w.Header()
	h.Add("RateLimit-Policy", a.Policy)
	if a.RateLimit != "" {
		h.Add("RateLimit", a.RateLimit)
	}
}

// admittedHandler serves a request the fast path admitted: on the
// bridge, under the request's holder, the forwarding ServeHTTP does.
type admittedHandler struct {
	p   *Proxy
	rt  *route
	adm httpgate.Admission
	qa  httpgate.QuotaAnswer
}

func (a *admittedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setQuotaHeaders(w, a.qa)
	a.p.mw.ServeAdmitted(w, r, (*forwarder)(a), a.adm)
}

// forwarder is the admitted request's forwarding.
type forwarder admittedHandler

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.p.forward(w, r, f.rt) }

// refusedHandler answers a refusal that a stale copy may answer instead,
// as ServeHTTP does; adm is what the request held when it was refused
// (the route's slot), ended with the answer's outcome.
type refusedHandler struct {
	p   *Proxy
	adm httpgate.Admission
	err error
	qa  httpgate.QuotaAnswer
}

func (h *refusedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setQuotaHeaders(w, h.qa)
	if h.adm == (httpgate.Admission{}) {
		h.p.refuseOrStale(w, r, h.err)
		return
	}
	h.p.mw.ServeAdmitted(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.p.refuseOrStale(w, r, h.err)
	}), h.adm)
}
