// Package promsluice exports sluice's counters to Prometheus, so the core
// packages (admit, connlimit, quota, limit, retry, breaker) never import
// client_golang.
//
// # Usage
//
// A gate observed and exported in one step:
//
//	reg := prometheus.NewRegistry()
//	db, err := promsluice.NewGate(reg, admit.Config{
//		Name: "db", Capacity: 8, MaxWaiters: 16, MaxWait: 100 * time.Millisecond,
//	})
//
// More gates on the same registry share one collector: call NewGate
// again. With package server, which owns its registry, build the gates on
// a GateMetrics and hand both over:
//
//	gm := promsluice.NewGateMetrics()
//	db, err := gm.NewGate(admit.Config{Name: "db", Capacity: 8})
//	srv, err := server.Listen(ctx, server.Config{Gates: gm.Gates(), GateMetrics: gm, ...})
//
// The other collectors (NewConnMetrics, NewQuotaMetrics, NewLimitMetrics,
// NewRetryMetrics, NewBreakerMetrics, NewCacheMetrics) read their source's
// Stats at scrape time and are registered like any collector.
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
// # Refusals made outside gates
//
// A quota, a breaker or a retry policy refuses without a gate, yet `sluice
// load --metrics` attributes a refusal only through
// sluice_admission_rejected_total. GateMetrics.AddRefusals adds such
// refusals to that family (QuotaRefusals reads quotas' Stats for it), so
// one collector owns the family and a series two sources report is
// summed, never exported twice:
//
//	gm.AddRefusals(promsluice.QuotaRefusals(perClient.Stats))
//
// # Design
//
// Counters and gauges are read from each gate's Stats snapshot at scrape
// time: the gate already counts them, so exporting them costs nothing
// between scrapes and can never drift from what the gate says in /state.
// Histograms need every sample, so GateMetrics is also an admit.Observer,
// and a gate feeds the histograms only if it was built with it as its
// Observer. That is why NewGate exists: Add alone exports counters, and a
// gate built without the Observer has no histograms. Both paths are
// tested; NewGate cannot forget either step.
package promsluice
