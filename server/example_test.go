package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/server"
)

// A handler behind a gate on the server frame, its health on the admin
// listener, and a graceful shutdown when the context ends.
func Example() {
	gm := promsluice.NewMetrics()
	work, _ := admit.New(admit.Config{Name: "work", Capacity: 8, Observer: gm})
	mw, _ := httpgate.New(httpgate.Config{})
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := server.Listen(ctx, server.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", // real servers use fixed ports
		Handler: mw.Guard(work, hello), Gates: []*admit.Gate{work}, Metrics: gm,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()

	for _, url := range []string{"http://" + srv.Addr().String() + "/", "http://" + srv.AdminAddr().String() + "/healthz"} {
		resp, err := http.Get(url)
		if err != nil {
			fmt.Println(err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(b))
	}
	cancel()
	fmt.Println("shutdown:", <-done, "admitted:", work.Stats().Admitted)
	http.DefaultClient.CloseIdleConnections()
	// Output:
	// 200 hello
	// 200 {"status":"ok"}
	// shutdown: <nil> admitted: 1
}
