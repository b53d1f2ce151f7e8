package plan_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/plan"
)

func ExampleDrain() {
	d, _ := plan.Drain{Backlog: 120000, Offered: 900, Refused: 600, Completed: 500}.Solve()
	fmt.Printf("accepted %v/s, net drain %v/s, drained in %v s\n", d.Accepted, d.NetDrain, d.Seconds)
	// Output: accepted 300/s, net drain 200/s, drained in 600 s
}

func ExampleLittle() {
	r, _ := plan.Little{Rate: 500, TotalTime: 0.2}.Solve()
	fmt.Printf("%s: L = %v\n", r.Scope, r.Count)
	_, err := plan.Little{Rate: 500, Queued: 40, TotalTime: 0.2}.Solve()
	fmt.Println(errors.Is(err, plan.ErrMixedScope))
	// Output:
	// system: L = 100
	// true
}

func ExampleRetry() {
	r, _ := plan.Retry{Attempts: 4, Layers: 3, Budget: 0.1}.Solve()
	fmt.Printf("worst case %v, with a 10%% budget %.3f\n", r.WorstCase, r.WithBudget)
	// Output: worst case 64, with a 10% budget 1.331
}

func ExampleFleet() {
	r, _ := plan.Fleet{PerInstance: 50, Instances: 10, Shared: 300}.Solve()
	fmt.Printf("total %d, over by %d; %d instances fit\n", r.Total, r.Excess, r.MaxInstances)
	// Output: total 500, over by 200; 6 instances fit
}

func ExampleQueueSize() {
	r, _ := plan.QueueSize{TargetWait: 0.2, SafeRate: 500, ItemBytes: 64 << 10}.Solve()
	fmt.Printf("%d items, %.2f MiB\n", r.Capacity, r.Bytes/(1<<20))
	// Output: 100 items, 6.25 MiB
}

func ExampleWait() {
	// Four slots, 10 ms a request, 380 requests a second.
	r, _ := plan.Wait{Slots: 4, ServiceTime: 0.010, Rate: 380, TargetP99Wait: 0.050}.Solve()
	fmt.Printf("P(wait) %.3f, mean wait %.1f ms, p99 wait %.0f ms; %d slots meet a 50 ms p99\n",
		r.PWait, r.MeanWait*1000, r.P99Wait*1000, r.NeededSlots)
	// Output: P(wait) 0.891, mean wait 44.6 ms, p99 wait 225 ms; 5 slots meet a 50 ms p99
}
