package limit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
)

// An adaptive limit in front of an upstream: Vegas moves the gate's
// capacity between 4 and 256 slots, and a 200 ms SLO anchors it so a long
// incident cannot teach it that slow is normal.
func Example() {
	upstream, adaptive, err := limit.NewGate(admit.Config{Name: "upstream", Capacity: 32}, &limit.Config{
		Law: &limit.Vegas{},
		Min: 4, Max: 256,
		SLO: 200 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}

	// In the handler: the gate refuses beyond the current limit, and every
	// completion with a latency sample feeds the law.
	p, err := upstream.TryAcquire()
	if err == nil {
		// ... call the upstream ...
		p.Done(admit.OutcomeOK)
	}

	st := adaptive.State()
	fmt.Println(st.Gate, st.Law, st.Limit)
	// Output: upstream vegas 32
}

// The Go runtime's scheduling latency as the measure: a CPU-bound service
// sheds load once goroutines wait more than 5 ms for a CPU, before its own
// latency explodes.
func ExampleSchedLatency() {
	adaptive, err := limit.New(limit.Config{
		Law:    &limit.AIMD{},
		SLO:    5 * time.Millisecond,
		Signal: &limit.SchedLatency{Quantile: 0.99},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(adaptive.State().Law, adaptive.State().Ceiling)
	// Output: aimd 5ms
}
