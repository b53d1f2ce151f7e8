// Command bare is the baseline of the proxy comparison: a bare
// net/http/httputil.ReverseProxy with no gate, as a Go service would
// write it in ten lines. With -limit N it refuses, with a bare 503, any
// request beyond N in flight (a buffered channel tried without waiting):
// the cheapest gate a Go proxy can have, so the overload tables can tell
// what net/http costs from what sluice's gates and accounting add.
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:19000", "upstream URL")
	limit := flag.Int("limit", 0, "refuse requests beyond this many in flight with 503 (0: no gate)")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 100
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, Transport: t,
		ErrorLog: log.New(io.Discard, "", 0)} // canceled calls under overload would flood the output
	var h http.Handler = rp
	if *limit > 0 {
		slots := make(chan struct{}, *limit)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				rp.ServeHTTP(w, r)
			default:
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
