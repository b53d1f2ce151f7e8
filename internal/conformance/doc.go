// Package conformance checks sluice ratelimit against the reference
// Envoy rate limit service (github.com/envoyproxy/ratelimit), built from
// its module, on one real redis-server: the same ShouldRateLimit calls
// to both must get the same codes and limit_remaining in fixed-window
// mode, and in GCRA mode only the documented difference (no double burst
// at a window's edge).
//
// It is a module of its own so that the reference server's dependencies
// (statsd, OpenTelemetry, radix, memcache clients) stay out of sluice's
// module. scripts/test runs it. The reference binary is built once per
// run with `go build` from this module's go.mod (about a minute on two
// cores with an empty build cache; seconds with a warm one), which the
// benchmark script in bench/scripts/ratelimit.sh reuses.
package conformance
