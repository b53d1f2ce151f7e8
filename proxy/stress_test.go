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
// and a route gate, some leaving at random moments, against an upstream
// that sometimes stalls, answers 502 or resets; it samples the gates'
// invariants while it runs and requires every slot back at the end.
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
		Routes: []Route{{Name: "r", PathPrefix: "/r", MaxInflight: 2, Cost: 2}}, StaleIfError: time.Second})
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
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 25 {
				path := "/"
				if (i+j)%2 == 0 {
					path = "/r"
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.IntN(30))*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
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
