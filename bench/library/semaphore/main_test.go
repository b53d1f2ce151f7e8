package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The same policy test as examples/service, so the comparison is between
// two services that do the same thing.
func TestDatabaseGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		a := newApp(map[string]string{"hot": "cached\n"}, func(ctx context.Context, id string) (string, error) {
			select {
			case <-release:
				return "row " + id, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		get := func(path string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			a.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec
		}
		codes := make(chan int, 24)
		for i := range 24 {
			go func() { codes <- get(fmt.Sprint("/item/", i)).Code }()
		}
		synctest.Wait()
		if n := a.waiting.Load(); n != 16 {
			t.Fatalf("%d queued, want 16", n)
		}
		if rec := get("/item/x"); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"queue_full"`) || rec.Header().Get("Retry-After") == "" {
			t.Errorf("25th: %d %q", rec.Code, rec.Body)
		}
		if rec := get("/item/hot"); rec.Code != 200 {
			t.Errorf("cache hit while full: %d", rec.Code)
		}
		time.Sleep(maxWait)
		for range 16 {
			if c := <-codes; c != 503 {
				t.Errorf("a waiter got %d after maxWait, want 503", c)
			}
		}
		close(release)
		for range 8 {
			if c := <-codes; c != 200 {
				t.Errorf("an admitted query got %d", c)
			}
		}
	})
}

func TestServeMetricsAndShutdown(t *testing.T) {
	a := newApp(nil, func(context.Context, string) (string, error) { return "row\n", nil })
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	admin, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, a, l, admin) }()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for _, url := range []string{"http://" + l.Addr().String() + "/item/1", "http://" + admin.Addr().String() + "/metrics"} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (strings.HasSuffix(url, "metrics") && !strings.Contains(string(b), "db_admitted_total 1")) {
			t.Errorf("%s: %d %.200q", url, resp.StatusCode, b)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
