// Command bare is the baseline of the proxy comparison: a bare
// net/http/httputil.ReverseProxy with no gate, as a Go service would
// write it in ten lines.
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
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 100
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, Transport: t,
		ErrorLog: log.New(io.Discard, "", 0)} // canceled calls under overload would flood the output
	srv := &http.Server{Addr: *addr, Handler: rp, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
