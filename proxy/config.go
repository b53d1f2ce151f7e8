package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/internal/queuerules"
	"github.com/sluicehq/sluice/internal/quotakey"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// Defaults for the zero Config.
const (
	DefaultMaxInflight   = 64
	DefaultHeaderTimeout = 30 * time.Second
	DefaultBodyTimeout   = 60 * time.Second
	DefaultSendTimeout   = 30 * time.Second
	DefaultEjectAfter    = 3
	DefaultEjectFor      = 10 * time.Second
	DefaultStaleEntries  = 1024
	DefaultStaleMaxBytes = 1 << 20
	// maxReplayBody is the largest request body buffered so that an
	// idempotent request can be retried.
	maxReplayBody = 64 << 10
)

// Names of the refusal points that are not gates (labels of refusals and
// metrics).
const (
	// GateUpstream is the shared concurrency gate toward the upstream
	// (Config.MaxInflight).
	GateUpstream = "upstream"
	// GateBreaker names refusals made by the upstream's circuit breaker.
	GateBreaker = "upstream-breaker"
	// GateRetry names refusals made by the retry policy: throttled
	// locally (reason shed) or no time left for an attempt (deadline).
	GateRetry = "upstream-retry"
	// GateTunnels is the gate of upgraded connections (Config.MaxTunnels).
	GateTunnels = "tunnels"
)

// StaleHeader marks a response served from the stale-if-error store; its
// value says why the upstream was not asked (breaker_open, full, ...) or
// could not answer (upstream_error).
const StaleHeader = "Sluice-Stale"

// idempotencyKeyHeader makes a POST or PATCH safe to retry (the upstream
// recognises a repeated operation by it).
const idempotencyKeyHeader = "Idempotency-Key"

// quotaSuffix names a route's quota after the route ("search-quota"), apart
// from the route's gate, so their refusals are told apart.
const quotaSuffix = "-quota"

// ErrInvalidConfig is wrapped by every configuration error of New and
// ParseRules.
var ErrInvalidConfig = errors.New("proxy: invalid config")

// Config configures a Proxy. Upstreams is required; every other zero field
// means its default, and each says what zero and negative mean.
type Config struct {
	// Upstreams are the instances of the one service behind the proxy,
	// balanced round-robin over those not ejected (passive health).
	// Each is an absolute http:// or https:// URL; a path is prefixed to
	// every request's path.
	Upstreams []*url.URL

	// MaxInflight is the capacity of the shared "upstream" gate: requests
	// (weighted by their route's Cost) in flight to the upstream at once.
	// With Limit adaptive it is the ceiling (Limit.Max). 0 means
	// DefaultMaxInflight; negative is an error.
	MaxInflight int64
	// Queue and MaxWait bound the upstream gate's wait queue (see
	// admit.Config.MaxWaiters and MaxWait): 0 means no queue. A queue
	// without a MaxWait in front of an adaptive limit with an SLO waits
	// a quarter of the SLO (limit.QueueWaitFor); otherwise the gate's
	// default applies. The same holds for a route's queue.
	Queue   int
	MaxWait time.Duration
	// Limit makes the upstream gate's capacity adaptive. The zero value
	// is a fixed capacity.
	Limit Limit
	// Queueing orders the upstream gate's queue and gives requests a
	// class from a header (needs Queue). The zero value is FIFO with every
	// request critical.
	Queueing Queueing

	// TrustedProxies are the addresses of proxies in front of this one.
	// From such a peer the client address chain is kept: the upstream
	// receives its X-Forwarded-For and Forwarded with the peer appended,
	// and its X-Forwarded-Host and X-Forwarded-Proto as they came. From
	// any other peer those headers are replaced by the peer's address
	// (and this hop's host and scheme). A route quota keyed on "ip"
	// believes the same chain (see httpgate.KeyClientIP). Nil trusts
	// nobody.
	TrustedProxies []netip.Prefix
	// PreserveHost sends the client's Host header to the upstream instead
	// of the upstream's own host name (virtual hosts behind the proxy).
	// False rewrites it to the instance's host.
	PreserveHost bool
	// FleetQuotas, when set, is the template of the routes' fleet
	// quotas: a route quota whose Scope is "fleet", or empty, is a
	// redisquota.Quota built from it, with the route's Name, Rate, Burst
	// and MaxKeys, so its rate holds across every proxy sharing the Redis
	// (Client, Mode, Fallback, Instances, Timeout... as the template has
	// them). Nil: every route quota is local to this process, and a Scope
	// of "fleet" is an error.
	FleetQuotas *redisquota.Config

	// Routes are matched in order; the first whose Host, Methods and
	// PathPrefix all match takes the request. A request no route matches
	// only passes the upstream gate.
	Routes []Route

	// MaxAttempts bounds attempts per request (retries only for
	// idempotent requests, within a 10 % budget). 0 means 3; 1 or
	// negative means no retries.
	MaxAttempts int
	// Breaker configures the upstream's circuit breaker; its Name is
	// GateBreaker. NoBreaker turns it off.
	Breaker   breaker.Config
	NoBreaker bool

	// HeaderTimeout bounds the wait for the upstream's response headers
	// (per attempt). 0 means DefaultHeaderTimeout; negative means none.
	HeaderTimeout time.Duration
	// BodyTimeout bounds how long a client may take to send its request
	// body, so a declared body never sent cannot hold a slot. 0 means
	// DefaultBodyTimeout; negative means none.
	BodyTimeout time.Duration
	// SendTimeout bounds each write of the response to the client (a
	// reader that stalls is cut off). 0 means DefaultSendTimeout;
	// negative means none.
	SendTimeout time.Duration

	// CallTimeout bounds the whole call, from admission to the upstream's
	// response headers: every attempt, and the waits between them, fit
	// inside it, each attempt's HeaderTimeout is cut to what is left, and
	// the upstream is sent what is left in Request-Timeout (a client's own
	// shorter Request-Timeout wins). It does not bound the answer's body,
	// which UpstreamIdleTimeout and SendTimeout do. 0 means
	// DefaultCallTimeout; negative means none (HeaderTimeout per attempt
	// only).
	CallTimeout time.Duration
	// UpstreamIdleTimeout bounds each wait for the next piece of the
	// upstream's response body: a body that stalls longer is cut, its slot
	// freed and the failure counted against the upstream (breaker and
	// ejection). Time spent writing to a slow client does not count. 0
	// means DefaultUpstreamIdleTimeout; negative means none.
	UpstreamIdleTimeout time.Duration
	// MaxTunnels is the capacity of the "tunnels" gate, which holds each
	// upgraded connection (WebSocket) of a route that allows upgrades
	// (Route.Upgrades) for its whole life instead of a request slot; the
	// gate exists only when some route allows upgrades. 0 means
	// DefaultMaxTunnels; negative is an error.
	MaxTunnels int64
	// TunnelIdleTimeout closes a tunnel with no byte either way for this
	// long. 0 means DefaultTunnelIdleTimeout; negative means none.
	TunnelIdleTimeout time.Duration

	// EjectAfter consecutive failures (no connection, 502, 504) eject an
	// upstream instance for EjectFor. 0 means DefaultEjectAfter and
	// DefaultEjectFor; negative EjectAfter never ejects.
	EjectAfter int
	EjectFor   time.Duration

	// StaleIfError, when above zero, keeps the last good response of
	// each cacheable GET for that long and serves it, marked with
	// StaleHeader, while the upstream is refused (a gate or the breaker)
	// or fails. 0 or negative: off.
	StaleIfError time.Duration
	// StaleEntries and StaleMaxBytes bound the store: entries, and the
	// largest body kept. 0 means the defaults.
	StaleEntries  int
	StaleMaxBytes int64

	// Transport sends each attempt; nil means sluice's own HTTP/1.1
	// client for http:// upstreams and a clone of http.DefaultTransport
	// for https:// ones (the pool applies HeaderTimeout and
	// UpstreamIdleTimeout to either). Tests inject one.
	Transport http.RoundTripper

	// Observer sees every gate's decisions (promsluice.Metrics for
	// histograms). Nil means none.
	Observer admit.Observer
	// Logger receives upstream errors at debug and ejections at warn.
	// Nil is silent.
	Logger *slog.Logger
	// Now is the clock for ejections and stale ages; nil means time.Now.
	Now func() time.Time
}

// Limit selects a fixed or an adaptive capacity for a gate.
type Limit struct {
	// Law is "fixed" (or empty), "aimd", "vegas" or "gradient2".
	Law string `json:"limit,omitempty"`
	// Min and Max bound an adaptive limit. 0 means 1 and the gate's
	// configured capacity (its ceiling).
	Min int64 `json:"limit_min,omitempty"`
	Max int64 `json:"limit_max,omitempty"`
	// SLO anchors an adaptive limit (see limit.Config.SLO). 0: none.
	SLO Duration `json:"slo,omitempty"`
}

// Adaptive reports whether the limit moves.
func (l Limit) Adaptive() bool { return l.Law != "" && l.Law != "fixed" }

// Queueing says how a gate's queue is ordered and which requests it sheds
// first, with the meaning `sluice serve` gives its --queue-discipline,
// --priority-header and --class-share (one checker serves both).
// The zero value is a FIFO queue with every request in the default class,
// critical.
type Queueing struct {
	// Discipline is "fifo" (or empty), "lifo" or "codel"; other than
	// fifo needs a queue.
	Discipline string `json:"queue_discipline,omitempty"`
	// PriorityHeader names the request header carrying the request's
	// class: critical_plus, critical, sheddable_plus or sheddable. A
	// missing, unknown or oversized value is critical, so a bad header
	// never buys a better class. Under pressure lower classes are
	// refused first (reason shed). Needs a queue.
	PriorityHeader string `json:"priority_header,omitempty"`
	// ClassShares are guaranteed minimum shares of the gate,
	// "class=fraction" each ("sheddable=0.1", "critical=50%"), summing to
	// at most 1. Needs PriorityHeader.
	ClassShares []string `json:"class_shares,omitempty"`
}

func (q Queueing) compile(queue int) (queuerules.Compiled, error) {
	return queuerules.Rules{Discipline: q.Discipline, PriorityHeader: q.PriorityHeader, ClassShares: q.ClassShares}.
		Compile(queue, queuerules.Names{Discipline: "queue_discipline", PriorityHeader: "priority_header", ClassShares: "class_shares", Queue: "queue"})
}

// Route is a per-route rule, the unit of the proxy's config file.
type Route struct {
	// Name labels the route's gate, and its quota as Name+"-quota"
	// (metrics, /state, refusal bodies): [A-Za-z0-9_.-], at most 58
	// bytes. Required.
	Name string `json:"name"`
	// PathPrefix matches the request path ("/api/"); empty matches all.
	PathPrefix string `json:"path,omitempty"`
	// Host matches the request's host, port ignored, case-insensitive;
	// empty matches all.
	Host string `json:"host,omitempty"`
	// Methods match the request method, case-sensitively (so they are
	// written upper case: "get" is refused); empty matches all.
	Methods []string `json:"methods,omitempty"`

	// MaxInflight, when above 0, gives the route its own gate of that
	// many slots (named after the route), taken before the upstream gate.
	// 0: the route has no gate of its own.
	MaxInflight int64 `json:"max_inflight,omitempty"`
	// Queue and MaxWait bound the route gate's queue (0: none).
	Queue   int      `json:"queue,omitempty"`
	MaxWait Duration `json:"max_wait,omitempty"`
	// Limit makes the route gate adaptive (needs MaxInflight).
	Limit
	// Queueing orders the route gate's queue and gives the route's
	// requests their class from a header (needs Queue). A route without
	// a PriorityHeader takes its requests' class from the upstream's
	// (Config.Queueing), if any.
	Queueing

	// Cost is how many slots of the upstream gate, and tokens of the
	// route's quota, one request takes. 0 means 1.
	Cost int `json:"cost,omitempty"`
	// Quota, if set, limits each client's rate on this route (429).
	Quota *RouteQuota `json:"quota,omitempty"`

	// Upgrades lists the protocols (an Upgrade header's tokens, such as
	// "websocket"; case-insensitive) this route tunnels. Each tunnel holds
	// a slot of the "tunnels" gate, not the route's or the upstream gate.
	// An upgrade to anything else is refused with 403; h2c is never
	// tunnelled (an error here). Empty: no upgrades.
	Upgrades []string `json:"upgrades,omitempty"`
	// Streaming puts the route's requests on the route's own gate only
	// (needs MaxInflight), never the shared upstream gate: for long
	// answers (server-sent events, large downloads) that hold their slot
	// as long as they stream, so they cannot take the slots of short
	// requests. False: the route's requests also take the upstream gate.
	Streaming bool `json:"streaming,omitempty"`
}

// QuotaName is the name of the route's quota (refusals, metrics, fleet
// keys): the route's name and "-quota".
func (rt Route) QuotaName() string { return rt.Name + quotaSuffix }

// RouteQuota is a per-client rate quota on one route (package quota).
type RouteQuota struct {
	// Rate is tokens per second per key, above zero. In JSON it is a
	// number or a string as --quota writes rates: "100/s", "600/m".
	Rate float64 `json:"rate"`
	// Burst is the bucket size; 0 means max(1, ceil(Rate)).
	Burst int `json:"burst,omitempty"`
	// Key is "ip" (the client's address: the peer's, or the one a
	// Config.TrustedProxies peer names in X-Forwarded-For; the default)
	// or "header:<Name>".
	Key string `json:"key,omitempty"`
	// MaxKeys bounds the key table; 0 means quota's default.
	MaxKeys int `json:"max_keys,omitempty"`
	// Scope is "local" (this process's own buckets), "fleet" (shared
	// through Config.FleetQuotas: `sluice proxy --quota-redis`) or empty:
	// fleet when the proxy has FleetQuotas, else local.
	Scope string `json:"scope,omitempty"`
}

// Quota scopes (RouteQuota.Scope).
const (
	ScopeLocal = "local"
	ScopeFleet = "fleet"
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("250ms", "2s").
type Duration time.Duration

// UnmarshalJSON reads "250ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "250ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// Rules is the config file: {"routes": [...], "upstreams": [...]}.
type Rules struct {
	Routes []Route `json:"routes"`
	// Upstreams, when not empty, are the upstream instances, URLs as
	// Config.Upstreams wants them: a file that names them can change them
	// with the routes on a reload.
	Upstreams []string `json:"upstreams,omitempty"`
}

// File is a config file, checked: its routes and, if it names any, its
// upstream instances (nil otherwise).
type File struct {
	Routes    []Route
	Upstreams []*url.URL
}

// maxRulesBytes bounds a config file.
const maxRulesBytes = 1 << 20

// ParseRules reads a JSON config file of per-route rules and checks every
// rule: unknown fields, a key given twice in one object, and a route that
// an earlier one leaves nothing to match are errors. A leading UTF-8 byte
// order mark is skipped. Errors wrap ErrInvalidConfig and name the route
// at fault. ParseFile also returns the file's upstreams.
func ParseRules(r io.Reader) ([]Route, error) {
	f, err := ParseFile(r)
	return f.Routes, err
}

// ParseFile reads and checks a config file as ParseRules does, and its
// "upstreams" as New checks Config.Upstreams.
func ParseFile(r io.Reader) (File, error) {
	rules, err := parseRules(r)
	if err != nil {
		return File{}, err
	}
	f := File{Routes: rules.Routes}
	if len(rules.Upstreams) > maxUpstreams {
		return File{}, fmt.Errorf("%w: %d upstreams, at most %d", ErrInvalidConfig, len(rules.Upstreams), maxUpstreams)
	}
	for i, s := range rules.Upstreams {
		u, err := url.Parse(s)
		if err == nil {
			err = CheckUpstream(u)
		}
		if err != nil {
			return File{}, fmt.Errorf("%w: upstreams[%d] %q: %v", ErrInvalidConfig, i, s, err)
		}
		f.Upstreams = append(f.Upstreams, u)
	}
	if err := checkUpstreamList(f.Upstreams); err != nil {
		return File{}, err
	}
	return f, nil
}

func parseRules(r io.Reader) (Rules, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRulesBytes+1))
	if err != nil {
		return Rules{}, fmt.Errorf("%w: reading rules: %v", ErrInvalidConfig, err)
	}
	if len(data) > maxRulesBytes {
		return Rules{}, fmt.Errorf("%w: rules larger than %d bytes", ErrInvalidConfig, maxRulesBytes)
	}
	data = bytes.TrimPrefix(data, utf8BOM)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	rules, err := decodeRules(dec)
	if err != nil {
		return Rules{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if dec.More() {
		return Rules{}, fmt.Errorf("%w: trailing data after the rules object", ErrInvalidConfig)
	}
	if err := duplicateKey(data); err != nil {
		var dup *errDuplicateKey
		if errors.As(err, &dup) {
			if i := routeOf(dup.path); i >= 0 && i < len(rules.Routes) {
				return Rules{}, fmt.Errorf("%w: route %d (%q): %v", ErrInvalidConfig, i, rules.Routes[i].Name, err)
			}
		}
		return Rules{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := checkRoutes(rules.Routes); err != nil {
		return Rules{}, err
	}
	return rules, nil
}

// maxRoutes bounds the route table (each route is a metric label), and
// maxUpstreams a config file's upstream instances.
const (
	maxRoutes    = 256
	maxUpstreams = 1024
)

func checkRoutes(routes []Route) error {
	if len(routes) > maxRoutes {
		return fmt.Errorf("%w: %d routes, at most %d", ErrInvalidConfig, len(routes), maxRoutes)
	}
	seen := map[string]bool{GateUpstream: true, GateBreaker: true, GateRetry: true, GateTunnels: true}
	for i, rt := range routes {
		if err := rt.check(); err != nil {
			return fmt.Errorf("%w: route %d (%q): %v", ErrInvalidConfig, i, rt.Name, err)
		}
		if seen[rt.Name] || seen[rt.Name+quotaSuffix] {
			return fmt.Errorf("%w: route %d: name %q used twice (or reserved)", ErrInvalidConfig, i, rt.Name)
		}
		seen[rt.Name], seen[rt.Name+quotaSuffix] = true, true
		if j := shadowedBy(routes, i); j >= 0 {
			return fmt.Errorf("%w: route %d (%q): never matches: route %d (%q) comes first with the same or a wider host, methods and path prefix (%q covers %q); remove it or put the narrower route first",
				ErrInvalidConfig, i, rt.Name, j, routes[j].Name, routes[j].PathPrefix, rt.PathPrefix)
		}
	}
	return nil
}

func (rt *Route) check() error {
	if err := quota.CheckName(rt.Name + quotaSuffix); err != nil || rt.Name == "" {
		return errors.New("name: want 1 to 58 of [A-Za-z0-9_.-]")
	}
	if err := checkPathPrefix(rt.PathPrefix); err != nil {
		return err
	}
	if rt.Host != "" && (strings.ContainsAny(rt.Host, " /\t") || !httpguts.ValidHostHeader(rt.Host)) {
		return fmt.Errorf("host %q: not a host name", rt.Host)
	}
	for _, m := range rt.Methods {
		if err := checkMethod(m); err != nil {
			return err
		}
	}
	if rt.MaxInflight < 0 || rt.MaxInflight > admit.MaxCapacity {
		return fmt.Errorf("max_inflight %d: want 0 (no route gate) to %d", rt.MaxInflight, admit.MaxCapacity)
	}
	if rt.Queue < 0 || rt.MaxWait < 0 {
		return errors.New("queue and max_wait: want 0 or more")
	}
	if rt.MaxInflight == 0 && (rt.Queue > 0 || rt.MaxWait > 0 || rt.Limit != (Limit{}) || rt.Discipline != "" || rt.PriorityHeader != "" || len(rt.ClassShares) > 0) {
		return errors.New("queue, max_wait, limit, queue_discipline, priority_header and class_shares need max_inflight (the route's own gate)")
	}
	if rt.MaxWait > 0 && rt.Queue == 0 {
		return errors.New("max_wait needs queue")
	}
	if err := checkRuleDuration("max_wait", time.Duration(rt.MaxWait)); err != nil {
		return err
	}
	if err := rt.Limit.check(rt.MaxInflight); err != nil {
		return err
	}
	if _, err := rt.Queueing.compile(rt.Queue); err != nil {
		return err
	}
	if rt.Cost < 0 || rt.Cost > 1_000_000 {
		return fmt.Errorf("cost %d: want 0 (means 1) to 1000000", rt.Cost)
	}
	if err := rt.checkStreams(); err != nil {
		return err
	}
	if q := rt.Quota; q != nil {
		if !(q.Rate > 0 && q.Rate <= 1e9) {
			return fmt.Errorf("quota rate %v: want above 0 tokens per second, at most 1e9", q.Rate)
		}
		if q.Burst < 0 || q.Burst > 1_000_000_000 || q.MaxKeys < 0 || q.MaxKeys > 10_000_000 {
			return errors.New("quota burst and max_keys: want 0 or more (burst at most 1e9, max_keys at most 1e7)")
		}
		burst := q.Burst
		if burst == 0 {
			burst = max(1, int(q.Rate+0.999999))
		}
		if max(rt.Cost, 1) > burst {
			return fmt.Errorf("cost %d exceeds quota burst %d, so no request could pass", rt.Cost, burst)
		}
		if _, err := quotakey.Parse(q.Key); q.Key != "" && err != nil {
			return fmt.Errorf("quota key %q: %v", q.Key, err)
		}
		if q.Scope != "" && q.Scope != ScopeLocal && q.Scope != ScopeFleet {
			return fmt.Errorf("quota scope %q: want local or fleet", q.Scope)
		}
	}
	return nil
}

func (l Limit) check(capacity int64) error {
	if !l.Adaptive() {
		if l.Min != 0 || l.Max != 0 || l.SLO != 0 {
			return errors.New("limit_min, limit_max and slo need an adaptive limit (aimd, vegas, gradient2)")
		}
		return nil
	}
	if _, err := limit.ParseLaw(l.Law); err != nil {
		return fmt.Errorf("limit %q: want fixed, %s", l.Law, strings.Join(limit.LawNames(), ", "))
	}
	if l.Min < 0 || l.Max < 0 || l.SLO < 0 {
		return errors.New("limit_min, limit_max and slo: want 0 or more")
	}
	if err := checkRuleDuration("slo", time.Duration(l.SLO)); err != nil {
		return err
	}
	if l.Max > capacity && capacity > 0 {
		return fmt.Errorf("limit_max %d above the gate's %d slots (its ceiling)", l.Max, capacity)
	}
	hi := l.Max
	if hi == 0 {
		hi = capacity
	}
	if l.Min > hi {
		return fmt.Errorf("limit_min %d above the ceiling %d", l.Min, hi)
	}
	return nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return len(m) <= 32
}
