// Package ratelimit is Envoy's global rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) on
// sluice's quotas: the configuration files of the reference server
// (github.com/envoyproxy/ratelimit) read as they are, decisions made by a
// GCRA token bucket (the default) or by the reference's fixed windows,
// counted in this process or shared by a fleet through Redis. sluice
// ratelimit (cmd/sluice) serves it over gRPC.
//
// # Usage
//
//	table, err := ratelimit.Load([]string{"/etc/ratelimit"}, false)
//	...
//	svc, err := ratelimit.New(ratelimit.Config{Redis: client, Instances: 3}, table)
//	...
//	g := grpc.NewServer()
//	pb.RegisterRateLimitServiceServer(g, svc)
//	go svc.Watch(ctx, paths, false, true, sighup) // reload on change and on SIGHUP
//	reg.MustRegister(svc.Collector())
//
// # Configuration
//
// Load and Parse read the reference server's YAML: one domain per file,
// descriptors nested to any depth, each a key with an optional value
// (key-only matches any value; a value ending in '*' matches by prefix),
// and a rate_limit of requests_per_unit per unit (second to year, a month
// being 30 days as there), unlimited, shadow_mode, quota_mode, name and
// replaces, share_threshold. detailed_metric and value_to_metric are
// accepted and have no effect: they name statsd series after descriptor
// values, and sluice's metrics never carry values. What the reference
// refuses is refused (an unknown key, an empty key, a duplicate
// descriptor, a unit on an unlimited limit, a list of anything but
// mappings), with the file and line; a known key where it has no meaning
// is kept as a warning, as the reference ignores it.
//
// sluice's own keys sit inside rate_limit and are optional: burst (the
// GCRA bucket, requests_per_unit by default), algorithm (gcra or
// fixed_window, overriding Config.Algorithm) and fail (open or closed,
// overriding Config.Fail). A file using them no longer loads in the
// reference server.
//
// Matching follows the reference: at each level an entry matches a child
// with its key and value, else a wildcard child whose prefix its value
// starts with, else a key-only child; a rule applies when it sits exactly
// at the descriptor's last entry. A request for a domain that is not
// configured is answered OK, as there.
//
// # Decisions
//
// Each descriptor that matches a rule spends its hits: its own
// hits_addend when set (zero is a check that spends nothing), else the
// request's hits_addend, at least 1. Rules named in the replaces of
// another matched rule are skipped. The overall code is OVER_LIMIT when
// any descriptor is over and its rule is neither shadow_mode nor
// quota_mode (both are counted and reported, never enforced); with
// Config.ShadowMode nothing is enforced. Statuses carry the limit,
// limit_remaining (0 when over) and duration_until_reset, and the
// response asks Envoy to add the RateLimit-Policy and RateLimit headers
// of the IETF httpapi draft (one member per limited descriptor) and, when
// over, Retry-After.
//
// FixedWindow counts hits in windows aligned to the Unix epoch and is
// over once the count passes the limit, counting hits even when over,
// exactly as the reference does: the same codes and limit_remaining
// (internal/conformance checks it against the reference server). Its
// known flaw is the window's edge: a client can spend the limit at the end
// of one window and again at the start of the next, twice the limit
// within a moment.
//
// GCRA is a token bucket of Burst tokens refilled at requests_per_unit per
// unit (quota.Quota in this process, quota/redisquota in Redis). In any
// interval t it admits at most Burst + rate×t, so there is no double burst
// at an edge; within one window a burst gets the same answers as the
// fixed window. Its differences, by design: a hit that does not fit is
// refused and not counted (no debt: a client over its limit recovers at
// the refill rate, not at a window's end); hits above Burst can never pass
// and are answered OVER_LIMIT; a check (hits_addend 0) is charged as one
// hit, because a bucket cannot be read without spending through the
// quota packages; duration_until_reset is the time until the bucket is
// full again (until the hits could pass, when over).
//
// # Backends
//
// With Config.Redis nil every rule counts in this process, in key tables
// bounded by MaxKeys (least recently used keys are dropped, and come back
// with fresh counters). With Redis, every instance using the same Redis
// and Prefix shares the counters. GCRA rules are redisquota.Quota: a Lua
// script on Redis's clock (TIME), one round trip per decision in exact
// mode, or batches of tokens spent locally in lease mode (Config.Spend),
// with the over-admission bound quota/redisquota documents. Fixed-window
// rules need counts per window, which redisquota does not keep, so they
// have their own script: one hash per descriptor holding the window's
// start on Redis's clock and its count, one key per script call so that
// it runs on Redis Cluster unchanged. Each rule has its own counters;
// rules whose domain, path and parameters survive a reload keep them.
//
// Every Redis call has a deadline (Config.Timeout, 50 ms by default);
// failures and timeouts open a breaker (redisquota's for GCRA rules, a
// breaker.Breaker for fixed-window ones) so that a dead Redis is not
// waited for on every decision, and probes close it again by themselves.
// Meanwhile each rule follows its fail policy: FailOpen decides with this
// instance's share of the limit (limit / Config.Instances), FailClosed
// answers OVER_LIMIT. A caller whose context ends is answered with its
// gRPC status, not counted against Redis.
//
// # Metrics, state and reloads
//
// Collector exports decisions by domain and code, descriptors by result,
// fallback decisions, Redis errors and round-trip times, the mode, and
// configuration loads; labels are configured domains only, never a
// descriptor's key or value (see Collector). State is the /state section.
// Watch reloads on SIGHUP and on file changes (fsnotify on the files'
// directories, so ConfigMap symlink swaps are seen); a configuration that
// does not load is refused, logged and counted, and the one in use stays.
//
// # Concurrency
//
// A Service is safe for concurrent use. The configuration in use is an
// immutable Table behind an atomic pointer, so a decision never waits for
// a reload; Service.mu guards the rule registry and is never held across
// a counter's decision. The Service starts no goroutines except within
// Watch, and closes nothing it was given.
package ratelimit
