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
