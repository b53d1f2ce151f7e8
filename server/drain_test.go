package server_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/server"
)

// TestDrainDelayKeepsListeningWhileHealthzSaysDraining: for DrainDelay
// after shutdown begins, /healthz answers 503 draining while the main
// listener still accepts and serves (with Connection: close, so clients
// reconnect where the balancer now sends them); then the listener closes.
// Without the delay /healthz flipped in the same instant the listener
// closed, leaving a balancer no time to stop sending.
func TestDrainDelayKeepsListeningWhileHealthzSaysDraining(t *testing.T) {
	const delay = 400 * time.Millisecond
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) { c.DrainDelay = delay })
	begun := time.Now()
	f.cancel()
	eventually(t, "/healthz to say draining", func() bool {
		select {
		case err := <-f.served:
			// Shut down already: /healthz will never say draining,
			// so fail now rather than poll until the bound.
			f.served <- err // the cleanup waits for it
			t.Fatalf("Serve returned (%v) before /healthz said draining: no drain delay", err)
		default:
		}
		r, err := f.get(t, f.admin+"/healthz")
		return err == nil && r.status == 503 && strings.Contains(r.body, "draining")
	})
	r, err := f.get(t, f.base+"/cheap")
	if elapsed := time.Since(begun); elapsed < delay {
		if err != nil || r.status != 200 || r.body != "cheap" {
			t.Fatalf("main listener during the drain delay (%v in): %+v %v, want 200", elapsed, r, err)
		}
		if !r.close {
			t.Errorf("response during the drain delay keeps the connection alive; want Connection: close")
		}
	} else {
		t.Logf("machine too slow to check the listener within the delay (%v elapsed)", elapsed)
	}
	if err := <-f.served; err != nil {
		t.Errorf("Serve = %v, want a clean shutdown", err)
	}
	f.served <- nil
	if took := time.Since(begun); took < delay {
		t.Errorf("shutdown took %v, less than the drain delay %v", took, delay)
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://")); err == nil {
		c.Close()
		t.Error("main listener still accepts after the drain")
	}
}

// TestAbortEndsDrainAtOnce: a second signal (Abort) while shutdown waits
// for admitted work cuts it at once, whatever the shutdown timeout and the
// drain delay, and Serve and the log say what was cut.
func TestAbortEndsDrainAtOnce(t *testing.T) {
	// Without Abort this shutdown takes 6 s (delay, then timeout); Abort
	// must end it well within a second.
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) {
		c.ShutdownTimeout = 3 * time.Second
		c.DrainDelay = 3 * time.Second
	})
	done := make(chan error, 1)
	go func() { _, err := f.get(t, f.base+"/work"); done <- err }()
	<-f.entered
	f.cancel()
	eventually(t, "shutdown to begin", f.srv.Draining)
	select {
	case err := <-f.served:
		f.served <- err
		t.Fatalf("Serve returned %v before the abort", err)
	case <-time.After(50 * time.Millisecond):
	}
	aborted := time.Now()
	f.srv.Abort()
	err := <-f.served
	f.served <- err
	took := time.Since(aborted)
	t.Logf("Serve returned %v after Abort", took)
	if took > 2*time.Second {
		t.Errorf("Serve returned %v after Abort, want at once", took)
	}
	var cut *server.CutShortError
	if !errors.As(err, &cut) || !cut.Aborted || cut.Inflight["work"] != 1 || cut.OpenConns != 1 {
		t.Fatalf("Serve = %#v, want an aborted CutShortError with one slot and one connection", err)
	}
	if err := <-done; err == nil {
		t.Error("the cut request succeeded")
	}
	if logs := f.logs.String(); !strings.Contains(logs, "shutdown aborted; cut work short") || !strings.Contains(logs, "gate_work.inflight=1") {
		t.Errorf("log does not report the cut:\n%s", logs)
	}
	eventually(t, "the cut handler to release", func() bool { return f.gate.Stats().Inflight == 0 })
}

// TestTimeoutClosesAreExported: connections closed by the send and body
// timeouts appear on /metrics and /state.
func TestTimeoutClosesAreExported(t *testing.T) {
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) { c.Conn.BodyTimeout = 100 * time.Millisecond })
	c, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /cheap HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n")
	if b, err := io.ReadAll(c); err != nil || !strings.Contains(string(b), "cheap") {
		t.Fatalf("request without its body: %q %v; want the answer, then a close", b, err)
	}
	eventually(t, "the body timeout on /state", func() bool { return f.srv.State().Connections.ClosedBodyTimeout == 1 })
	m := f.mustGet(t, f.admin+"/metrics")
	for _, want := range []string{"sluice_connections_closed_body_timeout_total 1", "sluice_connections_closed_send_timeout_total 0"} {
		if !strings.Contains(m.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
