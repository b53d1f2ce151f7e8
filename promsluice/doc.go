// Package promsluice exports sluice's counters to Prometheus, so the core
// packages (admit, connlimit) never import client_golang.
//
// Two sources feed it. Counters and gauges (offered, admitted, rejected,
// completed, inflight, waiting, capacity) are read from each gate's Stats
// snapshot at scrape time: the gate already counts them, so exporting them
// costs nothing between scrapes and can never drift from what the gate
// says in /state. Histograms (time spent waiting for a slot, time a slot
// was held) need every sample, so GateMetrics is also an admit.Observer:
// pass it as admit.Config.Observer.
//
// Metric names follow the Prometheus conventions (base units, _total on
// counters) and carry only bounded labels: gate, kind, reason, outcome.
// Never a path, a client address, a key or an error string.
//
//	m := promsluice.NewGateMetrics()
//	disk, _ := admit.New(admit.Config{Name: "disk", Observer: m})
//	m.Add(disk)
//	registry.MustRegister(m)
package promsluice
