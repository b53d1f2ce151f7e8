// Package promsluice exports sluice's counters to Prometheus, so the core
// packages (admit, connlimit, quota, limit, retry, breaker, pool) never
// import client_golang.
//
// # Usage
//
// One Metrics meters everything a service builds: gates built with its
// NewGate (observed and exported in one step), and whatever else the
// service built, in one call to Add:
//
//	m := promsluice.NewMetrics()
//	db, err := m.NewGate(admit.Config{Name: "db", Capacity: 8, MaxWaiters: 16, MaxWait: 100 * time.Millisecond})
//	perClient, err := quota.New(quota.Config{Name: "per-client", Rate: 50, Burst: 100})
//	users, err := breaker.New(breaker.Config{Name: "users-api"})
//	err = m.Add(perClient, users) // and adaptive limits, fleet quotas, breaker groups, retry policies, pools
//	reg.MustRegister(m)
//
// With package server, which owns its registry, hand the Metrics over
// instead of registering it:
//
//	srv, err := server.Listen(ctx, server.Config{Gates: m.Gates(), Metrics: m, ...})
//
// Counters and gauges are read from each part's Stats at scrape time: the
// parts already count them, so exporting costs nothing between scrapes
// and can never drift from what the parts say in /state. Histograms need
// every sample, so Metrics is also an admit.Observer (and a pool.Observer),
// and a gate feeds the histograms only if it was built with it as its
// Observer: that is why NewGate exists, and why limit.NewGate keeps the
// Observer of the admit.Config it is given. Add of a gate built without it
// exports counters only.
//
// NewConnMetrics (a listener's connection limit, which package server
// exports itself) and NewCacheMetrics (a content cache) are collectors of
// their own.
//
// # Gate metrics
//
// Labels are bounded: gate, kind, reason, outcome. Never a path, a client
// address, a key or an error string. Every per-kind series (offered,
// admitted, rejected, completed, and both histograms) carries gate and
// kind; gauges of the whole gate (inflight, waiting, capacity, peak in
// use) carry gate only. A gate configured without kinds has one kind,
// "default", so a one-kind gate exports one series per name and reason,
// not two.
//
//	sluice_admission_offered_total{gate,kind}
//	sluice_admission_admitted_total{gate,kind}
//	sluice_admission_rejected_total{gate,kind,reason}
//	sluice_admission_completed_total{gate,kind,outcome}
//	sluice_admission_wait_seconds{gate,kind}   histogram: time queued, admitted or not
//	sluice_admission_hold_seconds{gate,kind}   histogram: time a slot was held
//	sluice_admission_inflight{gate}
//	sluice_admission_waiting{gate}
//	sluice_admission_capacity{gate}
//	sluice_admission_peak_in_use{gate}
//	sluice_admission_misuse_total{gate}
//
// # Rejections made outside gates
//
// A quota or a breaker rejects without a gate, yet `sluice load --metrics`
// attributes a refusal only through sluice_admission_rejected_total. So
// Add counts a quota's rejections there under the quota's name (reason
// rate, full or breaker_open) and a breaker's under the breaker's
// (breaker_open): the gate and reason their refusals carry. Metrics owns
// that family, so a series two sources report is summed, never exported
// twice. AddRefusals adds other sources (a proxy's answers for its retry
// policy, say).
//
// # The other families
//
//	sluice_limit_*     adaptive limits: capacity, latency, baseline, SLO budget, decisions, ramp
//	sluice_quota_*     quotas: allowed, limited (429), refused otherwise, keys, evictions, mode
//	sluice_breaker_*   breakers: state, transitions, allowed, rejected
//	sluice_retry_*     retry policies: attempts, retries, budget exhausted, throttled, ...
//	sluice_pool_*      pools: offered, admitted, rejected, completed, workers, queue
//
// docs/limit.md, docs/quota.md, docs/calls.md and docs/pool.md list each
// family's series and labels.
package promsluice
