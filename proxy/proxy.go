package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/quotakey"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
	"github.com/sluicehq/sluice/retry"
)

// Proxy is the gated reverse proxy: an http.Handler. Create one with New;
// the zero Proxy is not usable. Safe for concurrent use. Close it after
// the server that uses it has shut down.
type Proxy struct {
	cfg      Config
	logger   *slog.Logger
	now      func() time.Time
	unrouted http.Handler // requests no route takes: classified, then admitted
	upstream *gateSet
	routes   []*route
	breaker  *breaker.Breaker
	policy   *retry.Policy
	pool     *pool
	stale    *staleStore
	rp       *httputil.ReverseProxy
	refusals refusalCounts
}

// route is a Route made live.
type route struct {
	Route
	host    string // lower-case, port-less
	gates   *gateSet
	quota   routeLimiter // nil without a quota
	fleet   *redisquota.Quota
	handler http.Handler
}

// routeLimiter is a route's quota, local or fleet.
type routeLimiter interface {
	quota.Limiter
	Stats() quota.Stats
}

// gateSet is a gate, the adaptive limit moving it (nil when fixed) and
// the queue rules it was built with (for /state).
type gateSet struct {
	gate     *admit.Gate
	adaptive *limit.Adaptive
	queueing Queueing
	shares   admit.ClassShares
	classify func(http.Handler) http.Handler // nil without a priority header
}

// classified is h behind classify, the middleware that puts the class
// from a priority header in the request's context (none: h alone).
func classified(classify func(http.Handler) http.Handler, h http.Handler) http.Handler {
	if classify == nil {
		return h
	}
	return classify(h)
}

// ctxKey carries the matched route to the ReverseProxy's hooks.
type ctxKey struct{}

// New builds a Proxy. Configuration errors wrap ErrInvalidConfig.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, fmt.Errorf("%w: no upstream", ErrInvalidConfig)
	}
	for _, u := range cfg.Upstreams {
		if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("%w: upstream %v: want http://host:port or https://host:port", ErrInvalidConfig, u)
		}
		// The instances of one service share one path prefix: the
		// request is rewritten once, the instance chosen per attempt.
		if u.Path != cfg.Upstreams[0].Path {
			return nil, fmt.Errorf("%w: upstream %v: every upstream needs the same path as %v", ErrInvalidConfig, u, cfg.Upstreams[0])
		}
	}
	if cfg.MaxInflight < 0 || cfg.MaxInflight > admit.MaxCapacity {
		return nil, fmt.Errorf("%w: MaxInflight %d: want 0 (default) to %d", ErrInvalidConfig, cfg.MaxInflight, admit.MaxCapacity)
	}
	if cfg.MaxInflight == 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.Queue < 0 || cfg.MaxWait < 0 {
		return nil, fmt.Errorf("%w: Queue and MaxWait: want 0 or more", ErrInvalidConfig)
	}
	if err := cfg.Limit.check(cfg.MaxInflight); err != nil {
		return nil, fmt.Errorf("%w: upstream limit: %v", ErrInvalidConfig, err)
	}
	if err := checkRoutes(cfg.Routes); err != nil {
		return nil, err
	}
	cfg.HeaderTimeout = orDefault(cfg.HeaderTimeout, DefaultHeaderTimeout)
	cfg.BodyTimeout = orDefault(cfg.BodyTimeout, DefaultBodyTimeout)
	cfg.SendTimeout = orDefault(cfg.SendTimeout, DefaultSendTimeout)
	if cfg.EjectAfter == 0 {
		cfg.EjectAfter = DefaultEjectAfter
	}
	if cfg.EjectFor <= 0 {
		cfg.EjectFor = DefaultEjectFor
	}
	if cfg.StaleEntries <= 0 {
		cfg.StaleEntries = DefaultStaleEntries
	}
	if cfg.StaleMaxBytes <= 0 {
		cfg.StaleMaxBytes = DefaultStaleMaxBytes
	}
	p := &Proxy{cfg: cfg, logger: cfg.Logger, now: cfg.Now}
	if p.now == nil {
		p.now = time.Now
	}
	var err error
	if p.upstream, err = newGateSet(GateUpstream, cfg.MaxInflight, cfg.Queue, cfg.MaxWait, cfg.Limit, cfg.Queueing, cfg.Observer, cfg.Logger); err != nil {
		return nil, err
	}
	// HeaderDeadline: the client's Request-Timeout becomes the request's
	// deadline, so time queued here counts against it and the upstream
	// is sent what is left.
	mw, err := httpgate.New(httpgate.Config{HeaderDeadline: true, Refusal: p.refuseOrStale, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	p.unrouted = classified(p.upstream.classify, p.admission(mw, nil))
	for _, rc := range cfg.Routes {
		rt := &route{Route: rc, host: strings.ToLower(rc.Host)}
		rt.Cost = max(rt.Cost, 1)
		// A request's class comes from its route's priority header, or
		// else from the upstream gate's.
		classify := p.upstream.classify
		if rc.MaxInflight > 0 {
			if rt.gates, err = newGateSet(rc.Name, rc.MaxInflight, rc.Queue, time.Duration(rc.MaxWait), rc.Limit, rc.Queueing, cfg.Observer, cfg.Logger); err != nil {
				return nil, err
			}
			if rt.gates.classify != nil {
				classify = rt.gates.classify
			}
		}
		rt.handler = classified(classify, p.admission(mw, rt))
		if q := rc.Quota; q != nil {
			if err := p.newRouteQuota(rt); err != nil {
				return nil, fmt.Errorf("%w: route %q: %v", ErrInvalidConfig, rc.Name, err)
			}
			name, _ := quotakey.Parse(q.Key) // checked: "" (and "ip") key on the client's address
			key := httpgate.KeyClientIP(cfg.TrustedProxies)
			if name != "" {
				key = httpgate.KeyHeader(name)
			}
			cost := rt.Cost
			if rt.handler, err = httpgate.Quota(httpgate.QuotaConfig{
				Limiter: rt.quota, Key: key,
				Cost: func(*http.Request) int { return cost },
				// The default refusal: the quota's Stats count it (see
				// QuotaStats), so p.refuse must not count it again.
			}, rt.handler); err != nil {
				return nil, fmt.Errorf("%w: route %q: %v", ErrInvalidConfig, rc.Name, err)
			}
		}
		p.routes = append(p.routes, rt)
	}
	if !cfg.NoBreaker {
		bc := cfg.Breaker
		bc.Name = GateBreaker
		if bc.Logger == nil {
			bc.Logger = cfg.Logger
		}
		if p.breaker, err = breaker.New(bc); err != nil {
			return nil, fmt.Errorf("%w: breaker: %v", ErrInvalidConfig, err)
		}
	}
	attempts := cfg.MaxAttempts
	if attempts < 0 {
		attempts = 1
	}
	p.policy, err = retry.New(retry.Config{
		Name:                 GateUpstream,
		MaxAttempts:          attempts,
		Breaker:              p.breaker,
		DeadlineHeader:       httpgate.DefaultDeadlineHeader,
		IdempotencyKeyHeader: idempotencyKeyHeader,
		Logger:               cfg.Logger,
		Now:                  cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: retry: %v", ErrInvalidConfig, err)
	}
	next := cfg.Transport
	if next == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.HeaderTimeout > 0 {
			t.ResponseHeaderTimeout = cfg.HeaderTimeout
		}
		t.MaxIdleConnsPerHost = max(100, int(cfg.MaxInflight))
		next = t
	}
	p.pool = newPool(cfg.Upstreams, next, cfg.EjectAfter, cfg.EjectFor, p.now, cfg.Logger)
	if cfg.StaleIfError > 0 {
		p.stale = newStaleStore(cfg.StaleEntries, cfg.StaleMaxBytes, cfg.StaleIfError, p.now)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      &retry.Transport{Policy: p.policy, Next: p.pool},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       log.New(io.Discard, "", 0),
		BufferPool:     new(bufferPool),
	}
	if cfg.Logger != nil {
		p.rp.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)
	}
	return p, nil
}

// newRouteQuota builds rt's quota: a fleet quota from the template when
// the route's scope asks for one (or leaves it to the proxy and the proxy
// has one), else a local one.
func (p *Proxy) newRouteQuota(rt *route) error {
	q := rt.Quota
	qc := quota.Config{Name: rt.Name + quotaSuffix, Rate: q.Rate, Burst: q.Burst, MaxKeys: q.MaxKeys}
	fleet := p.cfg.FleetQuotas
	switch {
	case q.Scope == ScopeFleet && fleet == nil:
		return errors.New("quota scope fleet needs a fleet store (sluice proxy --quota-redis)")
	case q.Scope == ScopeLocal || fleet == nil:
		lq, err := quota.New(qc)
		rt.quota = lq
		return err
	}
	fc := *fleet
	fc.Name, fc.Rate, fc.Burst, fc.MaxKeys = qc.Name, qc.Rate, qc.Burst, qc.MaxKeys
	if fc.Logger == nil {
		fc.Logger = p.logger
	}
	fq, err := redisquota.New(fc)
	rt.quota, rt.fleet = fq, fq
	return err
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func newGateSet(name string, capacity int64, queue int, maxWait time.Duration, l Limit, q Queueing, obs admit.Observer, logger *slog.Logger) (*gateSet, error) {
	compiled, err := q.compile(queue)
	if err != nil {
		return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
	}
	gs := &gateSet{queueing: q, shares: compiled.Policy.ClassShares, classify: compiled.Classify}
	if l.Adaptive() {
		law, err := limit.ParseLaw(l.Law)
		if err != nil {
			return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
		}
		hi := l.Max
		if hi == 0 {
			hi = capacity
		}
		if gs.adaptive, err = limit.New(limit.Config{Law: law, Min: l.Min, Max: hi, Initial: hi, SLO: time.Duration(l.SLO), Logger: logger}); err != nil {
			return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
		}
		if obs != nil {
			obs = admit.Observers(gs.adaptive, obs)
		} else {
			obs = gs.adaptive
		}
	}
	switch {
	case queue == 0:
		maxWait = 0
	case maxWait == 0 && gs.adaptive != nil && l.SLO > 0:
		// The SLO covers the queue's wait and the hold: as sluice serve
		// does, a queue without its own bound waits a quarter of it.
		maxWait = limit.QueueWaitFor(time.Duration(l.SLO))
	}
	pol := compiled.Policy
	g, err := admit.New(admit.Config{Name: name, Capacity: capacity, MaxWaiters: queue, MaxWait: maxWait, Observer: obs,
		Discipline: pol.Discipline, ClassShares: pol.ClassShares, ContextClass: pol.ContextClass})
	if err != nil {
		return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
	}
	gs.gate = g
	if gs.adaptive != nil {
		if err := gs.adaptive.Attach(g); err != nil {
			return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
		}
	}
	return gs, nil
}

// ServeHTTP proxies r to the upstream through the route's quota and gates.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := p.match(r)
	if rt == nil {
		p.unrouted.ServeHTTP(w, r)
		return
	}
	rt.handler.ServeHTTP(w, r) // the route's quota, class, then admission
}

// match returns the first route that takes r, or nil.
func (p *Proxy) match(r *http.Request) *route {
	for _, rt := range p.routes {
		if rt.matches(r) {
			return rt
		}
	}
	return nil
}

func (rt *route) matches(r *http.Request) bool {
	if rt.host != "" {
		h := r.Host
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		if !strings.EqualFold(h, rt.host) {
			return false
		}
	}
	if len(rt.Methods) > 0 {
		found := false
		for _, m := range rt.Methods {
			if m == r.Method {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return strings.HasPrefix(r.URL.Path, rt.PathPrefix)
}

// admission returns the handler that admits a request for rt (nil: a
// request no route takes) and proxies it. httpgate's Guard takes the first
// gate and decides before it builds the request's context, so a refusal,
// most of what a proxy answers under overload, costs little more than the
// answer itself. The upstream gate behind a route's own gate is taken
// inside, from the holder Guard installed; every slot is released, once,
// when the handler returns, whatever happened.
func (p *Proxy) admission(mw *httpgate.Middleware, rt *route) http.Handler {
	cost := int64(1)
	if rt != nil {
		cost = int64(rt.Cost)
	}
	upstream := admit.Request{Weight: cost}
	if rt == nil || rt.gates == nil {
		return mw.GuardFor(p.upstream.gate, upstream, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.forward(w, r, rt)
		}))
	}
	return mw.Guard(rt.gates.gate, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpgate.AcquireFor(r.Context(), p.upstream.gate, upstream); err != nil {
			p.refuseOrStale(w, r, err)
			return
		}
		p.forward(w, r, rt)
	}))
}

// forward proxies an admitted request to the upstream.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rt *route) {
	ctx := r.Context()
	if rt != nil {
		ctx = context.WithValue(ctx, ctxKey{}, rt)
	}
	defer p.guardClient(w, r)()
	p.bufferReplayable(r)
	p.rp.ServeHTTP(sendDeadlineWriter(w, p.cfg.SendTimeout), r.WithContext(ctx))
}

// guardClient bounds how long the client may take to send its body, so a
// declared body never sent ends the upstream call (and frees its slots).
// The returned function clears the connection deadlines this request set
// (the body's, and the send timeout's), so a later request on the same
// keep-alive connection does not inherit them.
func (p *Proxy) guardClient(w http.ResponseWriter, r *http.Request) (clear func()) {
	read := p.cfg.BodyTimeout > 0 && r.Body != nil && r.Body != http.NoBody
	if !read && p.cfg.SendTimeout <= 0 {
		// Nothing to set or clear (`sluice proxy` leaves both timeouts
		// to its listener): no controller, no closure per request.
		return noDeadlines
	}
	rc := http.NewResponseController(w)
	if read {
		_ = rc.SetReadDeadline(p.now().Add(p.cfg.BodyTimeout))
	}
	return func() {
		if read {
			_ = rc.SetReadDeadline(time.Time{})
		}
		if p.cfg.SendTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Time{})
		}
	}
}

func noDeadlines() {}

// bufferReplayable reads the small body of a request that may be retried
// (idempotent method or Idempotency-Key) so each attempt can send it again.
// Larger or unknown-length bodies stream and are never retried.
func (p *Proxy) bufferReplayable(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > maxReplayBody {
		return
	}
	if !idempotent(r.Method) && r.Header.Get(idempotencyKeyHeader) == "" {
		return
	}
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		// Hand on what arrived and the error: the upstream attempt fails
		// as it would have while streaming.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), errReader{err}))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(buf))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// rewrite builds the outbound request. The pool picks the instance per
// attempt; the URL here only carries the path and query.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.cfg.Upstreams[0])
	pr.SetXForwarded()
	// The client's budget reaches the upstream as what is left of it:
	// the retry transport writes the remaining deadline (httpgate turned
	// the header into the context's deadline). Never forward the
	// original, which no longer counts the time spent here.
	pr.Out.Header.Del(httpgate.DefaultDeadlineHeader)
	if pr.In.GetBody != nil {
		pr.Out.GetBody = pr.In.GetBody
	}
}

// refuse writes the sluice contract's refusal and counts it when no gate
// counted it already (the breaker, the retry policy). Quotas answer their
// refusals themselves and count them in their Stats.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var rej *admit.RejectedError
	if errors.As(err, &rej) && !p.isGate(rej.Gate()) {
		p.refusals.add(rej.Gate(), rej.Reason())
	}
	httpgate.WriteRefusal(w, r, err)
}

func (p *Proxy) isGate(name string) bool {
	if name == GateUpstream {
		return true
	}
	for _, rt := range p.routes {
		if rt.gates != nil && rt.Name == name {
			return true
		}
	}
	return false
}

// refuseOrStale answers a refusal with the stale copy when there is one.
func (p *Proxy) refuseOrStale(w http.ResponseWriter, r *http.Request, err error) {
	var rej *admit.RejectedError
	if errors.As(err, &rej) && rej.Reason().Overload() && p.serveStale(w, r, rej.Reason().String()) {
		return
	}
	if r.Context().Err() != nil {
		return // the client is gone; nobody reads an answer
	}
	p.refuse(w, r, err)
}

// upstreamError answers what the transport returned instead of a response.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		w.WriteHeader(499) // client gone: nobody reads it, the holder records canceled
		return
	}
	var rej *admit.RejectedError
	switch {
	case errors.As(err, &rej): // the breaker
		p.refuseOrStale(w, r, err)
	case errors.Is(err, retry.ErrThrottled):
		p.refuseOrStale(w, r, admit.NewRejectedError(GateRetry, "default", admit.ReasonShed, 0, 0, time.Second))
	case errors.Is(err, retry.ErrDeadline):
		p.refuse(w, r, admit.NewRejectedError(GateRetry, "default", admit.ReasonDeadline, 0, 0, time.Second))
	default:
		if p.logger != nil {
			p.logger.Debug("upstream error", "err", err, "path", r.URL.Path)
		}
		if p.serveStale(w, r, "upstream_error") {
			return
		}
		status, code := http.StatusBadGateway, "BAD_GATEWAY"
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			status, code = http.StatusGatewayTimeout, "UPSTREAM_TIMEOUT"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":%q,"gate":%q}`+"\n", code, GateUpstream)
	}
}

// modifyResponse keeps good cacheable answers for stale-if-error, and
// replaces an upstream 502/503/504 by the stale copy when there is one.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	if p.stale == nil {
		return nil
	}
	req := resp.Request
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if e, ok := p.stale.get(req); ok {
			_ = resp.Body.Close()
			e.fill(resp, "upstream_"+fmt.Sprint(resp.StatusCode), p.now())
		}
		return nil
	}
	p.stale.capture(resp)
	return nil
}

func (p *Proxy) serveStale(w http.ResponseWriter, r *http.Request, why string) bool {
	if p.stale == nil {
		return false
	}
	e, ok := p.stale.get(r)
	if !ok {
		return false
	}
	e.write(w, why, p.now())
	return true
}

// sendDeadlineWriter pushes the connection's write deadline forward as the
// answer is written, so a client that stops reading is cut off after
// about d (between d and 1.25 d) without a cap on how long a steadily read
// answer may take. The deadline is moved at most every d/4, so a small
// answer arms it once.
func sendDeadlineWriter(w http.ResponseWriter, d time.Duration) http.ResponseWriter {
	if d <= 0 {
		return w
	}
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
}

type deadlineWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	armed time.Time
}

func (dw *deadlineWriter) arm() {
	now := time.Now()
	if now.Sub(dw.armed) >= dw.d/4 {
		_ = dw.rc.SetWriteDeadline(now.Add(dw.d))
		dw.armed = now
	}
}

func (dw *deadlineWriter) Write(b []byte) (int, error) {
	dw.arm()
	return dw.ResponseWriter.Write(b)
}

func (dw *deadlineWriter) WriteHeader(code int) {
	dw.arm()
	dw.ResponseWriter.WriteHeader(code)
}

func (dw *deadlineWriter) Flush() {
	dw.arm()
	_ = dw.rc.Flush()
}

func (dw *deadlineWriter) Unwrap() http.ResponseWriter { return dw.ResponseWriter }

// Gates returns every gate: the upstream gate first, then the routes'.
// Pass them to server.Config.Gates (metrics, /state, closed on shutdown).
func (p *Proxy) Gates() []*admit.Gate {
	gs := []*admit.Gate{p.upstream.gate}
	for _, rt := range p.routes {
		if rt.gates != nil {
			gs = append(gs, rt.gates.gate)
		}
	}
	return gs
}

// Adaptives returns the adaptive limits (for promsluice.LimitMetrics).
func (p *Proxy) Adaptives() []*limit.Adaptive {
	var as []*limit.Adaptive
	if p.upstream.adaptive != nil {
		as = append(as, p.upstream.adaptive)
	}
	for _, rt := range p.routes {
		if rt.gates != nil && rt.gates.adaptive != nil {
			as = append(as, rt.gates.adaptive)
		}
	}
	return as
}

// Breaker returns the upstream's breaker, nil with NoBreaker.
func (p *Proxy) Breaker() *breaker.Breaker { return p.breaker }

// Policy returns the retry policy toward the upstream.
func (p *Proxy) Policy() *retry.Policy { return p.policy }

// QuotaStats returns the routes' quota counters (for
// promsluice.NewQuotaMetrics and promsluice.QuotaRefusals), local and
// fleet alike.
func (p *Proxy) QuotaStats() []func() quota.Stats {
	var out []func() quota.Stats
	for _, rt := range p.routes {
		if rt.quota != nil {
			out = append(out, rt.quota.Stats)
		}
	}
	return out
}

// Close releases the pool's idle connections. Gates are closed by the
// server frame on shutdown (or by the caller).
func (p *Proxy) Close() { p.pool.closeIdle() }

// refusalCounts counts refusals made outside gates, by point and reason.
type refusalCounts struct {
	mu sync.Mutex
	m  map[refusalKey]*atomic.Uint64
}

type refusalKey struct {
	gate   string
	reason admit.Reason
}

func (c *refusalCounts) add(gate string, r admit.Reason) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[refusalKey]*atomic.Uint64{}
	}
	n := c.m[refusalKey{gate, r}]
	if n == nil {
		n = new(atomic.Uint64)
		c.m[refusalKey{gate, r}] = n
	}
	c.mu.Unlock()
	n.Add(1)
}

// Refusal is a count of refusals made by a point that is neither a gate
// nor a quota: the breaker (breaker_open), the retry policy (shed when
// throttled, deadline).
type Refusal struct {
	Gate   string `json:"gate"`
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

// Refusals returns the counts of refusals made outside gates and quotas,
// so that together with the gates' counters and the quotas' Stats
// (QuotaStats) every refusal is attributable: `sluice proxy` hands both
// to promsluice.GateMetrics.AddRefusals.
func (p *Proxy) Refusals() []Refusal {
	p.refusals.mu.Lock()
	defer p.refusals.mu.Unlock()
	out := make([]Refusal, 0, len(p.refusals.m))
	for k, n := range p.refusals.m {
		out = append(out, Refusal{Gate: k.gate, Reason: k.reason.String(), Count: n.Load()})
	}
	return out
}

var _ http.Handler = (*Proxy)(nil)
