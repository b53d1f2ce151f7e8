// Command connlimit-bench is the server side of bench/connlimit/run.sh: a
// net/http server answering "ok", on a bare listener (-mode plain), on a
// connlimit.Listener with room (-mode served), or on one whose only slot
// is held by the program itself, so that every client connection is
// refused with the busy 503: politely (-mode refused: wait for the
// request, reply, FIN, wait for the client's close) or at once on the
// accept path (-mode refused_fast: Config.RefuseLinger < 0).
//
// It prints "ADDR host:port" once listening and serves until stdin
// closes.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice/connlimit"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("connlimit-bench", flag.ContinueOnError)
	mode := fs.String("mode", "served", "plain, served, refused or refused_fast")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx := context.Background()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour}

	var l net.Listener
	switch *mode {
	case "plain":
		var lc net.ListenConfig
		inner, err := lc.Listen(ctx, "tcp", *addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		l = inner
	case "served", "refused", "refused_fast":
		cfg := connlimit.Config{ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour} // MaxConns derived: room for every connection the fd limit allows
		if *mode != "served" {
			cfg.MaxConns = 1
		}
		if *mode == "refused_fast" {
			cfg.RefuseLinger = -1
		}
		cl, err := connlimit.Listen(ctx, "tcp", *addr, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cl.ConfigureServer(srv)
		l = cl
	default:
		fmt.Fprintf(os.Stderr, "connlimit-bench: unknown -mode %q (want plain, served, refused or refused_fast)\n", *mode)
		return 2
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	if cfg := *mode; cfg == "refused" || cfg == "refused_fast" {
		// Take the only slot and keep it: one served keep-alive request.
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: holder\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "holder connection: %v %v\n", resp, err)
			return 1
		}
	}
	fmt.Printf("ADDR %s\n", l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
