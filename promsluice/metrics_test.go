package promsluice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/pool"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/retry"
)

// fleetQuota stands in for a fleet quota (*redisquota.Quota, which needs a
// Redis): a quota's Stats, and the breaker in front of its store.
type fleetQuota struct {
	*quota.Quota
	store *breaker.Breaker
}

func (f fleetQuota) Breaker() *breaker.Breaker { return f.store }

// TestAddMetersEverythingAServiceBuilt: one Metrics, one Add, one
// registration export a service's gates, adaptive limit, quotas (a fleet
// quota's store breaker included), breakers (a group's too), retry policy
// and pool; the breakers' refusals are counted in the admission family
// under their names, the store breaker's are not (its quota decides by its
// fallback meanwhile), and the whole passes Prometheus's lint.
func TestAddMetersEverythingAServiceBuilt(t *testing.T) {
	m := promsluice.NewMetrics()
	db, err := m.NewGate(admit.Config{Name: "db", Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	upstream, adaptive, err := limit.NewGate(admit.Config{Name: "upstream", Capacity: 8, Observer: m}, &limit.Config{Law: &limit.AIMD{}})
	if err != nil {
		t.Fatal(err)
	}
	perClient, err := quota.New(quota.Config{Name: "per-client", Rate: 1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := quota.New(quota.Config{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := breaker.New(breaker.Config{Name: "shared.redis", ConsecutiveFailures: 1})
	if err != nil {
		t.Fatal(err)
	}
	users, err := breaker.New(breaker.Config{Name: "users-api", MinCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	backends, err := breaker.NewGroup(breaker.GroupConfig{Breaker: breaker.Config{Name: "backends", MinCalls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := retry.New(retry.Config{Name: "users-api", Breaker: users})
	if err != nil {
		t.Fatal(err)
	}
	thumbs, err := pool.New(pool.Config{Name: "thumbs", Core: 1, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = thumbs.Shutdown(context.Background()) }()
	if err := m.Add(upstream, adaptive, perClient, fleetQuota{shared, store}, users, backends, policy, thumbs); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	// Some traffic: the quota's 429, each breaker opened and refusing
	// once (the group's breaker for host a was created after Add).
	_ = perClient.AllowNAt("alice", 1, time.Unix(0, 0))
	_ = perClient.AllowNAt("alice", 1, time.Unix(0, 0))
	for _, b := range []*breaker.Breaker{store, users, backends.Get("a")} {
		c, _ := b.Allow()
		c.Done(breaker.Failure)
		if _, err := b.Allow(); !breaker.IsOpen(err) {
			t.Fatalf("breaker %s did not open: %v", b.Name(), err)
		}
	}
	p, _ := db.TryAcquire()
	p.Done(admit.OutcomeOK)

	for _, want := range []struct{ name, labels string }{
		{"sluice_admission_admitted_total", `gate="db"`},
		{"sluice_admission_capacity", `gate="upstream"`},
		{"sluice_limit_capacity", `gate="upstream"`},
		{"sluice_quota_limited_total", `quota="per-client"`},
		{"sluice_quota_allowed_total", `quota="shared"`},
		{"sluice_breaker_state", `breaker="users-api"`},
		{"sluice_breaker_state", `breaker="backends/a"`},
		{"sluice_breaker_state", `breaker="shared.redis"`},
		{"sluice_retry_attempts_total", `policy="users-api"`},
		{"sluice_pool_workers_max", `pool="thumbs"`},
	} {
		if !hasSeries(t, reg, want.name, want.labels) {
			t.Errorf("no %s{%s} series", want.name, want.labels)
		}
	}
	for gate, want := range map[string]float64{"users-api": 1, "backends/a": 1} {
		if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_rejected_total", `gate="`+gate+`"`, `reason="breaker_open"`)); got != want {
			t.Errorf("rejected_total{gate=%q,reason=breaker_open} = %v, want %v", gate, got, want)
		}
	}
	if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_rejected_total", `gate="per-client"`, `reason="rate"`)); got != 1 {
		t.Errorf("rejected_total{gate=per-client,reason=rate} = %v, want 1", got)
	}
	if hasSeries(t, reg, "sluice_admission_rejected_total", `gate="shared.redis"`) {
		t.Error("the store breaker's refusals are counted as rejections: its quota decided by its fallback")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

// hasSeries reports whether reg exports a series of name whose labels
// contain every fragment of match.
func hasSeries(t *testing.T, reg *prometheus.Registry, name string, match ...string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + `="` + l.GetValue() + `" `
			}
			for _, frag := range match {
				if !strings.Contains(labels, frag) {
					continue series
				}
			}
			return true
		}
	}
	return false
}
