// Command bare is the reference for the h2spec comparison: a bare
// net/http server, HTTP/2 over TLS or cleartext HTTP/2 with prior
// knowledge, answering every request with a short body. See
// bench/scripts/h2spec.sh.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	cert := flag.String("tls-cert", "", "PEM certificate (TLS); empty for h2c")
	key := flag.String("tls-key", "", "PEM key")
	flag.Parse()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(*cert != "")
	p.SetUnencryptedHTTP2(*cert == "")
	srv := &http.Server{Addr: *addr, Protocols: p, ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok\n")
	})}
	var err error
	if *cert != "" {
		err = srv.ListenAndServeTLS(*cert, *key)
	} else {
		err = srv.ListenAndServe()
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
