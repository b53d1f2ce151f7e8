// Package proxy is the gated reverse proxy behind `sluice proxy`: it puts
// sluice's controls in front of a service written in any language.
//
// # Usage
//
//	up, _ := url.Parse("http://127.0.0.1:9000")
//	p, err := proxy.New(proxy.Config{
//		Upstreams:   []*url.URL{up},
//		MaxInflight: 32, // the "upstream" gate
//		Queue:       32,
//		Queueing:    proxy.Queueing{Discipline: "codel", PriorityHeader: "X-Priority"},
//		Limit:       proxy.Limit{Law: "vegas", SLO: proxy.Duration(200 * time.Millisecond)},
//		Routes: []proxy.Route{{Name: "search", PathPrefix: "/search", MaxInflight: 8, Cost: 2,
//			Quota: &proxy.RouteQuota{Rate: 10, Burst: 20, Key: "header:X-Api-Key"}}},
//		StaleIfError: time.Minute,
//	})
//	...
//	srv, err := server.Listen(ctx, server.Config{Handler: p, Gates: p.Gates()})
//
// # What a request goes through
//
// The first route whose host, methods and path prefix match takes the
// request (routes are tried in order). Then, cheapest refusal first:
//
//  1. the route's quota, keyed on a header or the client's address: 429
//     with Retry-After from the bucket's refill time, gate "<route>-quota";
//  2. the route's own gate (Route.MaxInflight, fixed or adaptive): 503;
//  3. the shared "upstream" gate, Cost slots per request (Config.MaxInflight,
//     fixed or adaptive with MaxInflight as the ceiling): 503;
//  4. the call: httputil.ReverseProxy over retry.Transport (budgeted
//     retries of idempotent requests only, client-side throttling, the
//     breaker "upstream-breaker", the remaining deadline sent as
//     Request-Timeout) over a pool of instances with passive health.
//
// Slots are taken through httpgate's lazy holder, so every slot is
// released exactly once when the handler returns, however it returns. The
// upstream call runs on the request's context: a client that leaves cancels
// it, and the slot is free as soon as the proxy notices. Timeouts keep
// hostile peers from holding slots: CallTimeout (the whole call, every
// attempt inside it) and HeaderTimeout (each attempt's wait for headers,
// cut to what is left of the call), UpstreamIdleTimeout (an upstream body
// that stalls; only time waiting on the upstream counts), BodyTimeout (a
// client that declares a body and never sends it) and SendTimeout (a
// client that never reads; pushed forward as the answer is written so a
// slow but steady download is not cut). `sluice proxy` turns the last two
// off because its listener (connlimit) enforces the same per connection; a
// library user without connlimit keeps them. With the default transport
// an attempt's header and idle bounds are sluice's own client's socket
// deadlines (no context or timer per attempt); with another Transport the
// attempt has its own context and one timer for both.
//
// # Whose fault
//
// The policy that keeps one client from harming the others lives in small
// functions that do not depend on net/http's server types, so another
// HTTP engine can reuse them: storable and staleKey (what is kept for
// stale-if-error, and under which key), clientFaultStatus (how a broken
// request body is answered), abortOutcome (how an answer cut midway is
// recorded), decideUpgrade (plain, tunnel or refuse) and countedSuccess.
// A request's call (call.go) is its context: a client whose body fails
// (malformed, stalled, gone) ends the call before the error reaches the
// transport, so the retry policy, the pool's passive health and the
// breaker see a canceled call and count nothing; the client gets 400, 408
// or 499 and the slot completes as dropped. An answer whose body the
// upstream cuts short or lets stall counts against the upstream when its
// body is closed: the instance records a failure, and the breaker turns
// the success it recorded at the headers into a failure
// (breaker.LateFailure). An answer the ReverseProxy aborts midway
// completes as canceled (the client left or was cut off) or error (the
// upstream failed), never as a panic.
//
// # Tunnels and long answers
//
// An upgrade (WebSocket) is refused unless its route lists the protocol
// in Route.Upgrades; an allowed one holds a slot of the "tunnels" gate
// (Config.MaxTunnels) for its whole life instead of request slots, is
// closed after Config.TunnelIdleTimeout without traffic, and is cut at
// shutdown by CloseTunnels (server.Config.CloseHijacked), which says how
// many. An h2c upgrade is never forwarded: it is served as a plain
// request. Long answers (server-sent events, downloads) hold their request
// slots while they stream; Route.Streaming puts a route's requests on its
// own gate only, never the shared upstream gate.
//
// Every refusal is the sluice contract: 503 or 429, Retry-After, and
// {"error":"BUSY"|"RATE_LIMITED","gate":...,"reason":...}. Refusals made by
// gates are counted by the gates, those of quotas by the quotas' Stats
// (QuotaStats), those of the breaker by the breaker, and all answers
// given outside gates and quotas (breaker, retry policy) by Refusals.
// `sluice proxy` gives the quotas and the breaker to promsluice.Metrics.Add
// and the retry policy's Refusals to AddRefusals, which export them in
// sluice_admission_rejected_total beside the gates', so that `sluice load
// --metrics` attributes every refusal. An upstream
// failure that is not a refusal is 502 or 504 with
// {"error":"BAD_GATEWAY"|"UPSTREAM_TIMEOUT"}.
//
// # Queues, classes and fleet quotas
//
// Each gate (the upstream gate, Config.Queueing; a route's, Route.Queueing)
// may order its queue FIFO, LIFO or CoDel and read each request's class
// (critical_plus, critical, sheddable_plus, sheddable) from a header: under
// pressure lower classes are refused first (reason shed), and class shares
// keep a minimum for a class. These mean what `sluice serve`'s flags mean:
// one checker serves both. A request's class comes from its
// route's priority header, or else from the upstream gate's.
//
// A route quota is local (this process's buckets) or, with
// Config.FleetQuotas, a fleet quota on Redis (quota/redisquota), shared by
// every proxy on that Redis; RouteQuota.Scope picks per route.
//
// # Stale-if-error
//
// With Config.StaleIfError, the last 200 answer of each GET (bounded in
// entries and body size) is kept for that long, keyed by the inbound
// request's scheme, host, path and query and the values of the headers
// its Vary names, and served instead of a refusal (a full gate, the open
// breaker, throttling) or an upstream failure (no connection, 502, 503,
// 504), with the header Sluice-Stale naming why and Age. A client can
// always tell a stale answer. Never kept: answers to Authorization, or to
// a Cookie unless public; answers with Set-Cookie, Vary: *, or a
// Cache-Control of no-store, no-cache or private.
//
// # Forwarding headers
//
// The upstream learns who asked. From a peer in Config.TrustedProxies (a
// balancer in front) the client address chain is kept: X-Forwarded-For and
// RFC 7239 Forwarded get this hop appended, X-Forwarded-Host and
// X-Forwarded-Proto pass as they came. From any other peer they are
// replaced by the peer's address and this hop's host and scheme: a client
// cannot forge its way into the chain. Forwarded's for= is quoted when it
// carries a port or an IPv6 address. The Host header is the upstream's
// own unless Config.PreserveHost.
//
// # Reloading
//
// Reload replaces the routes and the upstream instances of a running
// Proxy. A route is known by its name: kept, it keeps its gate (the slots
// held, the requests queued; a new max_inflight is applied with
// admit.Gate.SetCapacity, never by a second gate that would add to the
// first while its requests finish) and its quota's buckets unless the
// quota changed. A change that would need a new gate (queue, max_wait,
// limit) is refused with ErrRestartNeeded, and a refused reload changes
// nothing. ParseFile reads a config file with its optional "upstreams".
//
// # Balancing and passive health
//
// Attempts go round-robin to instances not ejected; EjectAfter consecutive
// failures (no connection, 502, 504) eject an instance for EjectFor. A 503
// is an overloaded instance, not a dead one, and does not count. When every
// instance is ejected, the one whose ejection ends first still gets
// traffic: the breaker, not the balancer, decides that the service is down.
//
// # Sluice's HTTP/1.1 engine
//
// A Proxy is an http.Handler, served by net/http or by sluice's own
// HTTP/1.1 engine (internal/engine, `sluice proxy --engine fast`, the
// default for cleartext HTTP/1.1). On the engine, FastPath takes the
// proxy's decisions on the parsed request head, before any *http.Request
// exists, with the rules ServeHTTP uses (matchParts, the route's
// RequestKey and QuotaRule, the gates tried without waiting): a refusal
// is written from bytes rendered once. An admitted request without a
// body (HTTP/1.1, no expectation) is forwarded natively (native.go):
// the outbound *http.Request is built from the parsed head (the
// hop-by-hop fields dropped as ReverseProxy drops them, the forwarding
// headers' values by forwarded, which the bridged path's rewrite uses
// too, over the small inbound interface), its fields kept as a list in
// the client's order (upstream.Fields: no header map is built, copied
// for a retry's deadline or sorted), sent under the same retry policy
// (retry's RoundTripWith, each attempt's deadline field written in
// place) through the same pool, and the answer streamed back through the engine's
// Stream, whose head rules are the bridge's own code; a failed call is
// answered by upstreamError, as on the bridge. The client is watched
// for leaving only once the call has taken 10 ms, looked at by 20 ms (a
// read and a goroutine per request otherwise). Other admitted requests (a body, an
// expectation, HTTP/1.0, a stale store, a custom Transport, an upstream
// URL with a path) cross the engine's net/http bridge to the
// ReverseProxy forwarding, their slots handed over
// (httpgate.ServeAdmitted). What needs a request's context or could
// wait (a queued gate, a Request-Timeout, an upgrade, a refusal a stale
// copy may answer) is handed to ServeHTTP whole, so both front ends have
// one behaviour; the proxy's tests run on both, a matrix of raw
// requests is diffed for what the upstream receives through each, and
// the native path's answers and upstream requests are diffed against
// the bridge's and net/http's.
//
// # Design
//
// net/http/httputil.ReverseProxy does the HTTP work (hop-by-hop headers,
// streaming, trailers, 1xx); this package adds only the admission and
// calling policy around it, and the forwarding headers (its
// ProxyRequest.SetXForwarded replaces a trusted balancer's chain and
// writes no Forwarded), from sluice's own packages
// (admit, limit, quota, retry, breaker, httpgate). It was not measured to
// fall short for the gate's job; its raw throughput is a bare
// ReverseProxy's (docs/bench/proxy.md). Toward http:// upstreams it
// calls through sluice's own HTTP/1.1 client (internal/upstream: a
// bounded keep-alive pool per upstream, one framing per request written,
// strict about answers), which measured a quarter of net/http Transport's
// allocations per call; https:// upstreams keep net/http's Transport,
// which may speak HTTP/2 to them. The stale store is golang-lru's
// Cache. Queue disciplines and priority classes are admit's; newGateSet
// applies them to each gate.
//
// # Concurrency
//
// A Proxy is safe for concurrent use. The pool holds one mutex for a few
// comparisons per attempt, never while sending; the refusal counters take a
// mutex only on the first refusal of a kind; the route table is an atomic
// pointer that Reload swaps (reloads are serialised by their own mutex),
// so a request reads it once and keeps the route it matched; everything
// else is the concurrency of the packages it is built from.
package proxy
