// Command backend is the upstream of the proxy comparison: a server of
// known capacity. Each request holds one of -slots workers for -hold, and
// requests beyond the slots wait for one (as a thread pool with an
// unbounded queue does), so past capacity its latency grows without
// bound. With -hold 0 it answers at once (the throughput test).
package main

import (
	"flag"
	"log"
	"net/http"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:19000", "listen address")
	slots := flag.Int("slots", 16, "workers")
	hold := flag.Duration("hold", 20*time.Millisecond, "work time per request")
	flag.Parse()
	sem := make(chan struct{}, *slots)
	body := []byte("ok\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if *hold > 0 {
			select {
			case sem <- struct{}{}:
			case <-r.Context().Done():
				return
			}
			t := time.NewTimer(*hold)
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
