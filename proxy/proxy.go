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
	mw       *httpgate.Middleware
	table    atomic.Pointer[[]*route] // the routes; Reload swaps them
	reloadMu sync.Mutex               // serialises Reload
	breaker  *breaker.Breaker
	policy   *retry.Policy
	pool     *pool
	stale    *staleStore
	rp       *httputil.ReverseProxy
	refusals refusalCounts
	tunnels  *tunnels // nil when no route allows upgrades
}

// route is a Route made live.
type route struct {
	Route
	host    string // lower-case, port-less
	gates   *gateSet
	quota   routeLimiter // nil without a quota
	fleet   *redisquota.Quota
	handler http.Handler
	tunnel  http.Handler // an allowed upgrade: the quota, then the tunnels gate; nil without Upgrades

	// The quota's rules in the form the engine's fast path applies
	// them (see fast.go): its key and its decision.
	key  httpgate.RequestKey
	rule *httpgate.QuotaRule
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
	queued   bool                            // it has a queue: a request may wait in it
}

// classified is h behind classify, the middleware that puts the class
// from a priority header in the request's context (none: h alone).
func classified(classify func(http.Handler) http.Handler, h http.Handler) http.Handler {
	if classify == nil {
		return h
	}
	return classify(h)
}

// New builds a Proxy. Configuration errors wrap ErrInvalidConfig.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, fmt.Errorf("%w: no upstream", ErrInvalidConfig)
	}
	if err := checkUpstreamList(cfg.Upstreams); err != nil {
		return nil, err
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
	cfg.CallTimeout = orDefault(cfg.CallTimeout, DefaultCallTimeout)
	cfg.UpstreamIdleTimeout = orDefault(cfg.UpstreamIdleTimeout, DefaultUpstreamIdleTimeout)
	cfg.TunnelIdleTimeout = orDefault(cfg.TunnelIdleTimeout, DefaultTunnelIdleTimeout)
	if cfg.MaxTunnels < 0 || cfg.MaxTunnels > admit.MaxCapacity {
		return nil, fmt.Errorf("%w: MaxTunnels %d: want 0 (default) to %d", ErrInvalidConfig, cfg.MaxTunnels, admit.MaxCapacity)
	}
	if cfg.MaxTunnels == 0 {
		cfg.MaxTunnels = DefaultMaxTunnels
	}
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
	// Tunnels: no Request-Timeout (it would end the tunnel), and a
	// refusal is never answered with a stale page.
	if allowsUpgrades(cfg.Routes) {
		p.tunnels = &tunnels{idle: cfg.TunnelIdleTimeout, logger: cfg.Logger}
		if p.tunnels.gates, err = newGateSet(GateTunnels, cfg.MaxTunnels, 0, 0, Limit{}, Queueing{}, cfg.Observer, cfg.Logger); err != nil {
			return nil, err
		}
		if p.tunnels.mw, err = httpgate.New(httpgate.Config{Refusal: p.refuse, Logger: cfg.Logger}); err != nil {
			return nil, err
		}
	}
	p.mw = mw
	routes := make([]*route, 0, len(cfg.Routes))
	for _, rc := range cfg.Routes {
		rt, err := p.newRoute(rc, nil)
		if err != nil {
			return nil, err
		}
		routes = append(routes, rt)
	}
	p.table.Store(&routes)
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
		next = newTransport(max(100, int(cfg.MaxInflight)))
	}
	p.pool = newPool(cfg.Upstreams, next, cfg.EjectAfter, cfg.EjectFor, p.now, cfg.Logger)
	// The pool times each attempt (HeaderTimeout, within what is left of
	// CallTimeout) and each wait for the body, whatever Transport sends.
	p.pool.headerTimeout, p.pool.idleTimeout = cfg.HeaderTimeout, cfg.UpstreamIdleTimeout
	p.pool.realClock = cfg.Now == nil
	if p.breaker != nil {
		p.pool.lateFailure = p.breaker.LateFailure
	}
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

// newRoute makes rc live. keep, when not nil, carries the gate set and
// the quota of the running route of the same name that rc keeps (Reload);
// a part it leaves nil is built.
func (p *Proxy) newRoute(rc Route, keep *route) (*route, error) {
	cfg := p.cfg
	rt := &route{Route: rc, host: strings.ToLower(rc.Host)}
	rt.Cost = max(rt.Cost, 1)
	// A request's class comes from its route's priority header, or
	// else from the upstream gate's.
	classify := p.upstream.classify
	if rc.MaxInflight > 0 {
		if keep != nil && keep.gates != nil {
			rt.gates = keep.gates
		} else {
			gs, err := newGateSet(rc.Name, rc.MaxInflight, rc.Queue, time.Duration(rc.MaxWait), rc.Limit, rc.Queueing, cfg.Observer, cfg.Logger)
			if err != nil {
				return nil, err
			}
			rt.gates = gs
		}
		if rt.gates.classify != nil {
			classify = rt.gates.classify
		}
	}
	rt.handler = classified(classify, p.admission(p.mw, rt))
	if len(rc.Upgrades) > 0 {
		if p.tunnels == nil {
			// The tunnels gate is built by New when a route allows
			// upgrades; a reload cannot add it.
			return nil, fmt.Errorf("%w: route %q: upgrades need the tunnels gate, which the proxy builds at start when a route allows them; restart the proxy",
				ErrRestartNeeded, rc.Name)
		}
		rt.tunnel = p.tunnels.mw.Guard(p.tunnels.gates.gate, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.forwardTunnel(w, r, rt)
		}))
	}
	if q := rc.Quota; q != nil {
		if keep != nil && keep.quota != nil {
			rt.quota, rt.fleet = keep.quota, keep.fleet
		} else if err := p.newRouteQuota(rt); err != nil {
			return nil, fmt.Errorf("%w: route %q: %v", ErrInvalidConfig, rc.Name, err)
		}
		name, _ := quotakey.Parse(q.Key) // checked: "" (and "ip") key on the client's address
		rt.key = httpgate.ClientIPKey(cfg.TrustedProxies)
		if name != "" {
			rt.key = httpgate.HeaderKey(name)
		}
		rt.rule = httpgate.NewQuotaRule(rt.quota, false)
		key := rt.key.Func()
		cost := rt.Cost
		qc := httpgate.QuotaConfig{
			Limiter: rt.quota, Key: key,
			Cost: func(*http.Request) int { return cost },
			// The default refusal: the quota's Stats count it (see
			// QuotaStats), so p.refuse must not count it again.
		}
		var err error
		if rt.handler, err = httpgate.Quota(qc, rt.handler); err != nil {
			return nil, fmt.Errorf("%w: route %q: %v", ErrInvalidConfig, rc.Name, err)
		}
		if rt.tunnel != nil {
			if rt.tunnel, err = httpgate.Quota(qc, rt.tunnel); err != nil {
				return nil, fmt.Errorf("%w: route %q: %v", ErrInvalidConfig, rc.Name, err)
			}
		}
	}
	return rt, nil
}

// routes returns the routes in force: New's, or the last Reload's.
func (p *Proxy) routes() []*route { return *p.table.Load() }

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
	var lim *limit.Config // nil: a fixed capacity
	if l.Adaptive() {
		law, err := limit.ParseLaw(l.Law)
		if err != nil {
			return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
		}
		hi := l.Max
		if hi == 0 {
			hi = capacity
		}
		lim = &limit.Config{Law: law, Min: l.Min, Max: hi, Initial: hi, SLO: time.Duration(l.SLO), Logger: logger}
	}
	if queue == 0 {
		maxWait = 0
	}
	// limit.NewGate gives a queue without its own bound a quarter of the
	// SLO, as sluice serve does: the SLO covers the queue's wait and the
	// hold.
	g, a, err := limit.NewGate(admit.Config{Name: name, Capacity: capacity, MaxWaiters: queue, MaxWait: maxWait, Observer: obs,
		Queueing: compiled.Policy}, lim)
	if err != nil {
		return nil, fmt.Errorf("%w: gate %q: %v", ErrInvalidConfig, name, err)
	}
	return &gateSet{gate: g, adaptive: a, queueing: q, shares: compiled.Policy.ClassShares, classify: compiled.Classify, queued: queue > 0}, nil
}

// ServeHTTP proxies r to the upstream through the route's quota and gates.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := p.match(r)
	if _, ok := r.Header["Upgrade"]; ok && isUpgrade(r.Header) {
		offered := upgradeProtocols(r.Header)
		var allowed []string
		if rt != nil {
			allowed = rt.Upgrades
		}
		switch decideUpgrade(offered, allowed) {
		case upgradeRefuse:
			refuseUpgrade(w, offered)
			return
		case upgradeTunnel:
			rt.tunnel.ServeHTTP(w, r) // the route's quota, then the tunnels gate
			return
		}
		// h2c: a plain request (rewrite drops the offer).
	}
	if rt == nil {
		p.unrouted.ServeHTTP(w, r)
		return
	}
	rt.handler.ServeHTTP(w, r) // the route's quota, class, then admission
}

// allowsUpgrades reports whether some route tunnels upgrades.
func allowsUpgrades(routes []Route) bool {
	for _, rt := range routes {
		if len(rt.Upgrades) > 0 {
			return true
		}
	}
	return false
}

// match returns the first route that takes r, or nil.
func (p *Proxy) match(r *http.Request) *route {
	for _, rt := range p.routes() {
		if rt.matches(r) {
			return rt
		}
	}
	return nil
}

func (rt *route) matches(r *http.Request) bool { return rt.takes(r.Host, r.Method, r.URL.Path) }

// matchParts is match for a request known by its parts (the engine's
// fast path).
func (p *Proxy) matchParts(host, method, path string) *route {
	for _, rt := range p.routes() {
		if rt.takes(host, method, path) {
			return rt
		}
	}
	return nil
}

// takes reports whether the route takes a request for host (port
// ignored), method and path (decoded): the one rule both front ends
// match with.
func (rt *route) takes(host, method, path string) bool {
	if rt.host != "" {
		h := host
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
			if m == method {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return strings.HasPrefix(path, rt.PathPrefix)
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
	if rt.Streaming {
		// Long answers hold the route's own gate only.
		return mw.Guard(rt.gates.gate, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// forward proxies an admitted request to the upstream, as a call (see
// call): the request's body is watched for client faults, the proxy's own
// deadline set, and an answer aborted midway recorded as what it was.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rt *route) {
	c := newCall(r, rt, p.cfg.CallTimeout, p.now())
	defer p.guardClient(w, r)()
	out := r.WithContext(c)
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = &clientBody{rc: r.Body, c: c}
	}
	if err := p.bufferReplayable(out); err != nil {
		answerClientFault(w, out, err)
		return
	}
	returned := false
	defer func() {
		c.returned.Store(true)
		if !returned {
			// The ReverseProxy aborted the answer (a panic, usually
			// http.ErrAbortHandler) and it keeps unwinding: say why, when
			// known, so the slot is not recorded as a panic.
			if o, ok := c.abortOutcome(); ok {
				httpgate.SetOutcome(r.Context(), o)
			}
		}
	}()
	p.rp.ServeHTTP(sendDeadlineWriter(w, p.cfg.SendTimeout), out)
	returned = true
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
// Larger or unknown-length bodies stream and are never retried. A body
// that fails to arrive is the client's fault, returned: nothing is sent.
func (p *Proxy) bufferReplayable(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > maxReplayBody {
		return nil
	}
	if !idempotent(r.Method) && r.Header.Get(idempotencyKeyHeader) == "" {
		return nil
	}
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(buf))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return nil
}

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
	pr.SetURL(p.pool.base())
	p.setForwarded(pr)
	if p.cfg.PreserveHost {
		pr.Out.Host = pr.In.Host // SetURL cleared it: the upstream's own host
	}
	// The client's budget reaches the upstream as what is left of it:
	// the retry transport writes the remaining deadline (httpgate turned
	// the header into the context's deadline). Never forward the
	// original, which no longer counts the time spent here.
	pr.Out.Header.Del(httpgate.DefaultDeadlineHeader)
	if pr.In.GetBody != nil {
		pr.Out.GetBody = pr.In.GetBody
	}
	// Request trailers arrive with the end of the body: share the map
	// the server fills then (a copy made now would hold no values).
	if pr.In.Trailer != nil {
		pr.Out.Trailer = pr.In.Trailer
	}
	// Only an allowed tunnel is sent the upgrade; anything else (an h2c
	// offer) goes as the plain request it also is.
	if h := pr.Out.Header; len(h["Upgrade"]) > 0 {
		if c := callOf(pr.Out.Context()); c == nil || c.tunnel == nil {
			delete(h, "Upgrade") // canonical keys: no Del, which canonicalizes
			delete(h, "Http2-Settings")
			delete(h, "Connection")
		}
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
	if name == GateUpstream || (name == GateTunnels && p.tunnels != nil) {
		return true
	}
	for _, rt := range p.routes() {
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
	if c := callOf(r.Context()); c != nil {
		if fault := c.faulted(); fault != nil {
			answerClientFault(w, r, fault) // the client's body broke the call
			return
		}
	}
	if r.Context().Err() != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		w.WriteHeader(statusClientGone) // client gone: nobody reads it, the holder records canceled
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

// modifyResponse hands a tunnel its upstream side, keeps good cacheable
// answers for stale-if-error, and replaces an upstream 502/503/504 by the
// stale copy when there is one. Stale copies are keyed by the inbound
// request: the outbound one has the upstream's host.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	c := callOf(resp.Request.Context())
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if c == nil || c.tunnel == nil {
			return errors.New("proxy: the upstream switched protocols unasked")
		}
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			c.tunnel.backend = rwc
			resp.Body = &tunnelBackend{ReadWriteCloser: rwc, t: c.tunnel}
		}
		return nil
	}
	if p.stale == nil || c == nil {
		return nil
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if e, ok := p.stale.get(c.in); ok {
			_ = resp.Body.Close()
			e.fill(resp, "upstream_"+fmt.Sprint(resp.StatusCode), p.now())
		}
		return nil
	}
	p.stale.capture(c.in, resp)
	return nil
}

// serveStale answers r (inbound, or outbound within a call) with its stale
// copy, if there is one.
func (p *Proxy) serveStale(w http.ResponseWriter, r *http.Request, why string) bool {
	if p.stale == nil {
		return false
	}
	if c := callOf(r.Context()); c != nil {
		r = c.in
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
	rc    *http.ResponseController // nil when st is set
	st    streamWriter             // the native path's Stream, which sets its own deadline
	d     time.Duration
	armed time.Time
}

// streamWriter is what the send deadline needs of the engine's Stream.
type streamWriter interface {
	http.ResponseWriter
	SetWriteDeadline(time.Time) error
	Flush()
}

// streamDeadlineWriter is sendDeadlineWriter for the native path's
// Stream, in storage the caller keeps (its nativeCall): no allocation.
func streamDeadlineWriter(dw *deadlineWriter, st streamWriter, d time.Duration) http.ResponseWriter {
	if d <= 0 {
		return st
	}
	*dw = deadlineWriter{ResponseWriter: st, st: st, d: d}
	return dw
}

func (dw *deadlineWriter) arm() {
	now := time.Now()
	if now.Sub(dw.armed) >= dw.d/4 {
		if dw.st != nil {
			_ = dw.st.SetWriteDeadline(now.Add(dw.d))
		} else {
			_ = dw.rc.SetWriteDeadline(now.Add(dw.d))
		}
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
	if dw.st != nil {
		dw.st.Flush()
		return
	}
	_ = dw.rc.Flush()
}

func (dw *deadlineWriter) Unwrap() http.ResponseWriter { return dw.ResponseWriter }

// Gates returns every gate: the upstream gate first, then the routes',
// then the tunnels gate when a route allows upgrades. Pass them to
// server.Config.Gates (metrics, /state, closed on shutdown).
func (p *Proxy) Gates() []*admit.Gate {
	gs := []*admit.Gate{p.upstream.gate}
	for _, rt := range p.routes() {
		if rt.gates != nil {
			gs = append(gs, rt.gates.gate)
		}
	}
	if p.tunnels != nil {
		gs = append(gs, p.tunnels.gates.gate)
	}
	return gs
}

// Adaptives returns the adaptive limits (for promsluice.Metrics.Add).
func (p *Proxy) Adaptives() []*limit.Adaptive {
	var as []*limit.Adaptive
	if p.upstream.adaptive != nil {
		as = append(as, p.upstream.adaptive)
	}
	for _, rt := range p.routes() {
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
// promsluice.Metrics.Add), local and fleet alike.
func (p *Proxy) QuotaStats() []func() quota.Stats {
	var out []func() quota.Stats
	for _, rt := range p.routes() {
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
// to promsluice.Metrics.AddRefusals.
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
