package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestLabBadFlagsExitTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		envs map[string]string
		want string
	}{
		{"zero slots", []string{"--max-inflight", "0"}, nil, "--max-inflight 0"},
		{"too many slots", []string{"--max-inflight", "99999999"}, nil, "--max-inflight 99999999"},
		{"zero hold", []string{"--hold-limit", "0s"}, nil, "--hold-limit 0s"},
		{"bad hold", []string{"--hold-limit", "soon"}, nil, "--hold-limit \"soon\": want a duration"},
		{"bad addr", []string{"--addr", ":::"}, nil, "--addr"},
		{"negative shutdown", []string{"--shutdown-timeout", "-1s"}, nil, "--shutdown-timeout"},
		{"log format", []string{"--log-format", "yaml"}, nil, "--log-format"},
		{"positional", []string{"now"}, nil, "unexpected argument"},
		{"env twin", nil, map[string]string{"SLUICE_MAX_INFLIGHT": "-3"}, "--max-inflight -3"},
		{"bad env twin", nil, map[string]string{"SLUICE_HOLD_LIMIT": "1 fortnight"}, "SLUICE_HOLD_LIMIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runSubcommand(context.Background(), runLab, tt.envs, tt.args...)
			if code != exitUsage || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, exitUsage, tt.want)
			}
		})
	}
}

func TestLabHelp(t *testing.T) {
	code, out := runSubcommand(context.Background(), runLab, nil, "-h")
	if code != exitOK || !strings.Contains(out, "-hold-limit") || !strings.Contains(out, "127.0.0.1:18440") {
		t.Errorf("exit %d, %q", code, out)
	}
}

// TestLabShutdownEndsHeldWork: on shutdown a held /work is answered (503
// LAB_CLOSED) instead of waiting out the hold limit, and the lab exits 0.
func TestLabShutdownEndsHeldWork(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	e := env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	go func() {
		done <- runLab(ctx, e, []string{"--addr", "127.0.0.1:0", "--log-format", "json", "--hold-limit", "1h"})
	}()
	base := "http://" + fmt.Sprint(logRecord(t, &out, "lab listening")["addr"])
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	held := make(chan string, 1)
	go func() {
		resp, err := c.Get(base + "/work")
		if err != nil {
			held <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		held <- fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(b)))
	}()
	for {
		resp, err := c.Get(base + "/state")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `"active":1`) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if got := <-held; got != `503 {"error":"LAB_CLOSED"}` {
		t.Errorf("held /work at shutdown: %s", got)
	}
	if code := <-done; code != exitOK {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
}

// TestLabCurlWalkthrough builds the sluice binary, starts `sluice lab`
// and drives it with the real curl, as docs/lab.md's walkthrough does:
// state, a held /work, a refused /work, release, recovery, final state.
// Every status, header and body the walkthrough shows is checked here.
// Seconds (3 to 8): a lab process and a dozen curl processes, one per step.
func TestLabCurlWalkthrough(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl not installed: .ci/run must install it for this end-to-end test")
		}
		t.Skip("curl not installed; this end-to-end test drives the lab with the real curl (CI installs it)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH; cannot build the sluice binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	lab := exec.Command(bin, "lab", "--addr", "127.0.0.1:0", "--log-format", "json")
	// The documented lab: default slots and hold limit, whatever the
	// environment of the test says.
	lab.Env = append(os.Environ(), "SLUICE_MAX_INFLIGHT=", "SLUICE_SLOTS=", "SLUICE_HOLD_LIMIT=")
	stderr, err := lab.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	logs := make(chan string, 100)
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "lab listening" {
				addrc <- rec.Addr
			}
			select {
			case logs <- line:
			default:
			}
		}
		exited <- lab.Wait()
	}()
	waited := false
	defer func() {
		if !waited {
			_ = lab.Process.Kill()
			<-exited
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-exited:
		waited = true
		t.Fatalf("lab exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("lab did not report its address")
	}
	base := "http://" + addr
	out := t.TempDir() // http-output

	// The walkthrough's common options: -q first (ignore curlrc), no proxy.
	curlCmd := func(args ...string) *exec.Cmd {
		return exec.Command(curl, append([]string{"-q", "--noproxy", "*", "--silent", "--show-error"}, args...)...)
	}
	run := func(args ...string) string {
		t.Helper()
		b, err := curlCmd(args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("curl %v: %v: %s %s", args, err, ee.Stderr, b)
			}
			t.Fatalf("curl %v: %v", args, err)
		}
		return string(b)
	}
	// $(< file) in bash: the content without trailing newlines.
	slurp := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimRight(string(b), "\n")
	}

	// Initial state.
	if got := run("--fail-with-body", "--max-time", "3", base+"/state"); strings.TrimRight(got, "\n") != `{"active":0,"admitted":0,"rejected":0,"completed":0}` {
		t.Fatalf("initial state %q", got)
	}

	// A waiting request that holds the slot.
	firstFile, err := os.Create(filepath.Join(out, "first.json"))
	if err != nil {
		t.Fatal(err)
	}
	first := curlCmd("--fail-with-body", "--max-time", "40", base+"/work")
	first.Stdout = firstFile
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	var state string
	for range 60 {
		state = run("--fail-with-body", "--max-time", "2", base+"/state")
		if strings.Contains(state, `"active":1`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(state, `"active":1`) {
		t.Fatalf("the first /work never held the slot: %q", state)
	}

	// The second /work: transport succeeds (exit 0), status 503,
	// Retry-After: 1, body {"error":"BUSY"}.
	code := run("--max-time", "5", "-D", filepath.Join(out, "rejected.headers"), "-o", filepath.Join(out, "rejected.json"),
		"-w", "%{http_code}", base+"/work")
	if code != "503" {
		t.Fatalf("second /work: http_code %q, want 503", code)
	}
	headers := strings.ReplaceAll(slurp("rejected.headers"), "\r", "")
	if !regexp.MustCompile(`(?im)^Retry-After: 1$`).MatchString(headers) {
		t.Errorf("rejected headers lack 'Retry-After: 1':\n%s", headers)
	}
	if !regexp.MustCompile(`(?im)^Content-Type: application/json$`).MatchString(headers) || !strings.HasPrefix(headers, "HTTP/1.1 503") {
		t.Errorf("rejected headers:\n%s", headers)
	}
	if got := slurp("rejected.json"); got != `{"error":"BUSY"}` {
		t.Errorf("rejected body %q, want {\"error\":\"BUSY\"}", got)
	}

	// Release, then the first request completes and service recovers.
	run("--fail-with-body", "--max-time", "5", "--data", "", base+"/release")
	if err := first.Wait(); err != nil {
		t.Fatalf("first /work: %v", err)
	}
	firstFile.Close()
	if got := slurp("first.json"); got != `{"result":"done"}` {
		t.Errorf("first /work body %q", got)
	}
	if got := run("--fail-with-body", "--max-time", "5", base+"/work"); strings.TrimRight(got, "\n") != `{"result":"done"}` {
		t.Errorf("/work after release %q", got)
	}
	if got := run("--fail-with-body", "--max-time", "5", base+"/state"); strings.TrimRight(got, "\n") != `{"active":0,"admitted":2,"rejected":1,"completed":2}` {
		t.Errorf("final state %q", got)
	}

	// SIGINT: a clean shutdown and exit 0.
	if err := lab.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Errorf("lab exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lab did not exit on SIGINT")
	}
	close(logs)
	var all strings.Builder
	for l := range logs {
		all.WriteString(l + "\n")
	}
	if !strings.Contains(all.String(), "shut down cleanly") {
		t.Errorf("lab log lacks the clean shutdown:\n%s", all.String())
	}
}

// TestLabSIGHUPIsLogged: SIGHUP, which kills a process that does not
// handle it, leaves the lab running (it has nothing to re-read, and says
// so), still answering; SIGTERM then stops it cleanly.
func TestLabSIGHUPIsLogged(t *testing.T) {
	c := startChild(t, 0, "lab", "--addr", "127.0.0.1:0", "--log-format", "json")
	addr := fmt.Sprint(c.record(t, "lab listening")["addr"])
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.record(t, "SIGHUP: the lab has no configuration to re-read; it goes on as it is")
	resp, err := http.Get("http://" + addr + "/state")
	if err != nil {
		t.Fatalf("after SIGHUP the lab does not answer: %v\n%s", err, c.logs)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/state after SIGHUP: %d", resp.StatusCode)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, c.logs)
	}
}
