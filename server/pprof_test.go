package server_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/server"
)

func TestPprofMountedOnLoopbackAdminOnly(t *testing.T) {
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) { c.Pprof = true })
	r, err := f.get(t, f.admin+"/debug/pprof/goroutine?debug=2")
	if err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "goroutine ") || !strings.Contains(r.body, "[running]") {
		t.Fatalf("goroutine profile: %v %d %.200s", err, r.status, r.body)
	}
	if r, err := f.get(t, f.admin+"/debug/pprof/"); err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "goroutine") {
		t.Errorf("index: %v %d", err, r.status)
	}
	// The admin endpoints still answer beside the profiles.
	if r, err := f.get(t, f.admin+"/metrics"); err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "sluice_admission_offered_total") {
		t.Errorf("metrics: %v %d", err, r.status)
	}
	// Never on the main listener.
	if r, err := f.get(t, f.base+"/debug/pprof/"); err != nil || r.status != http.StatusNotFound {
		t.Errorf("main listener /debug/pprof/: %v %d, want 404", err, r.status)
	}
}

func TestPprofOffByDefault(t *testing.T) {
	f := start(t, admit.Config{Capacity: 1}, nil)
	if r, err := f.get(t, f.admin+"/debug/pprof/goroutine?debug=2"); err != nil || r.status != http.StatusNotFound {
		t.Errorf("pprof without Pprof: %v %d, want 404", err, r.status)
	}
}

// publicAddrListener is a loopback listener that claims a public address,
// so the refusal can be tested without binding anything but loopback.
type publicAddrListener struct{ net.Listener }

func (publicAddrListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 9090} // TEST-NET-1
}

func TestPprofRefusedOffLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	real := ln.Addr().String()
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) {
		c.Pprof = true
		c.AdminListener = publicAddrListener{ln}
	})
	if r, err := f.get(t, "http://"+real+"/debug/pprof/goroutine?debug=2"); err != nil || r.status != http.StatusNotFound {
		t.Errorf("pprof off loopback: %v %d, want 404", err, r.status)
	}
	if r, err := f.get(t, "http://"+real+"/healthz"); err != nil || r.status != http.StatusOK {
		t.Errorf("healthz: %v %d", err, r.status)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "pprof not mounted") || !strings.Contains(logs, "192.0.2.1") {
		t.Errorf("no warning in the log:\n%s", logs)
	}
}
