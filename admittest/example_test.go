package admittest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/admittest"
)

// A test that fills a gate, checks that the next caller queues, then lets
// everything finish: no sleeps, and inside synctest no real time spent.
func Example() {
	t := &testing.T{} // in a real test, the test's own *testing.T
	synctest.Test(t, func(t *testing.T) {
		db, _ := admit.New(admit.Config{Name: "db", Capacity: 2, MaxWaiters: 4, MaxWait: -1})
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				p, err := db.Acquire(context.Background())
				if err != nil {
					return
				}
				<-release
				p.Done(admit.OutcomeOK)
			})
		}
		admittest.WaitInUse(t, db, 2)
		admittest.WaitQueued(t, db, 1)
		fmt.Println("in use:", db.InUse(), "queued:", db.Queued())
		close(release)
		admittest.WaitIdle(t, db)
		wg.Wait()
		fmt.Println("admitted:", db.Stats().Admitted, "in use:", db.InUse())
	})
	// Output:
	// in use: 2 queued: 1
	// admitted: 3 in use: 0
}
