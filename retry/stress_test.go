package retry

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/breaker"
)

// TestConcurrentClientInvariants: many goroutines share one Transport
// (budget, throttle, breaker) against a flaky upstream. Every request ends
// with an answer or an error, the upstream saw exactly the attempts the
// policy counted, and retries never exceed the budget. About 2 s under
// -race: 720 requests and their retries over real sockets, enough for the
// breaker to open and close while workers race through it.
func TestConcurrentClientInvariants(t *testing.T) {
	var seen atomic.Int64
	up := &counter{script: func(n int64, w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		switch n % 4 {
		case 0, 1:
			busy(w)
		case 2:
			http.Error(w, "boom", 500)
		default:
			io.WriteString(w, "ok")
		}
	}}
	s := serve(t, up)
	b, _ := breaker.New(breaker.Config{MinCalls: 20, FailureRatio: 0.9, OpenFor: 5 * time.Millisecond, Probes: 2})
	budget, _ := NewBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1, Window: time.Minute})
	c, p := client(t, Config{MaxAttempts: 4, Budget: budget, Breaker: b,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	const workers, each = 12, 60
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answered.Add(1)
				if st := p.Stats(); float64(st[EventRetry]) > 0.2*workers*each+60 {
					t.Errorf("retries %d beyond the budget", st[EventRetry])
				}
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	if answered.Load()+failed.Load() != workers*each {
		t.Fatalf("%d answered + %d failed != %d requests", answered.Load(), failed.Load(), workers*each)
	}
	if uint64(seen.Load()) != st[EventAttempt] {
		t.Fatalf("upstream saw %d attempts, policy counted %d", seen.Load(), st[EventAttempt])
	}
	// Every attempt is a first attempt or follows a retry decision; a
	// decided retry may still be stopped by the throttle or the breaker.
	if st[EventAttempt] > workers*each+st[EventRetry] || st[EventAttempt] < st[EventRetry] {
		t.Fatalf("attempts %d, requests %d, retries %d", st[EventAttempt], workers*each, st[EventRetry])
	}
	t.Logf("attempts %d, requests %d, retries %d, throttled %d, breaker %d", st[EventAttempt], workers*each, st[EventRetry], st[EventThrottled], st[EventBreakerOpen])
	requests, retries := budget.Counts()
	if requests != workers*each || float64(retries) > 0.2*float64(requests)+60 {
		t.Fatalf("budget counted %d requests %d retries", requests, retries)
	}
}
