package retry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/retry"
)

func ExampleTransport() {
	// An upstream that is busy once, then answers.
	busy := true
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy {
			busy = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "deadline header present: %t", r.Header.Get("Request-Timeout") != "")
	}))
	defer up.Close()

	p, _ := retry.New(retry.Config{Name: "example", BaseDelay: time.Millisecond})
	client := &http.Client{Transport: &retry.Transport{Policy: p}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var body [64]byte
	n, _ := resp.Body.Read(body[:])
	st := p.Stats()
	fmt.Println(resp.StatusCode, string(body[:n]))
	fmt.Println("attempts:", st[retry.EventAttempt], "retries:", st[retry.EventRetry])
	client.CloseIdleConnections()
	// Output:
	// 200 deadline header present: true
	// attempts: 2 retries: 1
}
