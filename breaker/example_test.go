package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
)

func Example() {
	b, _ := breaker.New(breaker.Config{Name: "users-api", MinCalls: 3, OpenFor: 30 * time.Second})
	for range 3 {
		call, err := b.Allow()
		if err != nil {
			break
		}
		call.Done(breaker.Failure) // the upstream failed
	}
	_, err := b.Allow()
	var re *admit.RejectedError
	if errors.As(err, &re) {
		fmt.Println(b.State(), re.Reason(), re.Gate(), re.RetryAfterSeconds() > 0)
	}
	// Output: open breaker_open users-api true
}

// A Group gives each upstream its own breaker: failures on one host open
// only that host's breaker.
func ExampleGroup() {
	g, _ := breaker.NewGroup(breaker.GroupConfig{Breaker: breaker.Config{Name: "backends", MinCalls: 3}})
	for range 3 {
		call, _ := g.Get("10.0.0.1:8080").Allow()
		call.Done(breaker.Failure)
	}
	_, errBad := g.Get("10.0.0.1:8080").Allow()
	_, errGood := g.Get("10.0.0.2:8080").Allow()
	fmt.Println(breaker.IsOpen(errBad), errGood == nil, g.Len())
	for key, b := range g.All() {
		fmt.Println(key, b.Name(), b.State())
	}
	// Output:
	// true true 2
	// 10.0.0.1:8080 backends/10.0.0.1:8080 open
	// 10.0.0.2:8080 backends/10.0.0.2:8080 closed
}
