package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/admittest"
	"github.com/sluicehq/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The gate's whole policy, in fake time: 8 queries at once, 16 more wait,
// the 25th is refused at once, the waiters give up after 100 ms, and a
// cache hit is served while the database is saturated.
func TestDatabaseGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		a, err := newApp(map[string]string{"hot": "cached\n"}, func(ctx context.Context, id string) (string, error) {
			select {
			case <-release:
				return "row " + id, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		get := func(path string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			a.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec
		}
		codes := make(chan int, 24)
		for i := range 8 {
			go func() { codes <- get(fmt.Sprint("/item/", i)).Code }()
		}
		admittest.WaitInUse(t, a.db, 8)
		for i := range 16 {
			go func() { codes <- get(fmt.Sprint("/item/q", i)).Code }()
		}
		admittest.WaitQueued(t, a.db, 16)

		rec := get("/item/one-too-many")
		var body struct{ Error, Gate, Reason string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 503 || body.Reason != "queue_full" || rec.Header().Get("Retry-After") == "" {
			t.Errorf("25th request: %d %q Retry-After %q; want 503 queue_full with Retry-After", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		if rec := get("/item/hot"); rec.Code != 200 || rec.Body.String() != "cached\n" {
			t.Errorf("cache hit while the database is full: %d %q", rec.Code, rec.Body)
		}

		time.Sleep(100 * time.Millisecond) // the waiters' MaxWait passes
		for range 16 {
			if c := <-codes; c != 503 {
				t.Errorf("a waiter got %d after MaxWait, want 503", c)
			}
		}
		close(release)
		for range 8 {
			if c := <-codes; c != 200 {
				t.Errorf("an admitted query got %d, want 200", c)
			}
		}
		admittest.WaitIdle(t, a.db)
		s := a.db.Stats()
		if s.Admitted != 8 || s.Rejected[admit.ReasonQueueFull] != 1 || s.Rejected[admit.ReasonWaitTimeout] != 16 {
			t.Errorf("admitted %d, rejected %v", s.Admitted, s.Rejected)
		}
	})
}

// The whole service on real sockets: an answer, the metrics on the admin
// listener, and a graceful shutdown when the context ends.
func TestServeMetricsAndShutdown(t *testing.T) {
	a, err := newApp(map[string]string{"hot": "cached\n"}, func(context.Context, string) (string, error) { return "row\n", nil })
	if err != nil {
		t.Fatal(err)
	}
	main, admin := listen(t), listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, a, server.Config{Listener: main, AdminListener: admin}) }()

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	fetch := func(url string) string {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode, " ", string(b))
	}
	addr := main.Addr().String()
	if got := fetch("http://" + addr + "/item/42"); got != "200 row\n" {
		t.Errorf("/item/42: %q", got)
	}
	if got := fetch("http://" + addr + "/item/hot"); got != "200 cached\n" {
		t.Errorf("/item/hot: %q", got)
	}
	metrics := fetch("http://" + admin.Addr().String() + "/metrics")
	for _, want := range []string{
		`sluice_admission_admitted_total{gate="db",kind="default"} 1`,
		`sluice_admission_hold_seconds_count{gate="db",kind="default"} 1`,
		`sluice_connections_`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The claim docs/library.md makes: this service, with its bounded queue,
// reasons, Retry-After and metrics, takes no more code than the same
// service on golang.org/x/sync/semaphore with hand-written 503s.
func TestNoLongerThanTheSemaphoreVersion(t *testing.T) {
	ours, theirs := codeLines(t, "main.go"), codeLines(t, "../../bench/library/semaphore/main.go")
	t.Logf("code lines: sluice %d, x/sync/semaphore %d", ours, theirs)
	if ours > theirs {
		t.Errorf("examples/service has %d code lines, the semaphore version %d", ours, theirs)
	}
}

// codeLines counts the lines of a Go file that are neither blank nor
// only a comment.
func codeLines(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "//") {
			n++
		}
	}
	return n
}
