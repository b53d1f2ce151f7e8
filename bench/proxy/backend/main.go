// Command backend is the upstream of the proxy comparison: a server of
// known capacity. Each request holds one of -slots workers for -hold, and
// requests beyond the slots wait for one (as a thread pool with an
// unbounded queue does), so past capacity its latency grows without
// bound. With -hold 0 it answers at once (the throughput test). With
// -slow-for, the hold is multiplied by -slow-factor from -slow-from after
// the first request for -slow-for (the recovery test).
package main

import (
	"flag"
	"log"
	"net/http"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:19000", "listen address")
	slots := flag.Int("slots", 16, "workers")
	hold := flag.Duration("hold", 20*time.Millisecond, "work time per request")
	slowFrom := flag.Duration("slow-from", 10*time.Second, "start of the slow phase, after the first request")
	slowFor := flag.Duration("slow-for", 0, "length of the slow phase (0: none)")
	slowFactor := flag.Float64("slow-factor", 3, "hold multiplier during the slow phase")
	flag.Parse()
	var first atomic.Int64 // unix nanoseconds of the first request
	holdNow := func() time.Duration {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		since := time.Duration(now - first.Load())
		if *slowFor > 0 && since >= *slowFrom && since < *slowFrom+*slowFor {
			return time.Duration(float64(*hold) * *slowFactor)
		}
		return *hold
	}
	sem := make(chan struct{}, *slots)
	body := []byte("ok\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if *hold > 0 {
			select {
			case sem <- struct{}{}:
			case <-r.Context().Done():
				return
			}
			t := time.NewTimer(holdNow())
			select {
			case <-t.C:
			case <-r.Context().Done():
			}
			<-sem
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
