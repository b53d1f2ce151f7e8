package proxy

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// TestStressNoSlotLeaks runs many clients at once through a small gate
// (CoDel, classes from a header) and two route gates (one LIFO with
// classes and a share), with random classes, some clients leaving at
// random moments, against an upstream that sometimes stalls, answers 502
// or resets; it samples the gates' invariants (the classes' slots and
// waiters add up to the gate's) and /state while it runs and requires
// every slot back at the end.
func TestStressNoSlotLeaks(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		switch rand.IntN(4) {
		case 0:
			select {
			case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
			case <-r.Context().Done():
			}
		case 1:
			w.WriteHeader(http.StatusBadGateway)
		case 2:
			panic(http.ErrAbortHandler)
		}
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 4, Queue: 4, MaxWait: 20 * time.Millisecond,
		Queueing: Queueing{Discipline: "codel", PriorityHeader: "X-Priority"},
		Routes: []Route{{Name: "r", PathPrefix: "/r", MaxInflight: 2, Cost: 2},
			{Name: "q", PathPrefix: "/q", MaxInflight: 2, Queue: 3, MaxWait: Duration(20 * time.Millisecond),
				Queueing: Queueing{Discipline: "lifo", PriorityHeader: "X-Priority", ClassShares: []string{"sheddable=0.5"}}}},
		StaleIfError: time.Second})
	base, c := front(t, p)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, g := range p.Gates() {
				s := g.Stats()
				if s.InUse > s.Capacity || s.InUse < 0 {
					t.Errorf("gate %s: %d slots in use of %d", g.Name(), s.InUse, s.Capacity)
				}
				var inUse, waiting int64
				for _, cs := range s.Classes {
					inUse, waiting = inUse+cs.InUse, waiting+cs.Waiting
				}
				if inUse != s.InUse || waiting != s.Waiting {
					t.Errorf("gate %s: classes hold %d slots and %d waiters, the gate %d and %d", g.Name(), inUse, waiting, s.InUse, s.Waiting)
				}
			}
			if st := p.State(); st.Upstream.Discipline != "codel" || st.Routes[1].Gate.Discipline != "lifo" || st.Upstream.QueueAgeSeconds < 0 {
				t.Errorf("/state: %+v", st)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 25 {
				path := []string{"/", "/r", "/q"}[(i+j)%3]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.IntN(30))*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
				req.Header.Set("X-Priority", []string{"critical_plus", "critical", "sheddable_plus", "sheddable", "junk"}[rand.IntN(5)])
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	waitIdle(t, p, 5*time.Second)
}
