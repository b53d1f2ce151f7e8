package promsluice_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
)

// TestRefusalsOutsideGatesShareTheFamily: rejections made outside gates
// (a real quota and a real breaker given to Add, and a hand-made source
// given to AddRefusals) are exported in sluice_admission_rejected_total by
// the one collector that owns it, beside the gate's; a series two sources
// report is summed, never exported twice (a pedantic registry would
// refuse that).
func TestRefusalsOutsideGatesShareTheFamily(t *testing.T) {
	gm := promsluice.NewMetrics()
	g, err := gm.NewGate(admit.Config{Name: "db", Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := g.TryAcquire()
	if _, err := g.TryAcquire(); err == nil {
		t.Fatal("a full gate admitted")
	}
	p.Done(admit.OutcomeOK)
	q, err := quota.New(quota.Config{Name: "per-client", Rate: 1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	for range 3 {
		_ = q.AllowNAt("k", 1, now) // one allowed, two limited
	}
	users, err := breaker.New(breaker.Config{Name: "users-api", MinCalls: 1, OpenFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := users.Allow()
	c.Done(breaker.Failure) // opens
	for range 2 {
		if _, err := users.Allow(); !breaker.IsOpen(err) {
			t.Fatalf("open breaker let a call through: %v", err)
		}
	}
	if err := gm.Add(q, users); err != nil {
		t.Fatal(err)
	}
	gm.AddRefusals(func() []promsluice.Refusal {
		return []promsluice.Refusal{
			{Gate: "db", Reason: "full", Count: 4}, // a gate's own series: summed into it
			{Gate: "upstream-breaker", Reason: "breaker_open", Count: 2},
			{Gate: "upstream-breaker", Kind: "default", Reason: "breaker_open", Count: 1},
		}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(gm)
	want := `
# HELP sluice_admission_rejected_total Attempts rejected, by reason.
# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="db",kind="default",reason="breaker_open"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="canceled"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="closed"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="deadline"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="full"} 5
sluice_admission_rejected_total{gate="db",kind="default",reason="queue_full"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="rate"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="shed"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="wait_timeout"} 0
sluice_admission_rejected_total{gate="per-client",kind="default",reason="breaker_open"} 0
sluice_admission_rejected_total{gate="per-client",kind="default",reason="full"} 0
sluice_admission_rejected_total{gate="per-client",kind="default",reason="rate"} 2
sluice_admission_rejected_total{gate="upstream-breaker",kind="default",reason="breaker_open"} 3
sluice_admission_rejected_total{gate="users-api",kind="default",reason="breaker_open"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_admission_rejected_total"); err != nil {
		t.Error(err)
	}
}

// A quota rejects without a gate; Add counts its rejections in the gates'
// family too, so `sluice load --metrics` can attribute a 429 to it.
func ExampleMetrics_Add() {
	perClient, _ := quota.New(quota.Config{Name: "per-client", Rate: 1, Burst: 1})
	_ = perClient.AllowNAt("alice", 1, time.Unix(0, 0))
	_ = perClient.AllowNAt("alice", 1, time.Unix(0, 0)) // rejected: rate

	m := promsluice.NewMetrics()
	if err := m.Add(perClient); err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fams, _ := reg.Gather()
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if v := s.GetCounter().GetValue(); v > 0 {
				labels := ""
				for _, l := range s.GetLabel() {
					labels += " " + l.GetName() + "=" + l.GetValue()
				}
				fmt.Println(f.GetName()+labels, v)
			}
		}
	}
	// Output:
	// sluice_admission_rejected_total gate=per-client kind=default reason=rate 1
	// sluice_quota_allowed_total quota=per-client 1
	// sluice_quota_limited_total quota=per-client 1
}

// TestRefusalsScrapedWhileCounting gathers while refusals are counted and
// sources are added from other goroutines: every scrape succeeds (no
// duplicate series) and the exported count never goes down.
// Over a second under -race: 200 full gathers of a pedantic registry while
// other goroutines count and add sources.
func TestRefusalsScrapedWhileCounting(t *testing.T) {
	gm := promsluice.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(gm)
	var n atomic.Uint64
	source := func() []promsluice.Refusal {
		return []promsluice.Refusal{{Gate: "upstream-breaker", Reason: "breaker_open", Count: n.Load()}}
	}
	gm.AddRefusals(source)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				n.Add(1)
			}
		}
	})
	wg.Go(func() {
		for i := range 50 {
			gm.AddRefusals(func() []promsluice.Refusal {
				return []promsluice.Refusal{{Gate: fmt.Sprintf("q%d", i), Reason: "rate", Count: 1}}
			})
		}
	})
	var last float64
	for range 200 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "upstream-breaker" {
					v := m.GetCounter().GetValue()
					if v < last {
						t.Fatalf("breaker refusals went from %v to %v", last, v)
					}
					last = v
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	if last == 0 {
		t.Fatal("no refusal was ever exported")
	}
}
