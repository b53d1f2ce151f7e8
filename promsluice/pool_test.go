package promsluice_test

import (
	"context"
	sluicetest "github.com/sluicehq/sluice/internal/testutil"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/pool"
	"github.com/sluicehq/sluice/promsluice"
)

func TestPoolMetricsExportsCountersAndHistograms(t *testing.T) {
	m := promsluice.NewMetrics()
	p, err := pool.New(pool.Config{Name: "thumbs", Core: 1, Queue: 1, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Add(p, p); err != nil { // twice is a no-op
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	if err := p.Go(ctx, pool.Func(func(context.Context) error { close(started); <-release; return nil })); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := p.Go(ctx, pool.Func(func(context.Context) error { panic("boom") })); err != nil { // queued
		t.Fatal(err)
	}
	if err := p.Go(ctx, pool.Func(func(context.Context) error { return nil })); err == nil {
		t.Fatal("third task accepted by a full pool")
	}
	want := `
# HELP sluice_pool_queued Accepted tasks waiting for a worker.
# TYPE sluice_pool_queued gauge
sluice_pool_queued{pool="thumbs"} 1
# HELP sluice_pool_rejected_total Tasks rejected, by reason (tasks dropped by Discard count as queue_full).
# TYPE sluice_pool_rejected_total counter
sluice_pool_rejected_total{pool="thumbs",reason="canceled"} 0
sluice_pool_rejected_total{pool="thumbs",reason="closed"} 0
sluice_pool_rejected_total{pool="thumbs",reason="deadline"} 0
sluice_pool_rejected_total{pool="thumbs",reason="queue_full"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_pool_queued", "sluice_pool_rejected_total"); err != nil {
		t.Error(err)
	}
	close(release)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want = `
# HELP sluice_pool_offered_total Tasks submitted to the pool.
# TYPE sluice_pool_offered_total counter
sluice_pool_offered_total{pool="thumbs"} 3
# HELP sluice_pool_completed_total Accepted tasks that ended, by outcome (dropped: never ran).
# TYPE sluice_pool_completed_total counter
sluice_pool_completed_total{outcome="canceled",pool="thumbs"} 0
sluice_pool_completed_total{outcome="dropped",pool="thumbs"} 0
sluice_pool_completed_total{outcome="error",pool="thumbs"} 0
sluice_pool_completed_total{outcome="ok",pool="thumbs"} 1
sluice_pool_completed_total{outcome="panic",pool="thumbs"} 1
# HELP sluice_pool_workers Worker goroutines alive.
# TYPE sluice_pool_workers gauge
sluice_pool_workers{pool="thumbs"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_pool_offered_total", "sluice_pool_completed_total", "sluice_pool_workers"); err != nil {
		t.Error(err)
	}
	// The observer hears of the last task on its worker's goroutine after
	// the pool has counted it (and so after Shutdown may return).
	sluicetest.Eventually(t, "one queue-wait and one run series", func() bool {
		n, err := testutil.GatherAndCount(reg, "sluice_pool_queue_wait_seconds", "sluice_pool_run_seconds")
		return err == nil && n == 2
	})
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}
