package redisquota

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Beyond the timeout, a decision takes a timer firing, a goroutine being
// scheduled and a local bucket deciding. On a shared two-core machine the
// scheduling alone can take tens of milliseconds now and then (a thread
// waits its turn behind every other runnable one), so the test measures
// it: sleepers that sleep the timeout, as many as the deciders, beside
// them. The typical (median) decision may take what the typical sleep of
// the timeout took, plus a few milliseconds, and nine in ten at most three
// timeouts: callers queued behind one another's round trips took about
// four timeouts at the median and seven at the 90th percentile.
const leaseSlack = 10 * time.Millisecond

// sleepFor runs workers goroutines that sleep d until stop closes and
// returns their sleeps' durations, sorted: the scheduler's share of any
// wait of d on this machine right now.
func sleepFor(d time.Duration, workers int, stop <-chan struct{}) func() []time.Duration {
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				time.Sleep(d)
				took := time.Since(start)
				mu.Lock()
				lats = append(lats, took)
				mu.Unlock()
			}
		})
	}
	return func() []time.Duration {
		wg.Wait()
		slices.Sort(lats)
		return lats
	}
}

// decideFor runs workers goroutines that decide for one key until stop
// closes and returns every decision's latency that started while during()
// was true, and the number admitted over the whole run.
func decideFor(q *Quota, key string, workers int, during func() bool, stop <-chan struct{}) (lat func() []time.Duration, admitted func() int64) {
	var mu sync.Mutex
	var lats []time.Duration
	var n atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				in := during()
				start := time.Now()
				_, err := q.Decide(context.Background(), key, 1)
				d := time.Since(start)
				if err == nil {
					n.Add(1)
				}
				if in {
					mu.Lock()
					lats = append(lats, d)
					mu.Unlock()
				}
			}
		})
	}
	return func() []time.Duration {
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(lats)
			return lats
		}, func() int64 {
			wg.Wait()
			return n.Load()
		}
}

// TestLeaseWaitsAtMostTheTimeout: while Redis is paused (SIGSTOP) and then
// killed, eight callers deciding for one key in lease mode each wait
// about the timeout (what a sleep of the timeout takes on this machine
// now, plus a few milliseconds): they share the one round trip in flight
// instead of queueing behind one call after another. The breaker is kept
// from opening so every decision meets the stalled Redis.
func TestLeaseWaitsAtMostTheTimeout(t *testing.T) {
	for _, fault := range []string{"paused", "killed"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t)
			const timeout = 50 * time.Millisecond
			q := mustNew(t, Config{Name: "wait", Rate: 10000, Burst: 100, Mode: Lease, LeaseSize: 2, Client: newClient(t, srv.Addr()),
				Timeout: timeout, BreakerFailures: 1 << 20})
			if _, err := q.Decide(context.Background(), "k", 1); err != nil {
				t.Fatal(err)
			}
			var faulty atomic.Bool
			stop := make(chan struct{})
			lats, _ := decideFor(q, "k", 8, faulty.Load, stop)
			time.Sleep(50 * time.Millisecond)
			faulty.Store(true)
			sleeps := sleepFor(timeout, 8, stop)
			if fault == "paused" {
				srv.Pause()
				defer srv.Resume()
			} else {
				srv.Kill()
			}
			time.Sleep(400 * time.Millisecond) // 8 times the timeout
			faulty.Store(false)
			close(stop)
			l := lats()
			if len(l) < 8 {
				t.Fatalf("only %d decisions during the fault", len(l))
			}
			sl := sleeps()
			median, p90, worst := l[len(l)/2], l[len(l)*9/10], l[len(l)-1]
			sMedian, sP90 := sl[len(sl)/2], sl[len(sl)*9/10]
			t.Logf("%s: %d decisions, median %v, 90th percentile %v, worst %v (sleeps of %v: median %v, 90th percentile %v, worst %v); store errors %d",
				fault, len(l), median, p90, worst, timeout, sMedian, sP90, sl[len(sl)-1], q.Stats().StoreErrors)
			if median > sMedian+leaseSlack || p90 > 3*timeout {
				t.Fatalf("Redis %s: decisions took %v (median) and %v (90th percentile) with a %v timeout, sleeps of the timeout %v and %v: callers queue behind each other's round trips",
					fault, median, p90, timeout, sMedian, sP90)
			}
			if st := q.Stats(); st.FallbackDecisions == 0 {
				t.Fatalf("no decision fell back: %+v", st)
			}
		})
	}
}

// TestLeaseBoundThroughStalledRedis: Redis stalls (SIGSTOP) for half a
// second, recovers, then dies, so decisions move from the shared bucket
// to the fallback share, back, and to the share again. What is admitted
// still stays within the documented bound, Burst + Rate*W +
// Instances*LeaseSize: fleet admissions spend the share, so it is empty
// when Redis stalls, and what the share admits is owed to the shared
// bucket, which refilled meanwhile. Before, each bucket refilled while the
// other decided, and a client got nearly both. The breaker opens on the
// first timeout (200 ms, which a loaded machine's Redis still meets) and
// stays open through the stall, so that no call queued
// in the stalled Redis spends tokens when it resumes (which would hide an
// over-admission). 1.7 s: the bound is about the rate over a window,
// which needs a window longer than the stall.
func TestLeaseBoundThroughStalledRedis(t *testing.T) {
	srv := redistest.Start(t)
	const rate, burst, size = 100.0, 100, 10
	q := mustNew(t, Config{Name: "stall", Rate: rate, Burst: burst, Mode: Lease, LeaseSize: size, Client: newClient(t, srv.Addr()),
		Timeout: 200 * time.Millisecond, BreakerFailures: 1, BreakerCooldown: 600 * time.Millisecond})
	start := time.Now()
	stop := make(chan struct{})
	_, admitted := decideFor(q, "k", 4, func() bool { return false }, stop)
	time.Sleep(300 * time.Millisecond) // the fleet decides, the share is spent with it
	srv.Pause()
	time.Sleep(500 * time.Millisecond)
	srv.Resume()
	time.Sleep(600 * time.Millisecond) // the breaker closes; the share's admissions are paid back
	srv.Kill()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	got := admitted()
	el := time.Since(start)
	st := q.Stats()
	bound := burst + rate*el.Seconds() + size
	fleet, share := q.fleetAllowed.Load(), q.shareAllowed.Load()
	t.Logf("admitted %d in %v (bound %.0f): %d by the fleet, %d by the share; fallback decisions %d, round trips %d, store errors %d",
		got, el, bound, fleet, share, st.FallbackDecisions, q.LeaseCalls(), st.StoreErrors)
	if fleet == 0 || share == 0 {
		t.Fatalf("want decisions by both the fleet and the share: %d and %d", fleet, share)
	}
	if float64(got) > bound {
		t.Fatalf("lease mode admitted %d in %v through a stalled, then dead Redis; the documented bound is %.0f", got, el, bound)
	}
	if float64(got) < 0.5*bound {
		t.Fatalf("admitted %d in %v: far below the quota %.0f", got, el, bound)
	}
}
