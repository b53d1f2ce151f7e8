package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// The backlog drain table: backlog 120,000, 900 attempts a second.
func TestDrainTable(t *testing.T) {
	rows := []struct {
		refused, completed    float64
		accepted, net, second float64
		never                 bool
	}{
		{refused: 400, completed: 500, accepted: 500, net: 0, never: true},
		{refused: 600, completed: 500, accepted: 300, net: 200, second: 600},
		{refused: 600, completed: 400, accepted: 300, net: 100, second: 1200},
	}
	for _, row := range rows {
		got, err := Drain{Backlog: 120000, Offered: 900, Refused: row.refused, Completed: row.completed}.Solve()
		if err != nil {
			t.Fatal(err)
		}
		if got.Accepted != row.accepted || got.NetDrain != row.net || got.Never != row.never || got.Seconds != row.second {
			t.Errorf("refused %v completed %v: got accepted %v net %v never %v seconds %v; want %v %v %v %v",
				row.refused, row.completed, got.Accepted, got.NetDrain, got.Never, got.Seconds,
				row.accepted, row.net, row.never, row.second)
		}
	}
}

func TestDrainGrowsAndRequeues(t *testing.T) {
	got, err := Drain{Backlog: 1000, Offered: 900, Refused: 300, Completed: 500}.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if got.NetDrain != -100 || !got.Never || got.Seconds != 0 {
		t.Errorf("got %+v, want net −100, never", got)
	}
	// Retries re-entering the queue count as accepted work: 300 + 100
	// requeued leaves 100/s of drain, not 200.
	got, err = Drain{Backlog: 120000, Offered: 900, Refused: 600, Completed: 500, Requeued: 100}.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if got.Accepted != 400 || got.NetDrain != 100 || got.Seconds != 1200 {
		t.Errorf("got %+v, want accepted 400, net 100, 1200 s", got)
	}
	// No backlog: nothing to drain, whatever the rates.
	got, err = Drain{Offered: 10, Completed: 5}.Solve()
	if err != nil || got.Never || got.Seconds != 0 {
		t.Errorf("empty backlog: got %+v, %v", got, err)
	}
}

func TestDrainRefusesBadInput(t *testing.T) {
	for _, in := range []Drain{
		{Backlog: -1},
		{Offered: math.NaN()},
		{Completed: math.Inf(1)},
		{Offered: 10, Refused: 11},
		{Requeued: 1e300},
	} {
		if _, err := in.Solve(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: err %v, want ErrInvalidInput", in, err)
		}
	}
	_, err := Drain{Offered: 10, Refused: 11}.Solve()
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != "refused" {
		t.Errorf("err %v: want an InputError on refused", err)
	}
}

// 500 a second staying 0.2 s on average: about 100 in flight.
func TestLittleBothWays(t *testing.T) {
	cases := []struct {
		in     Little
		scope  Scope
		solved string
		want   float64
	}{
		{Little{Rate: 500, TotalTime: 0.2}, ScopeSystem, "count", 100},
		{Little{InSystem: 100, TotalTime: 0.2}, ScopeSystem, "rate", 500},
		{Little{InSystem: 100, Rate: 500}, ScopeSystem, "time", 0.2},
		{Little{Rate: 500, QueueTime: 0.05}, ScopeQueue, "count", 25},
		{Little{Queued: 25, Rate: 500}, ScopeQueue, "time", 0.05},
		{Little{Queued: 25, QueueTime: 0.05, Statistic: "mean"}, ScopeQueue, "rate", 500},
	}
	for _, c := range cases {
		got, err := c.in.Solve()
		if err != nil {
			t.Fatalf("%+v: %v", c.in, err)
		}
		var v float64
		switch c.solved {
		case "count":
			v = got.Count
		case "rate":
			v = got.Rate
		case "time":
			v = got.Time
		}
		if got.Scope != c.scope || got.Solved != c.solved || math.Abs(v-c.want) > 1e-9 || !got.AddsUp {
			t.Errorf("%+v: got %+v, want scope %s solved %s = %v", c.in, got, c.scope, c.solved, c.want)
		}
	}
}

func TestLittleCheck(t *testing.T) {
	got, err := Little{Rate: 500, TotalTime: 0.2, InSystem: 105}.Solve()
	if err != nil || got.Solved != "check" || !got.AddsUp || math.Abs(got.Ratio-1.05) > 1e-9 {
		t.Errorf("within tolerance: got %+v, %v", got, err)
	}
	// 300 in flight where 500/s × 0.2 s explains 100: something holds
	// slots without completing, or a counter is missing.
	got, err = Little{Rate: 500, TotalTime: 0.2, InSystem: 300}.Solve()
	if err != nil || got.AddsUp || math.Abs(got.Ratio-3) > 1e-9 {
		t.Errorf("mismatch: got %+v, %v", got, err)
	}
	// Too few in flight for the traffic: a count or a rate is wrong.
	got, err = Little{Rate: 500, TotalTime: 0.2, InSystem: 50}.Solve()
	if err != nil || got.AddsUp || math.Abs(got.Ratio-0.5) > 1e-9 {
		t.Errorf("low mismatch: got %+v, %v", got, err)
	}
}

func TestLittleRefusesMixedScopes(t *testing.T) {
	for _, in := range []Little{
		{Queued: 40, TotalTime: 0.2},
		{InSystem: 100, QueueTime: 0.05},
		{Queued: 40, TotalTime: 0.2, Rate: 500},
	} {
		_, err := in.Solve()
		if !errors.Is(err, ErrMixedScope) {
			t.Errorf("%+v: err %v, want ErrMixedScope", in, err)
		}
	}
}

func TestLittleRefusesPercentiles(t *testing.T) {
	for _, stat := range []string{"p99", "P50", "max", "median"} {
		_, err := Little{Rate: 500, TotalTime: 0.2, Statistic: stat}.Solve()
		if !errors.Is(err, ErrNotAverage) {
			t.Errorf("stat %q: err %v, want ErrNotAverage", stat, err)
		}
	}
}

func TestLittleRefusesBadInput(t *testing.T) {
	for _, in := range []Little{
		{Rate: 500},                           // one figure
		{},                                    // none
		{Rate: -1, TotalTime: 1},              // negative
		{Rate: math.NaN(), TotalTime: 1},      // NaN
		{InSystem: 1, Queued: 1, Rate: 1},     // two counts
		{TotalTime: 1, QueueTime: 1, Rate: 1}, // two times
		{InSystem: 1e10, TotalTime: 1e-300},   // rate overflows
		{Rate: 1e15, TotalTime: 1e15},         // count beyond counting
		{Rate: math.Inf(1), TotalTime: 1},     // infinite
		{Rate: 1, TotalTime: maxFigure * 2},   // too large
	} {
		if _, err := in.Solve(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: err %v, want ErrInvalidInput", in, err)
		}
	}
}

func TestQueueSize(t *testing.T) {
	got, err := QueueSize{TargetWait: 0.2, SafeRate: 500, ItemBytes: 64 << 10}.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if got.Capacity != 100 || got.Bytes != 100*64<<10 {
		t.Errorf("got %+v, want 100 items, 6.25 MiB", got)
	}
	// A fraction of an item rounds up: 0.25 s × 10/s = 2.5 → 3.
	got, err = QueueSize{TargetWait: 0.25, SafeRate: 10}.Solve()
	if err != nil || got.Capacity != 3 || got.Bytes != 0 {
		t.Errorf("got %+v, %v; want 3 items", got, err)
	}
	for _, in := range []QueueSize{{SafeRate: 1}, {TargetWait: 1}, {TargetWait: -1, SafeRate: 1}, {TargetWait: 1e10, SafeRate: 1e10}} {
		if _, err := in.Solve(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: err %v, want ErrInvalidInput", in, err)
		}
	}
}

// Three layers that each try up to 4 times: 64 attempts at the bottom.
func TestRetryAmplification(t *testing.T) {
	got, err := Retry{Attempts: 4, Layers: 3, Rate: 100}.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if got.WorstCase != 64 || got.WithBudget != 64 || got.BottomRate != 6400 {
		t.Errorf("got %+v, want 64 per original, 6400/s", got)
	}
	if len(got.PerLayer) != 3 || got.PerLayer[0] != 4 || got.PerLayer[1] != 16 {
		t.Errorf("per layer %v, want [4 16 64]", got.PerLayer)
	}
	// "At most 3 tries" at one layer still triples load when everything fails.
	got, err = Retry{Attempts: 3, Layers: 1}.Solve()
	if err != nil || got.WorstCase != 3 {
		t.Errorf("got %+v, %v; want 3", got, err)
	}
	// A 10 % budget caps each layer at 1.1: 1.1³ = 1.331.
	got, err = Retry{Attempts: 4, Layers: 3, Budget: 0.1, Rate: 1000}.Solve()
	if err != nil || math.Abs(got.WithBudget-1.331) > 1e-9 || math.Abs(got.BottomRateWithBudget-1331) > 1e-6 || got.WorstCase != 64 {
		t.Errorf("got %+v, %v; want 1.331 with the budget", got, err)
	}
	// A budget larger than the attempts allow changes nothing.
	got, err = Retry{Attempts: 2, Layers: 2, Budget: 5}.Solve()
	if err != nil || got.WithBudget != 4 {
		t.Errorf("got %+v, %v; want 4", got, err)
	}
	for _, in := range []Retry{{Attempts: 0, Layers: 1}, {Attempts: 1, Layers: 0}, {Attempts: 1, Layers: 65},
		{Attempts: 2, Layers: 1, Budget: -0.1}, {Attempts: 1 << 30, Layers: 64}} {
		if _, err := in.Solve(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: err %v, want ErrInvalidInput", in, err)
		}
	}
}

// 50 connections per instance × 10 instances = 500 at the database.
func TestFleetTotals(t *testing.T) {
	got, err := Fleet{PerInstance: 50, Instances: 10}.Solve()
	if err != nil || got.Total != 500 || got.Over || got.MaxInstances != 0 {
		t.Errorf("got %+v, %v; want 500", got, err)
	}
	got, err = Fleet{PerInstance: 50, Instances: 20, Shared: 500}.Solve()
	if err != nil || got.Total != 1000 || !got.Over || got.Excess != 500 || got.MaxInstances != 10 || got.FairPerInstance != 25 {
		t.Errorf("got %+v, %v; want 1000, over by 500, 10 instances max, 25 each", got, err)
	}
	got, err = Fleet{PerInstance: 50, Instances: 10, Shared: 500}.Solve()
	if err != nil || got.Over || got.Excess != 0 {
		t.Errorf("exactly at the limit is not over: got %+v, %v", got, err)
	}
	for _, in := range []Fleet{{Instances: 1}, {PerInstance: 1}, {PerInstance: 1, Instances: 1, Shared: -1}, {PerInstance: 1 << 40, Instances: 1 << 40}} {
		if _, err := in.Solve(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: err %v, want ErrInvalidInput", in, err)
		}
	}
}

// TestLittleWaitingJoinsInSystem: a gate's inflight gauge leaves its queue
// out; with the waiting gauge added the check adds up where inflight alone
// does not.
func TestLittleWaitingJoinsInSystem(t *testing.T) {
	got, err := Little{Rate: 500, TotalTime: 0.2, InSystem: 60, Waiting: 40}.Solve()
	if err != nil || !got.AddsUp || got.Count != 100 || got.Scope != ScopeSystem {
		t.Errorf("inflight 60 + waiting 40 against 500/s × 0.2 s: %+v %v, want it to add up", got, err)
	}
	if got, _ := (Little{Rate: 500, TotalTime: 0.2, InSystem: 60}).Solve(); got.AddsUp {
		t.Errorf("inflight 60 alone: %+v, want it not to add up", got)
	}
	for _, in := range []Little{{Rate: 500, TotalTime: 0.2, Waiting: 40}, {Rate: 500, QueueTime: 0.1, Queued: 50, Waiting: 40}} {
		_, err := in.Solve()
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(ie.Field, "waiting") {
			t.Errorf("%+v: err %v, want an InputError on waiting", in, err)
		}
	}
}
