package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// running is the service on real sockets in front of a real users-api
// that fails while failing is set.
type running struct {
	t       *testing.T
	a       *app
	addr    string
	admin   string
	failing atomic.Bool
	client  *http.Client
}

func start(t *testing.T) *running {
	t.Helper()
	r := &running{t: t, client: &http.Client{Timeout: 5 * time.Second}}
	users := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "user ", strings.TrimPrefix(req.URL.Path, "/users/"), "\n")
	}))
	t.Cleanup(users.Close)
	upstream := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(upstream.CloseIdleConnections)
	a, err := newApp(users.URL, upstream)
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	main, admin := listen(t), listen(t)
	r.addr, r.admin = main.Addr().String(), admin.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, a, server.Config{Listener: main, AdminListener: admin}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shutdown: %v", err)
		}
		r.client.CloseIdleConnections()
	})
	return r
}

func (r *running) get(url string) (int, http.Header, string) {
	r.t.Helper()
	resp, err := r.client.Get(url)
	if err != nil {
		r.t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The quota: a burst of 10 answers, then 429 RATE_LIMITED with a
// Retry-After (the bucket refills at 2 a second, so of 20 more requests
// sent at once most are refused), counted by the quota and, for `sluice
// load --metrics`, in the admission family under the quota's name.
func TestQuotaRefusesAndIsMetered(t *testing.T) {
	r := start(t)
	for i := range 10 {
		if code, _, body := r.get("http://" + r.addr + "/users/" + fmt.Sprint(i)); code != 200 || body != fmt.Sprint("user ", i, "\n") {
			t.Fatalf("request %d of the burst: %d %q", i, code, body)
		}
	}
	ok, limited := 10, 0
	for range 20 {
		code, hdr, body := r.get("http://" + r.addr + "/users/x")
		if code == 200 {
			ok++ // a token refilled meanwhile
			continue
		}
		var env struct{ Error, Gate, Reason string }
		if err := json.Unmarshal([]byte(body), &env); err != nil || code != 429 || env.Error != "RATE_LIMITED" || env.Gate != "per-client" || hdr.Get("Retry-After") == "" {
			t.Fatalf("past the burst: %d %q Retry-After %q; want 429 RATE_LIMITED from per-client with Retry-After", code, body, hdr.Get("Retry-After"))
		}
		limited++
	}
	if limited == 0 {
		t.Fatal("20 requests past the burst, none refused")
	}
	_, _, metrics := r.get("http://" + r.admin + "/metrics")
	for _, want := range []string{
		fmt.Sprintf(`sluice_quota_allowed_total{quota="per-client"} %d`, ok),
		fmt.Sprintf(`sluice_quota_limited_total{quota="per-client"} %d`, limited),
		fmt.Sprintf(`sluice_admission_rejected_total{gate="per-client",kind="default",reason="rate"} %d`, limited),
		`sluice_breaker_state{breaker="users-api",state="closed"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The breaker: users-api fails, five 502s open it, and the next request
// is refused at once with 503 breaker_open and the open time left as
// Retry-After, without a call; the refusal is metered like a gate's.
func TestBreakerOpensAndIsMetered(t *testing.T) {
	r := start(t)
	r.failing.Store(true)
	for i := range 5 {
		if code, _, _ := r.get("http://" + r.addr + "/users/1"); code != http.StatusBadGateway {
			t.Fatalf("call %d to a failing users-api: %d, want 502", i, code)
		}
	}
	if s := r.a.users.State(); s != breaker.Open {
		t.Fatalf("breaker %v after 5 failures, want open", s)
	}
	code, hdr, body := r.get("http://" + r.addr + "/users/1")
	var env struct{ Error, Gate, Reason string }
	if ra := hdr.Get("Retry-After"); json.Unmarshal([]byte(body), &env) != nil || code != 503 || env.Gate != "users-api" || env.Reason != "breaker_open" || (ra != "5" && ra != "4") {
		t.Fatalf("with the breaker open: %d %q Retry-After %q; want 503 breaker_open from users-api, Retry-After the open time left (5 s, or 4 on a slow machine)", code, body, ra)
	}
	_, _, metrics := r.get("http://" + r.admin + "/metrics")
	for _, want := range []string{
		`sluice_breaker_state{breaker="users-api",state="open"} 1`,
		`sluice_breaker_rejected_total{breaker="users-api"} 1`,
		`sluice_admission_rejected_total{gate="users-api",kind="default",reason="breaker_open"} 1`,
		`sluice_quota_allowed_total{quota="per-client"} 6`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
