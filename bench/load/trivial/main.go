// Command trivial is the benchmark target: a keep-alive HTTP server that
// answers every request with a 3-byte body and does nothing else.
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	flag.Parse()
	body := []byte("ok\n")
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(body)
	})))
}
