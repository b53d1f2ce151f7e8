package connlimit_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/connlimit"
)

// A server that admits one connection at a time: the second client gets
// the busy reply.
func Example() {
	l, err := connlimit.Listen(context.Background(), "tcp", "127.0.0.1:0", connlimit.Config{
		MaxConns:          1,
		IdleTimeout:       30 * time.Second,
		ReadHeaderTimeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})}
	l.ConfigureServer(srv)
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	first := get(l.Addr())  // takes the only slot and keeps it
	second := get(l.Addr()) // over the limit
	defer first.Close()
	defer second.Close()

	s := l.Stats()
	fmt.Println("open:", s.Open, "rejected:", s.Rejected[connlimit.ReasonMaxConns])
	// Output:
	// 200 OK hello
	// 503 Service Unavailable {"error":"BUSY","gate":"connections","reason":"max_conns"}
	// open: 1 rejected: 1
}

// get sends one request on a new connection, prints the answer, and
// returns the connection still open.
func get(addr net.Addr) net.Conn {
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: example\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %s", resp.Status, body)
	return c
}
