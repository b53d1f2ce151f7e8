// Command canned answers every request with the disk gate's refusal (503,
// Retry-After: 1, the JSON body) and nothing else: the floor of a refusal
// on a given HTTP server, for bench/scripts/serve-refusal-cost.sh.
// -server fasthttp is github.com/valyala/fasthttp's server, the library
// the engine was measured against; -server net is net/http.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/valyala/fasthttp"
)

const body = `{"error":"BUSY","gate":"disk","reason":"full"}` + "\n"

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	server := flag.String("server", "fasthttp", "fasthttp or net")
	flag.Parse()
	switch *server {
	case "fasthttp":
		b := []byte(body)
		s := &fasthttp.Server{NoDefaultServerHeader: true, Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set("Retry-After", "1")
			ctx.SetContentType("application/json")
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBody(b)
		}}
		log.Fatal(s.ListenAndServe(*addr))
	case "net":
		log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Retry-After"] = []string{"1"}
			h["Content-Type"] = []string{"application/json"}
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(body))
		})))
	default:
		log.Fatalf("-server %q: want fasthttp or net", *server)
	}
}
