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

// The body of a test that fills a gate, checks that the next caller
// queues, then lets everything finish: no sleeps, and inside synctest no
// real time spent. (TestWaitInUseQueuedIdle runs the same steps.)
func Example() {
	var t *testing.T // the test's own
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
}
