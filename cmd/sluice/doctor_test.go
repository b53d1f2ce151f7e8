package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/server"
)

// sluice serve --pprof, then sluice doctor --pprof against its admin
// listener: a quiet server gets exit 0, its gate in the table and its
// goroutines grouped by where they wait.
func TestDoctorReadsServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	e := env{stdout: &out, stderr: &out, getenv: func(k string) string {
		return map[string]string{"SLUICE_LOG_FORMAT": "json"}[k]
	}}
	go func() {
		done <- runServe(ctx, e, []string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--pprof", "--shutdown-timeout", "2s", "--drain-delay", "0"})
	}()
	rec := logRecord(t, &out, "serving")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	for range 3 {
		resp, err := c.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	tr.CloseIdleConnections()

	code, stdout, stderr := runCmd(context.Background(), nil, "doctor", "--admin-addr", admin, "--interval", "20ms", "--pprof")
	if code != exitOK {
		t.Errorf("doctor: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"disk", "offered/s", "goroutines (", "network accept"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCmd(context.Background(), nil, "doctor", "--admin-addr", "http://"+admin, "--interval", "10ms", "--json")
	var d struct {
		Gates []struct {
			Gate     string  `json:"gate"`
			Capacity float64 `json:"capacity"`
		} `json:"gates"`
		Findings []any `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil || code != exitOK || len(d.Gates) != 1 || d.Gates[0].Gate != "disk" || d.Gates[0].Capacity == 0 {
		t.Errorf("doctor --json: exit %d, %v\n%s", code, err, stdout)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("serve exit %d:\n%s", code, out.String())
	}
}

func TestDoctorExitCodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if code, _, stderr := runCmd(context.Background(), nil, "doctor", "--admin-addr", closed, "--interval", "1ms"); code != exitInvalid || !strings.Contains(stderr, "unreachable") {
		t.Errorf("unreachable: exit %d, want 3\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"--interval", "0s"},
		{"--interval", "soon"},
		{"--timeout", "-1s"},
		{"--admin-addr", "ftp://127.0.0.1:1"},
		{"--admin-addr", ""},
		{"extra"},
	} {
		code, stdout, stderr := runCmd(context.Background(), nil, append([]string{"doctor"}, args...)...)
		if code != exitUsage || stderr == "" || stdout != "" {
			t.Errorf("%v: exit %d, want 2 with a reason\n%s", args, code, stderr)
		}
	}
	if code, _, _ := runCmd(context.Background(), nil, "doctor", "--help"); code != exitOK {
		t.Errorf("--help: exit %d", code)
	}
}

// A real server (the server package) whose only slot is held: doctor sees
// the stall and exits 1.
func TestDoctorExitsOneOnStall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	gm := promsluice.NewMetrics()
	g, err := admit.New(admit.Config{Name: "db", Capacity: 1, Observer: gm})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.TryAcquire() // held for the whole test: nothing completes
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Listen(context.Background(), server.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Gates: []*admit.Gate{g}, Metrics: gm, ShutdownTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() { cancel(); <-served; p.Done(admit.OutcomeOK) }()

	code, stdout, stderr := runCmd(context.Background(), nil, "doctor", "--admin-addr", srv.AdminAddr().String(), "--interval", "10ms")
	if code != exitFail || !strings.Contains(stdout, "[critical] stalled") || !strings.Contains(stdout, "gate db: 1 slots held") {
		t.Errorf("exit %d, want 1 with a stall\n%s\n%s", code, stdout, stderr)
	}
	// --pprof against a server without profiles cannot read them: exit 3.
	code, _, stderr = runCmd(context.Background(), nil, "doctor", "--admin-addr", srv.AdminAddr().String(), "--interval", "1ms", "--pprof")
	if code != exitInvalid || !strings.Contains(stderr, "HTTP 404") || !strings.Contains(stderr, "--pprof") {
		t.Errorf("--pprof without profiles: exit %d\n%s", code, stderr)
	}
}
