package proxy

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/hfield"
	"github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/retry"
)

// Native forwarding: an admitted request the engine parsed goes to the
// upstream without the net/http bridge and without
// httputil.ReverseProxy. The outbound request is built from the parsed
// head (the hop-by-hop fields dropped as ReverseProxy drops them, the
// forwarding headers' values by forwarded, the Host rule of rewrite),
// its fields a list in the client's order (upstream.Fields), sent under
// the same retry policy and through the same pool as the bridged path (the
// retry policy, the breaker, the retry budget, balancing, passive
// health, the attempt's header and body idle timeouts, the call's
// deadline and the deadline header), and the upstream's answer is
// streamed back through engine.Stream, whose head rules are the
// bridge's own. An ordinary answer's fields come from the client as a
// list (upstream.Limits.Answer) and go to the client in the upstream's
// order (engine.Response.StreamList), as nginx forwards them, with no
// http.Header built; an error answer keeps its Header, which the retry
// policy reads and writes, and goes out in name order as on the bridge. A failed call is answered by upstreamError, as on the
// bridge.
//
// The client is watched only while the upstream is slow: the engine
// starts its read for the client's end after clientWatchDelay of
// waiting for the upstream's head (a read and a goroutine per request
// otherwise, most of the cost of a fast answer), and a client that
// leaves while the answer streams is seen by the failed write.

// clientWatchDelay is how long the native path waits on the upstream's
// head before it watches for the client leaving: a client gone sooner
// is noticed when its answer is written. Short beside a person's
// patience and a slow upstream's time, long beside a fast answer.
const clientWatchDelay = 10 * time.Millisecond

// native reports whether the admitted request r can be forwarded
// natively: what the native path does exactly as the bridged one. The
// rest goes to the bridge: a request with a body or an expectation
// (bodies are framed and watched by the bridge's reader), HTTP/1.0 (its
// keep-alive rules), a stale store (its capture needs the inbound
// *http.Request), a Transport from the library's user, and an upstream
// URL with a path or a query to join.
func (f *fastPath) native(r *engine.Request) bool {
	p := f.p
	if f.noNative || p.stale != nil || p.cfg.Transport != nil {
		return false
	}
	if r.HasBody() || r.ProtoMinor() != 1 || r.Has("Expect") || r.Has("Transfer-Encoding") {
		return false
	}
	b := p.pool.base()
	return (b.Path == "" || b.Path == "/") && b.RawPath == "" && b.RawQuery == "" && !b.ForceQuery
}

// forwardNative forwards an admitted request natively (see native) and
// releases adm with the answer's outcome.
func (f *fastPath) forwardNative(w *engine.Response, r *engine.Request, adm httpgate.Admission, qa httpgate.QuotaAnswer, rt *route) {
	p := f.p
	f.nativeCalls.Add(1)
	nc := &nativeCall{}
	ctx := &nc.ctx
	cancel := ctx.cancel
	defer cancel()
	nc.call = call{Context: ctx, route: rt, answer: &nc.answer}
	c := &nc.call
	if p.cfg.CallTimeout > 0 {
		start := w.Received() // the call's time counts from its arrival
		if !p.pool.realClock {
			start = p.now()
		}
		c.own = start.Add(p.cfg.CallTimeout)
	}
	var tmpl http.Request
	ferr := p.nativeRequest(&tmpl, r, nc)
	out := tmpl.WithContext(c)

	w.WatchClient(clientWatchDelay, cancel)
	released := false
	defer func() {
		if !released {
			// A panic is unwinding (the engine logs it and closes the
			// connection): the slots end with it, as under the holder.
			w.Unwatch()
			adm.Release(admit.OutcomePanic)
		}
	}()
	var resp *http.Response
	err := ferr // a field the client would refuse: not sent, nothing against the upstream
	if err == nil {
		// The retry policy as on the bridge (its Transport), each
		// attempt's deadline header written in the call's own fields
		// instead of a copy of the request and its header.
		resp, err = p.policy.RoundTripWith(out, func(_ int, to retry.Timeout) (*http.Response, error) {
			nc.attemptFields(to)
			return p.pool.RoundTrip(out)
		})
	}
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		// Nothing asked for an upgrade (ReverseProxy's modifyResponse
		// refuses it the same way).
		resp.Body.Close()
		resp, err = nil, errors.New("proxy: the upstream switched protocols unasked")
	}
	if err != nil {
		st := w.Stream(nil)
		setQuotaHeaders(st, qa)
		p.upstreamError(streamDeadlineWriter(&nc.dw, st, p.cfg.SendTimeout), out, err)
		w.Unwatch()
		w.End()
		released = true
		adm.Release(nativeOutcome(ctx, st.Status(), false))
		return
	}
	var st *engine.Stream
	var contentType string
	announced := len(resp.Trailer)
	if resp.Header == nil {
		// The client listed the fields instead (an ordinary answer, no
		// trailers announced: upstream.Limits.Answer): forwarded in
		// their order, no map built.
		l := &nc.answer
		removeHopByHopList(l)
		if qa.Policy != "" {
			// Before the upstream's own values, as on the map below.
			if qa.RateLimit != "" {
				l.Prepend("RateLimit", qa.RateLimit)
			}
			l.Prepend("RateLimit-Policy", qa.Policy)
		}
		contentType = l.Get("Content-Type")
		st = w.StreamList(l)
	} else {
		h := resp.Header
		removeHopByHop(h)
		if qa.Policy != "" {
			// Before the upstream's own values, as ReverseProxy's copy of
			// the answer's header after them.
			h["RateLimit-Policy"] = append([]string{qa.Policy}, h["RateLimit-Policy"]...)
			if qa.RateLimit != "" {
				h["RateLimit"] = append([]string{qa.RateLimit}, h["RateLimit"]...)
			}
		}
		if announced > 0 {
			keys := make([]string, 0, announced)
			for k := range resp.Trailer {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			h.Add("Trailer", strings.Join(keys, ", "))
		}
		if vv := h["Content-Type"]; len(vv) > 0 {
			contentType = vv[0]
		}
		st = w.Stream(h)
	}
	dst := streamDeadlineWriter(&nc.dw, st, p.cfg.SendTimeout)
	dst.WriteHeader(resp.StatusCode)
	flush := flushEach(resp.ContentLength, contentType)
	if flush {
		// The head goes out at once, before a body that may be slow to
		// come (ReverseProxy's first flush).
		flushWriter(dst)
	}
	ok := p.copyAnswer(dst, st, resp, flush)
	resp.Body.Close() // the instance's health is recorded here
	if !ok {
		if st.Failed() {
			cancel() // the client is gone: nobody reads the rest
		}
		w.Unwatch()
		w.Abort()
		released = true
		adm.Release(nativeOutcome(ctx, resp.StatusCode, c.upstreamFailed.Load()))
		return
	}
	if len(resp.Trailer) > 0 {
		flushWriter(dst)
		h := st.Header() // what the engine writes the trailers from
		if len(resp.Trailer) == announced {
			for k, vv := range resp.Trailer {
				h[k] = append(h[k], vv...)
			}
		} else {
			for k, vv := range resp.Trailer {
				k = http.TrailerPrefix + k
				h[k] = append(h[k], vv...)
			}
		}
	}
	w.Unwatch()
	w.End()
	if st.Failed() {
		cancel() // the client is gone: nobody read the answer
	}
	released = true
	adm.Release(nativeOutcome(ctx, resp.StatusCode, false))
}

// nativeOutcome is the outcome of a natively forwarded call, the rule
// the bridged path's holder applies: canceled when the client went away,
// an error for a 5xx or an upstream that failed midway, else ok.
func nativeOutcome(ctx context.Context, status int, upstreamFailed bool) admit.Outcome {
	if o, ok := abortOutcome(false, ctx.Err() != nil, upstreamFailed); ok {
		return o
	}
	if status >= 500 {
		return admit.OutcomeError
	}
	return admit.OutcomeOK
}

// flushEach reports whether every piece of the answer is sent as it
// comes, ReverseProxy's rule: a body of unknown length, or server-sent
// events.
func flushEach(contentLength int64, ct string) bool {
	if contentLength == -1 {
		return true
	}
	const sse = "text/event-stream"
	if len(ct) < len(sse) || !strings.EqualFold(strings.TrimSpace(ct)[:min(len(sse), len(strings.TrimSpace(ct)))], sse) {
		return false // not worth parsing (ParseMediaType allocates)
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == sse
}

// flushWriter flushes w (the Stream, or the send deadline's writer
// around it).
func flushWriter(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// copyAnswer streams the answer's body to dst (st, or the send
// deadline's writer around it). It reports false when the
// copy failed, on either side: the answer cannot be completed.
func (p *Proxy) copyAnswer(dst http.ResponseWriter, st *engine.Stream, resp *http.Response, flush bool) bool {
	buf := p.rp.BufferPool.Get()
	defer p.rp.BufferPool.Put(buf)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
			if flush {
				flushWriter(dst)
				if st.Failed() {
					return false
				}
			}
		}
		if rerr == io.EOF {
			return true
		}
		if rerr != nil {
			return false
		}
	}
}

// hopByHop are the fields that describe one connection, never forwarded
// either way (RFC 9110 section 7.6.1; the list httputil.ReverseProxy
// drops).
var hopByHop = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopByHop drops an answer's hop-by-hop fields and those its
// Connection field names.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				delete(h, http.CanonicalHeaderKey(tok))
			}
		}
	}
	// One pass over the answer's few names, not a hashed delete for
	// each of the nine.
	for k := range h {
		if slices.Contains(hopByHop[:], k) {
			delete(h, k)
		}
	}
}

// removeHopByHopList is removeHopByHop for an answer's fields as a
// list.
func removeHopByHopList(l *hfield.List) {
	var named [4]string // the names Connection lists: rarely any
	extra := named[:0]
	for _, f := range l.All() {
		if f.Name != "Connection" {
			continue
		}
		for tok := range strings.SplitSeq(f.Value, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				extra = append(extra, http.CanonicalHeaderKey(tok))
			}
		}
	}
	l.DeleteFunc(func(f hfield.Field) bool {
		return slices.Contains(hopByHop[:], f.Name) || slices.Contains(extra, f.Name)
	})
}

// nativeCall is a natively forwarded call with the storage of its
// outbound request's URL, strings and header fields, of the send
// deadline's writer and of its context: one allocation for them all.
type nativeCall struct {
	call
	ctx    callCtx
	url    url.URL
	fields upstream.Fields
	answer hfield.List // the answer's fields (call.answer)
	dw     deadlineWriter
	// The bytes of the outbound request's target and host, then of its
	// fields' lines (nativeRequest), when they fit; and those of its
	// forwarding headers' values (forwarded) before they are added. The
	// strings over them are written once, before the string exists.
	arena [nativeArena]byte
	fwd   [nativeForwarded]byte
	// fieldsLen is the fields' length without an attempt's deadline
	// header, whose value is formatted in timeout.
	fieldsLen int
	timeout   [24]byte
}

// attemptFields writes an attempt's deadline header as the call's last
// field, in place of the previous attempt's (see retry.RoundTripWith).
func (nc *nativeCall) attemptFields(to retry.Timeout) {
	f := &nc.fields
	f.Truncate(nc.fieldsLen)
	if to.Set {
		b := retry.AppendTimeout(nc.timeout[:0], to.Left)
		// A view of the bytes, read only by Add, which copies them.
		_ = f.Add(httpgate.DefaultDeadlineHeader, unsafe.String(unsafe.SliceData(b), len(b)))
	}
}

// nativeArena and nativeForwarded size a nativeCall's byte storage: the
// head of an API client or a load tester (a few short fields) and the
// forwarding values of a client without a trusted chain fit; larger
// ones take a buffer of their own.
const (
	nativeArena     = 512
	nativeForwarded = 128
)

// nativeRequest fills out with the outbound request for r, as
// ReverseProxy with rewrite builds it from the bridged request: the
// client's fields but the hop-by-hop ones (and those Connection names),
// the inbound forwarding headers and the deadline header; "Te:
// trailers" kept when asked; the forwarding headers written by
// forwarded; no User-Agent added; the upstream's Host unless
// PreserveHost. The fields go in nc.fields, in the client's order with
// the forwarding headers last, as the lines the upstream client writes
// (upstream.Fields): no http.Header is built, and the client checks
// them once, here, not on each try. Only the idempotency keys, which the
// retry policy and the client's replay rule read, are in out.Header (nil
// without them). Its strings are copies: r's views end at Unwatch. Its
// URL and fields live in nc. An error is a field the client would
// refuse to send.
func (p *Proxy) nativeRequest(out *http.Request, r *engine.Request, nc *nativeCall) error {
	var connection []string // Connection's tokens, as sent
	teTrailers := false
	for i := range r.Fields() {
		name, value := r.Field(i)
		switch {
		case strings.EqualFold(name, "Connection"):
			for tok := range strings.SplitSeq(value, ",") {
				if tok = strings.TrimSpace(tok); tok != "" {
					connection = append(connection, tok)
				}
			}
		case strings.EqualFold(name, "Te"):
			for tok := range strings.SplitSeq(value, ",") {
				if strings.EqualFold(strings.TrimSpace(tok), "trailers") {
					teTrailers = true
				}
			}
		}
	}
	// One string holds the target and the host; the fields' lines
	// follow them in the same storage.
	arena := nc.arena[:0] // written once, then frozen: the strings may share it
	if n := len(r.Target()) + len(r.Host()); n > len(nc.arena)/2 {
		arena = make([]byte, 0, n)
	}
	arena = append(arena, r.Target()...)
	arena = append(arena, r.Host()...)
	s := frozen(arena)
	target, host := s[:len(r.Target())], s[len(r.Target()):]
	f := &nc.fields
	f.Reset(arena[len(arena):cap(arena)])
	var hdr http.Header
	for i := range r.Fields() {
		name, value := r.Field(i)
		if droppedOutbound(name, connection) {
			continue
		}
		if strings.EqualFold(name, idempotencyKeyHeader) || strings.EqualFold(name, "X-Idempotency-Key") {
			if hdr == nil {
				hdr = make(http.Header, 1)
			}
			k := http.CanonicalHeaderKey(name)
			hdr[k] = append(hdr[k], strings.Clone(value))
			continue
		}
		if err := f.AddCanonical(name, value); err != nil {
			return err
		}
	}
	if teTrailers {
		_ = f.Add("Te", "trailers")
	}
	fv := p.forwarded(engineInbound{r}, host, nc.fwd[:])
	for _, kv := range [...][2]string{{headerXFF, fv.xff}, {headerXFHost, fv.host}, {headerXFProto, fv.proto}, {headerForwarded, fv.fwd}} {
		if kv[1] == "" {
			continue
		}
		if err := f.Add(kv[0], kv[1]); err != nil {
			return err // a trusted proxy's chain the client would refuse
		}
	}

	base := p.pool.base()
	u := &nc.url
	*u = url.URL{Scheme: base.Scheme, Host: base.Host}
	path, query, hasQuery := strings.Cut(target, "?")
	// RawPath as sent: the target holds no percent-escape (engine's
	// Path), so EscapedPath gives what net/http's parsed URL gives.
	u.Path, u.RawPath, u.RawQuery, u.ForceQuery = path, path, query, hasQuery && query == ""
	*out = http.Request{
		Method: methodString(r.Method()), URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hdr, RemoteAddr: r.RemoteAddrString(),
	}
	if p.cfg.PreserveHost {
		out.Host = host
	}
	nc.call.fields = f
	nc.fieldsLen = f.Len()
	return nil
}

// droppedOutbound reports whether the client's field name (as sent) is
// not forwarded: Host and Content-Length (the outbound request has its
// own Host and framing), a hop-by-hop field or one Connection names, an
// inbound forwarding header (replaced by forwarded's), and the deadline
// header (the retry policy sends what is left of the deadline instead).
func droppedOutbound(name string, connection []string) bool {
	for _, k := range [...]string{"Host", "Content-Length", headerXFF, headerXFHost, headerXFProto, headerForwarded, httpgate.DefaultDeadlineHeader} {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	for _, k := range hopByHop {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	for _, k := range connection {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	return false
}

// engineInbound is the engine's parsed head as an inbound.
type engineInbound struct{ r *engine.Request }

func (e engineInbound) peer() (netip.Addr, uint16, bool) {
	if ap, ok := e.r.RemoteAddrPort(); ok {
		return ap.Addr().Unmap().WithZone(""), ap.Port(), true
	}
	return peerAddr(e.r.RemoteAddrString()) // not ip:port: as the bridge reads it
}
func (e engineInbound) secure() bool { return false } // the engine serves cleartext only

// values copies the values (only a trusted peer's chain is read): they
// may end up in the outbound header, which outlives r's views.
func (e engineInbound) values(name string) []string {
	if !e.r.Has(name) {
		return nil
	}
	vs := e.r.Values(name)
	for i, v := range vs {
		vs[i] = strings.Clone(v)
	}
	return vs
}

// methodString returns the method as a string of its own: a constant
// for the common ones, else a copy.
func methodString(m string) string {
	for _, k := range [...]string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete, http.MethodTrace} {
		if m == k {
			return k
		}
	}
	return strings.Clone(m)
}
