package promsluice_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/retry"
	"go.uber.org/goleak"
)

// A real client retries against a real busy server, its breaker opens;
// the scrape shows attempts, retries, the breaker's state and transitions.
func TestRetryAndBreakerMetrics(t *testing.T) {
	defer goleak.VerifyNone(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer up.Close()
	b, err := breaker.New(breaker.Config{Name: "up", MinCalls: 4, OpenFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, err := retry.New(retry.Config{Name: "up", MaxAttempts: 2, BaseDelay: time.Microsecond, Breaker: b, NoThrottle: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: &retry.Transport{Policy: p, Next: tr}}
	for range 3 {
		resp, err := c.Get(up.URL)
		if err == nil {
			resp.Body.Close()
		}
	}

	reg := prometheus.NewPedanticRegistry()
	m := promsluice.NewMetrics()
	if err := m.Add(p, p, b, b); err != nil { // twice is a no-op
		t.Fatal(err)
	}
	reg.MustRegister(m)
	want := `
# HELP sluice_breaker_state 1 for the breaker's current state, 0 for the others.
# TYPE sluice_breaker_state gauge
sluice_breaker_state{breaker="up",state="closed"} 0
sluice_breaker_state{breaker="up",state="half_open"} 0
sluice_breaker_state{breaker="up",state="open"} 1
# HELP sluice_breaker_rejected_total Calls the breaker rejected.
# TYPE sluice_breaker_rejected_total counter
sluice_breaker_rejected_total{breaker="up"} 1
# HELP sluice_retry_attempts_total Attempts sent to the upstream, first attempts included.
# TYPE sluice_retry_attempts_total counter
sluice_retry_attempts_total{policy="up"} 4
# HELP sluice_retry_breaker_open_total Attempts rejected by the policy's circuit breaker.
# TYPE sluice_retry_breaker_open_total counter
sluice_retry_breaker_open_total{policy="up"} 1
# HELP sluice_retry_retries_total Retries decided (each followed by a wait and an attempt unless the caller left).
# TYPE sluice_retry_retries_total counter
sluice_retry_retries_total{policy="up"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_breaker_state", "sluice_breaker_rejected_total", "sluice_retry_attempts_total",
		"sluice_retry_breaker_open_total", "sluice_retry_retries_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m, "sluice_breaker_transitions_total"); n != 6 {
		t.Fatalf("%d transition series, want 6 (every from/to pair)", n)
	}
	if n := testutil.CollectAndCount(m, "sluice_retry_retry_after_total"); n != 2 {
		t.Fatalf("%d retry_after series, want 2 (honored, refused)", n)
	}
	// The breaker's refusal is an attempt rejected, attributable like a
	// gate's: under its name, reason breaker_open.
	if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_rejected_total", `gate="up"`, `reason="breaker_open"`)); got != 1 {
		t.Fatalf("sluice_admission_rejected_total{gate=up,reason=breaker_open} = %v, want 1", got)
	}
}
