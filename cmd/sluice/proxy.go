package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/server"
)

// upstreamList is the repeatable --upstream flag; one value may list
// several URLs separated by commas (so SLUICE_UPSTREAM can carry them).
type upstreamList []*url.URL

func (l *upstreamList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, u := range *l {
		s[i] = u.String()
	}
	return strings.Join(s, ",")
}

func (l *upstreamList) Set(v string) error {
	for one := range strings.SplitSeq(v, ",") {
		u, err := parseUpstream(strings.TrimSpace(one))
		if err != nil {
			return err
		}
		*l = append(*l, u)
	}
	return nil
}

func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: want http://host:port (or https://)", s)
	}
	if err := proxy.CheckUpstream(u); err != nil {
		return nil, fmt.Errorf("upstream %q: %v", s, err)
	}
	return u, nil
}

// Accepted ranges of the proxy's duration flags: below them a unit typo
// ("1ns" for "1s"), above them a wait no client keeps up with.
const (
	minUpstreamTimeout = 10 * time.Millisecond
	maxUpstreamTimeout = time.Hour
	minEjectFor        = 100 * time.Millisecond
	maxEjectFor        = time.Hour
	minStaleIfError    = time.Second
	maxStaleIfError    = 7 * 24 * time.Hour
	minProxyWait       = time.Millisecond // --max-wait, --slo
	maxProxyWait       = 10 * time.Minute
)

// proxyOptions are `sluice proxy`'s own flags.
type proxyOptions struct {
	upstreams     upstreamList
	maxInflight   int64
	queue         int
	maxWait       time.Duration
	law           string
	limitMin      int64
	limitMax      int64
	slo           time.Duration
	config        string
	retries       int
	breaker       bool
	headerTimeout time.Duration
	ejectAfter    int
	ejectFor      time.Duration
	staleIfError  time.Duration
	preserveHost  bool
	queueFlags    // --queue-discipline, --priority-header, --class-share: as serve's
	requestPath   // --timeout, --upstream-idle-timeout, --max-tunnels, --tunnel-idle-timeout
}

// requestPath are the flags bounding one request's way through the proxy
// and its tunnels.
type requestPath struct {
	callTimeout  time.Duration
	upstreamIdle time.Duration
	maxTunnels   int64
	tunnelIdle   time.Duration
}

func (o *requestPath) register(fs *flag.FlagSet) {
	fs.DurationVar(&o.callTimeout, "timeout", proxy.DefaultCallTimeout, "longest wait for the upstream's answer, every attempt and retry included (each attempt gets\n"+
		"at most --upstream-timeout, and no more than is left); the upstream is sent what is left in Request-Timeout")
	fs.DurationVar(&o.upstreamIdle, "upstream-idle-timeout", proxy.DefaultUpstreamIdleTimeout, "cut an answer whose body the upstream stops sending for this long (counted against the upstream;\n"+
		"time spent writing to a slow client does not count)")
	fs.Int64Var(&o.maxTunnels, "max-tunnels", proxy.DefaultMaxTunnels, "slots of the \"tunnels\" gate: upgraded connections (WebSocket) open at once, for routes whose \"upgrades\" allow them")
	fs.DurationVar(&o.tunnelIdle, "tunnel-idle-timeout", proxy.DefaultTunnelIdleTimeout, "close a tunnel with no byte either way for this long")
}

func (o *requestPath) validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", o.callTimeout}, {"upstream-idle-timeout", o.upstreamIdle}, {"tunnel-idle-timeout", o.tunnelIdle}} {
		if err := checkDuration(d.name, d.v, minTimeout, maxTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if o.maxTunnels < 1 || o.maxTunnels > admit.MaxCapacity {
		errs = append(errs, fmt.Errorf("--max-tunnels %d: want 1 to %d", o.maxTunnels, admit.MaxCapacity))
	}
	return errs
}

func (o *proxyOptions) register(fs *flag.FlagSet) {
	fs.Var(&o.upstreams, "upstream", "upstream `URL`, repeatable (or comma-separated): instances of one service, balanced round-robin with passive health")
	fs.Int64Var(&o.maxInflight, "max-inflight", proxy.DefaultMaxInflight, "slots of the \"upstream\" gate: requests in flight to the upstream at once (the ceiling of an adaptive --limit)")
	fs.IntVar(&o.queue, "queue", 0, "requests that may wait for an upstream slot (0: refuse at once when full)")
	fs.DurationVar(&o.maxWait, "max-wait", 0, "longest wait in the upstream queue before 503 (0: a quarter of --slo with an adaptive --limit, else the gate's default, 1s; needs --queue)")
	fs.StringVar(&o.law, "limit", "fixed", "upstream gate capacity: fixed, or adaptive: "+strings.Join(limit.LawNames(), ", "))
	fs.Int64Var(&o.limitMin, "limit-min", 0, "floor of an adaptive limit (0: 1)")
	fs.Int64Var(&o.limitMax, "limit-max", 0, "ceiling of an adaptive limit (0: --max-inflight)")
	fs.DurationVar(&o.slo, "slo", 0, "latency ceiling an adaptive limit is anchored to (0: none)")
	fs.StringVar(&o.config, "config", "", "JSON `file` of per-route rules and, optionally, the upstreams (see docs/proxy.md); re-read on SIGHUP")
	fs.IntVar(&o.retries, "attempts", 3, "most attempts per idempotent request, the first included, within a 10% retry budget (1: no retries)")
	fs.BoolVar(&o.breaker, "breaker", true, "a circuit breaker in front of the upstream (503 breaker_open while open)")
	fs.DurationVar(&o.headerTimeout, "upstream-timeout", proxy.DefaultHeaderTimeout, "longest wait for the upstream's response headers, per attempt")
	fs.IntVar(&o.ejectAfter, "eject-after", proxy.DefaultEjectAfter, "consecutive failures (no connection, 502, 504) that eject an upstream instance (0: never)")
	fs.DurationVar(&o.ejectFor, "eject-for", proxy.DefaultEjectFor, "how long an ejected instance gets no traffic")
	o.queueFlags.register(fs, "upstream")
	fs.DurationVar(&o.staleIfError, "stale-if-error", 0, "serve the last good answer of a cacheable GET, up to this old and marked Sluice-Stale, while the upstream is refused or failing (0: off)")
	o.requestPath.register(fs)
	fs.BoolVar(&o.preserveHost, "preserve-host", false, "send the client's Host header to the upstream (default: rewrite it to the upstream's host)")
}

// proxyConfig validates the flags and builds the proxy's Config. Errors
// are usage errors.
func (o *proxyOptions) proxyConfig(logger *slog.Logger) (proxy.Config, error) {
	var errs []error
	if len(o.upstreams) == 0 && o.config == "" {
		errs = append(errs, errors.New("--upstream is required, e.g. --upstream http://127.0.0.1:9000"))
	}
	if o.maxInflight < 1 {
		errs = append(errs, fmt.Errorf("--max-inflight %d: want 1 or more", o.maxInflight))
	}
	if o.queue < 0 || o.maxWait < 0 {
		errs = append(errs, errors.New("--queue and --max-wait: want 0 or more"))
	}
	if o.maxWait > 0 && o.queue == 0 {
		errs = append(errs, errors.New("--max-wait needs --queue: without a queue a full gate refuses at once"))
	}
	if o.retries < 1 {
		errs = append(errs, fmt.Errorf("--attempts %d: want 1 (no retries) or more", o.retries))
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		lo, hi   time.Duration
		zeroOK   bool // 0 means off or the default
		zeroMean string
	}{
		{"upstream-timeout", o.headerTimeout, minUpstreamTimeout, maxUpstreamTimeout, false, ""},
		{"eject-for", o.ejectFor, minEjectFor, maxEjectFor, false, ""},
		{"stale-if-error", o.staleIfError, minStaleIfError, maxStaleIfError, true, "off"},
		{"max-wait", o.maxWait, minProxyWait, maxProxyWait, true, "the default"},
		{"slo", o.slo, minProxyWait, maxProxyWait, true, "none"},
	} {
		if d.zeroOK && d.v == 0 {
			continue
		}
		if err := checkDuration(d.name, d.v, d.lo, d.hi); err != nil {
			if d.zeroOK {
				err = fmt.Errorf("%v, or 0 (%s)", err, d.zeroMean)
			}
			errs = append(errs, err)
		}
	}
	if o.ejectAfter < 0 || o.limitMin < 0 || o.limitMax < 0 {
		errs = append(errs, errors.New("--eject-after, --limit-min and --limit-max: want 0 or more"))
	}
	if o.law != "fixed" {
		if _, err := limit.ParseLaw(o.law); err != nil {
			errs = append(errs, fmt.Errorf("--limit %q: want fixed, %s", o.law, strings.Join(limit.LawNames(), ", ")))
		}
	} else if o.limitMin != 0 || o.limitMax != 0 || o.slo != 0 {
		errs = append(errs, errors.New("--limit-min, --limit-max and --slo need an adaptive --limit"))
	}
	if _, err := o.queueFlags.compile(o.queue); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.requestPath.validate()...)
	if err := errors.Join(errs...); err != nil {
		return proxy.Config{}, err
	}
	cfg := proxy.Config{
		Upstreams:     o.upstreams,
		MaxInflight:   o.maxInflight,
		Queue:         o.queue,
		MaxWait:       o.maxWait,
		Limit:         proxy.Limit{Law: o.law, Min: o.limitMin, Max: o.limitMax, SLO: proxy.Duration(o.slo)},
		Queueing:      proxy.Queueing{Discipline: o.discipline, PriorityHeader: o.priorityHeader, ClassShares: o.shares.raw},
		MaxAttempts:   o.retries,
		NoBreaker:     !o.breaker,
		HeaderTimeout: o.headerTimeout,
		// The frame's connections enforce --send-timeout and
		// --body-timeout (connlimit), so the proxy's own per-request
		// deadlines are off.
		BodyTimeout:  -1,
		SendTimeout:  -1,
		EjectAfter:   o.ejectAfter,
		EjectFor:     o.ejectFor,
		StaleIfError: o.staleIfError,
		PreserveHost: o.preserveHost,
		Logger:       logger,
		// The request path's own bounds (requestPath).
		CallTimeout:         o.callTimeout,
		UpstreamIdleTimeout: o.upstreamIdle,
		MaxTunnels:          o.maxTunnels,
		TunnelIdleTimeout:   o.tunnelIdle,
	}
	if o.ejectAfter == 0 {
		cfg.EjectAfter = -1
	}
	if o.law == "fixed" {
		cfg.Limit = proxy.Limit{}
	}
	if o.config != "" {
		file, err := o.readConfig()
		if err != nil {
			return proxy.Config{}, err
		}
		cfg.Routes = file.Routes
		if len(file.Upstreams) > 0 {
			cfg.Upstreams = file.Upstreams
		}
	}
	if len(cfg.Upstreams) == 0 {
		return proxy.Config{}, fmt.Errorf("--upstream is required (or \"upstreams\" in --config %s), e.g. --upstream http://127.0.0.1:9000", o.config)
	}
	return cfg, nil
}

// readConfig reads and checks the --config file, at start and on every
// reload. The upstream instances come from --upstream or from the file's
// "upstreams", never both: one list, in one place.
func (o *proxyOptions) readConfig() (proxy.File, error) {
	f, err := os.Open(o.config)
	if err != nil {
		return proxy.File{}, fmt.Errorf("--config: %v", err)
	}
	defer f.Close()
	file, err := proxy.ParseFile(f)
	if err != nil {
		return proxy.File{}, fmt.Errorf("--config %s: %v", o.config, err)
	}
	if len(file.Upstreams) > 0 && len(o.upstreams) > 0 {
		return proxy.File{}, fmt.Errorf("--config %s names \"upstreams\" and --upstream is given too: list the upstream instances in one place", o.config)
	}
	return file, nil
}

// runProxy runs `sluice proxy`: the gated reverse proxy on the server
// frame until SIGINT/SIGTERM, then a graceful shutdown.
func runProxy(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice proxy --upstream URL [flags]\n\n"+
		"A reverse proxy that protects the service behind it: a concurrency gate toward the upstream\n"+
		"(fixed or adaptive), per-route gates, quotas and costs (--config), retries within a budget,\n"+
		"a circuit breaker, deadline propagation and stale-if-error. Every refusal is 503 or 429 with\n"+
		"Retry-After and a JSON reason naming the gate. Health, metrics and state are on the admin listener.\n"+
		"A client's own faults (a malformed or stalled body, leaving) are answered 400/408/499 and never\n"+
		"counted against the upstream; upgrades (WebSocket) are tunnelled only where a route allows them,\n"+
		"on their own \"tunnels\" gate, and h2c upgrades never.\n"+
		"SIGHUP re-reads --config and the TLS files and applies what changed without dropping a connection;\n"+
		"a file that does not check is refused with a log line and the running configuration stays.\n\n"+serverExitStatus)
	var so serveOptions
	so.register(fs)
	var po proxyOptions
	po.register(fs)
	quotas := addQuotaFlags(fs, "comma-separated `CIDRs` of proxies in front of this one: from them the X-Forwarded-For and Forwarded chains are kept\n"+
		"(this hop appended) and believed by quotas keyed on ip; from any other peer they are replaced by the peer's address")
	deprecate(fs, "retries", "attempts")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	hup, stopHangups := hangups() // from here on a SIGHUP waits for the reload, it no longer kills
	defer stopHangups()
	fail := func(code int, err error) int {
		if code == exitUsage {
			return usageError(e, "proxy", err)
		}
		printError(e, "proxy", err)
		return code
	}
	if fs.NArg() > 0 {
		return fail(exitUsage, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	so.markSet(fs)
	if err := so.validate(); err != nil {
		return fail(exitUsage, err)
	}
	logger, err := so.log.logger(e.stderr)
	if err != nil {
		return fail(exitUsage, err)
	}
	cfg, err := po.proxyConfig(logger)
	if err != nil {
		return fail(exitUsage, err)
	}
	// Refuse a --max-conns that does not fit the descriptor limit before
	// anything is built or bound.
	if err := so.connConfig().Validate(); err != nil {
		return fail(exitUsage, fmt.Errorf("--max-conns %d: %v", so.maxConns, err))
	}
	if err := checkQuotaNames(quotas.quotas, cfg.Routes); err != nil {
		return fail(exitUsage, err)
	}
	if err := quotas.checkCompanions(fs, hasRouteQuota(cfg.Routes), "trusted-proxies"); err != nil {
		return fail(exitUsage, err)
	}
	// One list of trusted proxies for the forwarding headers, the route
	// quotas and --quota keyed on ip.
	if cfg.TrustedProxies, err = parsePrefixes("--trusted-proxies", quotas.trusted); err != nil {
		return fail(exitUsage, err)
	}
	defer quotas.close()
	// Route quotas share --quota-redis and the other companions with
	// --quota (so a reload may add fleet route quotas where there is a
	// --quota-redis).
	if hasRouteQuota(cfg.Routes) || len(quotas.quotas) > 0 {
		if cfg.FleetQuotas, err = quotas.fleet(logger); err != nil {
			return fail(exitUsage, err)
		}
	}
	gm := promsluice.NewMetrics()
	cfg.Observer = gm
	p, err := proxy.New(cfg)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer p.Close()
	so.warn(logger, po.maxInflight)
	quotas.routeQuotas = func() []quota.Stats { return readStats(p.QuotaStats()) } // metered with --quota's, as reloads leave them
	handler, err := quotas.wrap(logger, p)                                         // --quota: 429 before any route
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := meterProxy(gm, p, quotas.metered); err != nil {
		return fail(exitFail, err)
	}
	extras := map[string]func() any{"proxy": func() any { return p.State() }}
	for name, f := range quotas.states {
		extras[name] = f
	}
	// On the engine, the proxy's fast path decides every request (a
	// refusal is answered from kept bytes, an admitted one goes to the
	// proxy through the engine's bridge). With --quota every request
	// goes through the handler chain instead, so that none passes a
	// --quota unspent.
	var fast engine.FastHandler
	if so.serverEngine() == server.EngineFast && len(quotas.quotas) == 0 {
		fast = p.FastPath()
	}
	srv, err := server.Listen(ctx, server.Config{
		Engine:               so.serverEngine(),
		Fast:                 fast,
		FastBodies:           true,
		Addr:                 so.addr,
		AdminAddr:            so.adminAddr,
		Handler:              handler,
		Gates:                p.Gates(),
		Metrics:              gm,
		StateExtras:          extras,
		Conn:                 so.connConfig(),
		ShutdownTimeout:      so.serverShutdownTimeout(),
		DrainDelay:           so.drainDelay,
		TLSCertFile:          so.tlsCert,
		TLSKeyFile:           so.tlsKey,
		H2C:                  so.h2c,
		MaxConcurrentStreams: so.maxStreams,
		Logger:               logger,
		Pprof:                so.pprof,
		CloseHijacked:        p.CloseTunnels, // tunnels: the drain does not wait for them
	})
	if err != nil {
		return listenFailed(e, "proxy", err, so.listenAddrs()...)
	}
	ups := upstreamList(cfg.Upstreams)
	logger.Info("proxying", "addr", srv.Addr().String(), "admin_addr", srv.AdminAddr().String(), "engine", so.serverEngine().String(),
		"upstreams", ups.String(), "max_inflight", po.maxInflight, "limit", po.law, "routes", len(cfg.Routes),
		"queue_discipline", po.discipline, "priority_header", po.priorityHeader, "fleet_route_quotas", cfg.FleetQuotas != nil)
	r := &proxyReloader{opts: &po, quotas: quotas, p: p, srv: srv, metrics: gm, logger: logger}
	return serveUntilDone(ctx, e, "proxy", srv, logger, hup, r.reload)
}

// meterProxy meters on m what the proxy built beside its gates: the
// breaker, the retry policy, the adaptive limits and the quotas (route
// and --quota), and puts the refusals the proxy makes outside its gates
// and quotas in sluice_admission_rejected_total, so `sluice load
// --metrics` attributes every refusal the proxy makes to the gate its
// answer names: the quotas (rate, full, breaker_open), the breaker and
// the retry policy. The breaker counts its own refusals (Add), so the
// proxy's count of its answers for the breaker is left out.
func meterProxy(m *promsluice.Metrics, p *proxy.Proxy, quotas []any) error {
	parts := append([]any{p.Policy()}, quotas...)
	if b := p.Breaker(); b != nil {
		parts = append(parts, b)
	}
	for _, a := range p.Adaptives() {
		parts = append(parts, a)
	}
	if err := m.Add(parts...); err != nil {
		return err
	}
	m.AddRefusals(func() []promsluice.Refusal {
		var out []promsluice.Refusal
		for _, r := range p.Refusals() {
			if r.Gate != proxy.GateBreaker {
				out = append(out, promsluice.Refusal{Gate: r.Gate, Reason: r.Reason, Count: r.Count})
			}
		}
		return out
	})
	return nil
}

func hasRouteQuota(routes []proxy.Route) bool {
	for _, rt := range routes {
		if rt.Quota != nil {
			return true
		}
	}
	return false
}

// checkQuotaNames refuses a --quota named like a route's gate or quota or
// one of the proxy's own refusal points: their refusals, metrics and
// fleet keys would be mixed up.
func checkQuotaNames(quotas quotaList, routes []proxy.Route) error {
	taken := map[string]bool{proxy.GateUpstream: true, proxy.GateBreaker: true, proxy.GateRetry: true, proxy.GateTunnels: true}
	for _, rt := range routes {
		taken[rt.Name], taken[rt.QuotaName()] = true, true
	}
	for _, q := range quotas {
		if taken[q.name] {
			return fmt.Errorf("--quota name=%s: the name of a gate or route quota of the proxy; pick another", q.name)
		}
	}
	return nil
}

// readStats reads each quota's Stats.
func readStats(sources []func() quota.Stats) []quota.Stats {
	out := make([]quota.Stats, len(sources))
	for i, read := range sources {
		out[i] = read()
	}
	return out
}
