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
// it, and the slot is free as soon as the proxy notices. Three timeouts keep
// hostile peers from holding slots: HeaderTimeout (an upstream that never
// answers), BodyTimeout (a client that declares a body and never sends it)
// and SendTimeout (a client that never reads; pushed forward as the answer
// is written so a slow but steady download is not cut). `sluice proxy`
// turns the last two off because its listener (connlimit) enforces the
// same per connection; a library user without connlimit keeps them.
//
// Every refusal is the sluice contract: 503 or 429, Retry-After, and
// {"error":"BUSY"|"RATE_LIMITED","gate":...,"reason":...}. Refusals made by
// gates are counted by the gates, those of quotas by the quotas' Stats
// (QuotaStats), and the others (breaker, retry policy) by Refusals;
// `sluice proxy` hands the last two to promsluice.GateMetrics.AddRefusals,
// which exports them in sluice_admission_rejected_total beside the gates',
// so that `sluice load --metrics` attributes every refusal. An upstream
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
// With Config.StaleIfError, the last 200 answer of each GET without
// credentials, cookies, Vary or a Cache-Control that forbids keeping it
// (bounded in entries and body size) is kept for that long, and served
// instead of a refusal (a full gate, the open breaker, throttling) or an
// upstream failure (no connection, 502, 503, 504), with the header
// Sluice-Stale naming why and Age. A client can always tell a stale answer.
//
// # Balancing and passive health
//
// Attempts go round-robin to instances not ejected; EjectAfter consecutive
// failures (no connection, 502, 504) eject an instance for EjectFor. A 503
// is an overloaded instance, not a dead one, and does not count. When every
// instance is ejected, the one whose ejection ends first still gets
// traffic: the breaker, not the balancer, decides that the service is down.
//
// # Design
//
// net/http/httputil.ReverseProxy does the HTTP work (hop-by-hop headers,
// X-Forwarded-*, streaming, trailers, 1xx); this package adds only the
// admission and calling policy around it, from sluice's own packages
// (admit, limit, quota, retry, breaker, httpgate). It was not measured to
// fall short for the gate's job; its raw throughput is a bare
// ReverseProxy's (docs/bench/proxy.md). The stale store is golang-lru's
// Cache. Queue disciplines and priority classes are admit's; newGateSet
// applies them to each gate.
//
// # Concurrency
//
// A Proxy is safe for concurrent use. The pool holds one mutex for a few
// comparisons per attempt, never while sending; the refusal counters take a
// mutex only on the first refusal of a kind; everything else is the
// concurrency of the packages it is built from.
package proxy
