package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/load"
	"go.uber.org/goleak"
)

// runCmd runs the dispatcher in-process with buffers for streams and the
// given environment.
func runCmd(ctx context.Context, envs map[string]string, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatch(ctx, env{stdout: &o, stderr: &e, getenv: func(k string) string { return envs[k] }}, args)
	return code, o.String(), e.String()
}

// okServer answers 200, except that every refuseEvery-th request (when > 0)
// gets a sluice 503.
func okServer(t *testing.T, refuseEvery int64) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuseEvery > 0 && n.Add(1)%refuseEvery == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"BUSY","gate":"disk","reason":"full"}`)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestLoadBadInputExitsTwoWithoutReport(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	badProfile := writeFile(t, dir, "bad-profile.json", `{"cases":[{"name":"a","max_error_rate":7}]}`)
	twoCases := writeFile(t, dir, "two.json", `{"cases":[{"name":"a"},{"name":"b"}]}`)
	badTargets := writeFile(t, dir, "targets.txt", "ftp://nope/\n")
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no url", []string{"load", "--rate", "10"}, "no target"},
		{"invalid url", []string{"load", "--url", "http//missing-colon", "--rate", "10"}, "scheme"},
		{"no host", []string{"load", "--url", "http:///x", "--rate", "10"}, "no host"},
		{"zero rate", []string{"load", "--url", srv.URL, "--rate", "0"}, "--rate must be > 0"},
		{"negative rate", []string{"load", "--url", srv.URL, "--rate", "-5"}, "--rate must be > 0"},
		{"not a rate", []string{"load", "--url", srv.URL, "--rate", "fast"}, "--rate \"fast\": want a number"},
		{"no load", []string{"load", "--url", srv.URL}, "give --rate"},
		{"both loops", []string{"load", "--url", srv.URL, "--rate", "5", "--concurrency", "2"}, "exclusive"},
		{"bad steps", []string{"load", "--url", srv.URL, "--steps", "5,x"}, "--steps"},
		{"unreachable", []string{"load", "--url", "http://" + closedPort(t) + "/", "--rate", "10"}, "cannot reach"},
		{"unreachable metrics", []string{"load", "--url", srv.URL, "--rate", "10", "--metrics", "http://" + closedPort(t) + "/metrics"}, "cannot reach"},
		{"missing profile", []string{"load", "--url", srv.URL, "--rate", "10", "--profile", filepath.Join(dir, "none.json")}, "profile"},
		{"malformed profile", []string{"load", "--url", srv.URL, "--rate", "10", "--profile", badProfile}, "fractions"},
		{"unknown case", []string{"load", "--url", srv.URL, "--rate", "10", "--profile", twoCases, "--case", "c"}, "no case"},
		{"case without profile", []string{"load", "--url", srv.URL, "--rate", "10", "--case", "a"}, "--case needs --profile"},
		{"bad targets file", []string{"load", "--targets", badTargets, "--rate", "10"}, "scheme"},
		{"bad header", []string{"load", "--url", srv.URL, "--rate", "10", "--header", "nocolon"}, "header"},
		{"bad workers", []string{"load", "--url", srv.URL, "--rate", "10", "--workers", "0"}, "--workers"},
		{"bad max-cpu", []string{"load", "--url", srv.URL, "--rate", "10", "--max-cpu", "0"}, "--max-cpu"},
		{"bad max-cpu", []string{"load", "--url", srv.URL, "--rate", "10", "--max-cpu", "0"}, "--max-cpu"},
		{"bad pick", []string{"load", "--url", srv.URL, "--rate", "10", "--pick", "random"}, "--pick"},
		{"bad duration", []string{"load", "--url", srv.URL, "--rate", "10", "--duration", "0s"}, "--duration"},
		{"stray argument", []string{"load", "--url", srv.URL, "--rate", "10", "extra"}, "unexpected argument"},
		{"bad arrivals", []string{"load", "--url", srv.URL, "--rate", "10", "--arrivals", "bursty"}, "--arrivals must be uniform or poisson"},
		{"seed too large", []string{"load", "--url", srv.URL, "--rate", "10", "--arrivals", "poisson", "--seed", "9007199254740992"}, "--seed"},
		{"arrivals of a closed loop", []string{"load", "--url", srv.URL, "--concurrency", "2", "--arrivals", "poisson"}, "closed loop"},
		{"sweep arrivals of a ladder of concurrencies", []string{"sweep", "--url", srv.URL, "--arrivals", "poisson"}, "open loop"},
		{"sweep bad ladder", []string{"sweep", "--url", srv.URL, "--concurrencies", "4,0"}, "--concurrencies"},
		{"sweep no url", []string{"sweep"}, "no target"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{c.args[0], "--out", out}
			if c.args[0] == "load" && c.name != "bad duration" {
				args = append(args, "--duration", "100ms")
			}
			args = append(args, c.args[1:]...)
			code, _, stderr := runCmd(context.Background(), nil, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			if !strings.Contains(stderr, c.msg) {
				t.Errorf("stderr %q lacks %q", stderr, c.msg)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a report was written for bad input")
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("files left in the folder: %v", ents)
	}
}

// Over a second: real sluice load runs whose reports are then checked.
func TestLoadReportCheckAndExitCodes(t *testing.T) {
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ign) }) // after the server closes
	srv := okServer(t, 4)                           // 25% refused
	dir := t.TempDir()
	lenient := writeFile(t, dir, "lenient.json", `{"name":"p","cases":[{"name":"c","qps_floor":10,"p99_budget_ms":1000,"max_refusal_rate":0.5,"max_error_rate":0}]}`)
	strict := writeFile(t, dir, "strict.json", `{"name":"p","cases":[{"name":"c","qps_floor":10,"max_refusal_rate":0}]}`)
	out := filepath.Join(dir, "r.json")
	code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "200", "--duration", "200ms",
		"--windows", "2", "--profile", lenient, "--max-lag", "1s", "--out", out, "--live", "off")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "verdict: PASS (case c)") || !strings.Contains(stdout, "report: "+out) {
		t.Errorf("stdout:\n%s", stdout)
	}
	r, err := load.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Command[1] != "load" || r.Command[len(r.Command)-1] != "off" || r.Profile == nil || r.Profile.Case != "c" ||
		len(r.Profile.SHA256) != 64 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(r.BinarySHA256) || r.Tool.Module == "" ||
		r.Host.CPUs < 1 || len(r.Steps[0].Windows) != 2 {
		t.Errorf("report header %+v %+v", r.Command, r.Profile)
	}
	// check re-judges the saved report.
	if code, stdout, _ := runCmd(context.Background(), nil, "check", "--profile", strict, out); code != exitFail || !strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "refusal rate") {
		t.Errorf("strict check: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "check", "--profile", lenient, out); code != exitOK || !strings.Contains(stdout, "PASS") {
		t.Errorf("lenient check: exit %d\n%s", code, stdout)
	}
	// A run against the strict profile fails with exit 1 and still writes.
	out2 := filepath.Join(dir, "r2.json")
	if code, _, _ := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "100", "--duration", "200ms", "--profile", strict, "--max-lag", "1s", "--out", out2); code != exitFail {
		t.Errorf("strict run: exit %d, want 1", code)
	}
	if _, err := load.ReadReport(out2); err != nil {
		t.Errorf("failed run's report: %v", err)
	}
	// A driver that cannot keep its schedule (an impossible lag bound) is INVALID: exit 3.
	out3 := filepath.Join(dir, "r3.json")
	if code, stdout, _ := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "200", "--duration", "200ms", "--max-lag", "1ns", "--out", out3); code != exitInvalid || !strings.Contains(stdout, "driver-limited") {
		t.Errorf("lagging run: exit %d, want 3\n%s", code, stdout)
	}
	// check: bad inputs are usage errors.
	bad := writeFile(t, dir, "bad.json", `{"schema":"sluice/load-report/v1"`)
	for _, args := range [][]string{
		{"check", "--profile", strict, bad},
		{"check", "--profile", strict, filepath.Join(dir, "none.json")},
		{"check", "--profile", filepath.Join(dir, "none.json"), out},
		{"check", out},
		{"check", "--profile", strict},
	} {
		if code, _, stderr := runCmd(context.Background(), nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
}

func TestLoadInterruptedWritesValidReport(t *testing.T) {
	srv := okServer(t, 0)
	out := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	code, _, stderr := runCmd(ctx, nil, "load", "--url", srv.URL, "--rate", "100", "--duration", "10s", "--out", out)
	if code != exitInvalid {
		t.Errorf("exit %d, want 3", code)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("interrupt took %v", time.Since(start))
	}
	if !strings.Contains(stderr, "interrupted") {
		t.Errorf("stderr %q", stderr)
	}
	r, err := load.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Interrupted || r.Verdict.Status != load.StatusInvalid {
		t.Errorf("interrupted %v verdict %s", r.Interrupted, r.Verdict.Status)
	}
	// Start-up (dial check, hashing the binary) eats into the 0.3 s.
	if c := r.Steps[0].Windows[0].Counts; c.Scheduled < 1 || c.Scheduled > 31 {
		t.Errorf("scheduled %d in at most 0.3 s at 100/s", c.Scheduled)
	}
}

// Over a second: a real sluice sweep of stepped windows.
func TestSweepPrintsCliffTable(t *testing.T) {
	srv := okServer(t, 3)
	out := filepath.Join(t.TempDir(), "s.json")
	code, stdout, stderr := runCmd(context.Background(), nil, "sweep", "--url", srv.URL, "--concurrencies", "1,2,4", "--step-duration", "150ms", "--out", out,
		"--max-cpu", "2", "--max-lag", "1s") // the server shares this process's CPU
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	for _, want := range []string{"ok req/s", "refused %", "p50", "p99", "c=1", "c=2", "c=4", "33."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("cliff table lacks %q:\n%s", want, stdout)
		}
	}
	r, err := load.ReadReport(out)
	if err != nil || r.Kind != "sweep" || len(r.Steps) != 3 || r.Steps[2].Concurrency != 4 {
		t.Fatalf("sweep report %v %+v", err, r)
	}
	// Open-loop ladder.
	code, stdout, _ = runCmd(context.Background(), nil, "sweep", "--url", srv.URL, "--rates", "50,100", "--step-duration", "100ms", "--out", out, "--max-lag", "1s")
	if code != exitOK || !strings.Contains(stdout, "rate=50") || !strings.Contains(stdout, "rate=100") {
		t.Errorf("rate sweep: exit %d\n%s", code, stdout)
	}
	if got, _ := parseInts(defaultLadder); len(got) != 7 || got[0] != 16 || got[6] != 200 {
		t.Errorf("default ladder %v", got)
	}
}

// Over a second: real sluice load runs whose reports are drawn and merged.
func TestReportTextHTMLAndMerge(t *testing.T) {
	srv := okServer(t, 5)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, p := range []string{a, b} {
		if code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "100", "--duration", "200ms", "--out", p, "--max-lag", "1s"); code != exitOK {
			t.Fatalf("load: %d %s %s", code, stdout, stderr)
		}
	}
	html := filepath.Join(dir, "ab.html")
	code, stdout, stderr := runCmd(context.Background(), nil, "report", "--html", html, a, b)
	if code != exitOK || !strings.Contains(stdout, "== "+a) || !strings.Contains(stdout, "verdict: NONE") {
		t.Fatalf("report: %d %s %s", code, stdout, stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(page, []byte("<svg")) || !bytes.Contains(page, []byte("stroke-dasharray")) {
		t.Errorf("html page: %v", err)
	}
	m := filepath.Join(dir, "m.json")
	code, _, stderr = runCmd(context.Background(), nil, "report", "merge", "--out", m, a, b)
	if code != exitOK {
		t.Fatalf("merge: %d %s", code, stderr)
	}
	mr, err := load.ReadReport(m)
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := load.ReadReport(a)
	rb, _ := load.ReadReport(b)
	if got, want := mr.Steps[0].Windows[0].Counts.Sent, ra.Steps[0].Windows[0].Counts.Sent+rb.Steps[0].Windows[0].Counts.Sent; got != want || len(mr.Sources) != 2 || mr.Kind != "merge" {
		t.Errorf("merged sent %d want %d, sources %d", got, want, len(mr.Sources))
	}
	bad := writeFile(t, dir, "bad.json", `[]`)
	for _, args := range [][]string{{"report", bad}, {"report"}, {"report", "merge", a}, {"report", "merge", a, bad}, {"report", a, b, a}} {
		if code, _, _ := runCmd(context.Background(), nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestLoadEnvTwinsAndTargetsFile(t *testing.T) {
	var paths atomic.Value
	paths.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(paths.Load().(string) + r.Method + r.URL.Path + " ")
	}))
	defer srv.Close()
	dir := t.TempDir()
	targets := writeFile(t, dir, "t.txt", "# two targets\n"+srv.URL+"/a\nPOST "+srv.URL+"/b weight=3\n")
	out := filepath.Join(dir, "r.json")
	envs := map[string]string{"SLUICE_MAX_LAG": "1s", "SLUICE_RATE": "40", "SLUICE_DURATION": "200ms", "SLUICE_PICK": "weighted", "SLUICE_OUT": out}
	code, _, stderr := runCmd(context.Background(), envs, "load", "--targets", targets)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := paths.Load().(string)
	if strings.Count(got, "GET/a") != 2 || strings.Count(got, "POST/b") != 6 {
		t.Errorf("requests %q: want 2 GET /a and 6 POST /b", got)
	}
	var raw map[string]any
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &raw); err != nil || raw["schema"] != load.SchemaV1 {
		t.Errorf("report: %v", err)
	}
	if code, _, stderr := runCmd(context.Background(), map[string]string{"SLUICE_RATE": "lots"}, "load", "--url", srv.URL); code != exitUsage || !strings.Contains(stderr, "SLUICE_RATE") {
		t.Errorf("bad env: exit %d %q", code, stderr)
	}
}

func TestLoadAbortedExitsOne(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "20", "--duration", "100ms",
		"--drain-timeout", "100ms", "--windows", "2", "--out", out)
	if code != exitFail || !strings.Contains(stderr, "aborted") {
		t.Errorf("exit %d, stderr %q; want 1 and a word about the abort", code, stderr)
	}
	r, err := load.ReadReport(out)
	if err != nil || r.Aborted == "" || len(r.Steps[0].Windows) != 1 || r.Steps[0].Windows[0].Counts.Unfinished == 0 {
		t.Errorf("report %v %+v", err, r)
	}
}
