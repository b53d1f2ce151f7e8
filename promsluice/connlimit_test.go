package promsluice_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/promsluice"
	"go.uber.org/goleak"
)

// A real listener refuses a real connection; the scrape shows it.
func TestConnMetricsExportsListenerCounters(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := connlimit.Listen(ctx, "tcp", "127.0.0.1:0", connlimit.Config{MaxConns: 1, RefuseLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promsluice.NewConnMetrics(l))

	var d net.Dialer
	held, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()

	acceptDone := make(chan error, 1)
	go func() {
		_, err := l.Accept() // refuses the next client, then waits for Close
		acceptDone <- err
	}()
	refused, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	_ = refused.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(refused), nil)
	if err != nil {
		t.Fatalf("reading the busy reply: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("refused client got %d, want 503", resp.StatusCode)
	}

	want := `
# HELP sluice_accept_backoffs_total Pauses taken by the accept loop after a temporary error.
# TYPE sluice_accept_backoffs_total counter
sluice_accept_backoffs_total 0
# HELP sluice_accept_errors_total Temporary accept errors (out of file descriptors, memory), by kind.
# TYPE sluice_accept_errors_total counter
sluice_accept_errors_total{kind="emfile"} 0
sluice_accept_errors_total{kind="enfile"} 0
sluice_accept_errors_total{kind="nomem"} 0
sluice_accept_errors_total{kind="other"} 0
# HELP sluice_connections_accepted_total Connections accepted under the limit.
# TYPE sluice_connections_accepted_total counter
sluice_connections_accepted_total 1
# HELP sluice_connections_busy_write_errors_total Rejected connections whose busy reply could not be written.
# TYPE sluice_connections_busy_write_errors_total counter
sluice_connections_busy_write_errors_total 0
# HELP sluice_connections_closed_header_timeout_total Connections closed because request headers did not arrive within the header timeout.
# TYPE sluice_connections_closed_header_timeout_total counter
sluice_connections_closed_header_timeout_total 0
# HELP sluice_connections_closed_idle_total Keep-alive connections closed after sitting idle past the idle timeout.
# TYPE sluice_connections_closed_idle_total counter
sluice_connections_closed_idle_total 0
# HELP sluice_connections_max Most connections open at once before new ones are refused.
# TYPE sluice_connections_max gauge
sluice_connections_max 1
# HELP sluice_connections_open Accepted connections not yet closed.
# TYPE sluice_connections_open gauge
sluice_connections_open 1
# HELP sluice_connections_refusing Refused connections still being answered and closed.
# TYPE sluice_connections_refusing gauge
sluice_connections_refusing 0
# HELP sluice_connections_rejected_total Connections rejected with a busy reply, by reason.
# TYPE sluice_connections_rejected_total counter
sluice_connections_rejected_total{reason="max_conns"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// Closing the connection frees its slot, and the gauge follows.
	_ = accepted.Close()
	wantOpen := `
# HELP sluice_connections_open Accepted connections not yet closed.
# TYPE sluice_connections_open gauge
sluice_connections_open 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantOpen), "sluice_connections_open"); err != nil {
		t.Error(err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-acceptDone; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
}

// Export a connection-limited listener's counters next to the gates'.
func ExampleNewConnMetrics() {
	l, err := connlimit.Listen(context.Background(), "tcp", "127.0.0.1:0", connlimit.Config{MaxConns: 100})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promsluice.NewConnMetrics(l))

	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range families {
		fmt.Println(mf.GetName(), len(mf.GetMetric()))
	}
	// Output:
	// sluice_accept_backoffs_total 1
	// sluice_accept_errors_total 4
	// sluice_connections_accepted_total 1
	// sluice_connections_busy_write_errors_total 1
	// sluice_connections_closed_header_timeout_total 1
	// sluice_connections_closed_idle_total 1
	// sluice_connections_max 1
	// sluice_connections_open 1
	// sluice_connections_refusing 1
	// sluice_connections_rejected_total 1
}
