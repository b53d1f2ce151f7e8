package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testutil"
)

// siteDir writes a small site with a large file (bigger than any socket
// buffers, so a client that stops reading stalls the server's writes).
func siteDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"small.txt": "small", "cold.txt": "cold", "cold2.txt": "cold two",
		"big.bin": strings.Repeat("b", 64<<20),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runningServe is `sluice serve` running in-process.
type runningServe struct {
	out         *lockedBuffer
	addr, admin string
	cancel      context.CancelFunc
	done        chan int
	client      *http.Client
}

func startServeInProcess(t *testing.T, args ...string) *runningServe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &runningServe{out: &lockedBuffer{}, cancel: cancel, done: make(chan int, 1)}
	e := env{stdout: s.out, stderr: s.out, getenv: func(string) string { return "" }}
	base := []string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0"}
	go func() { s.done <- runServe(ctx, e, append(base, args...)) }()
	rec := logRecord(t, s.out, "serving")
	s.addr, s.admin = fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	tr := &http.Transport{}
	s.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		cancel()
		<-s.done
		tr.CloseIdleConnections()
	})
	return s
}

func (s *runningServe) get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := s.client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of one /metrics series, or -1.
func (s *runningServe) metric(t *testing.T, series string) float64 {
	t.Helper()
	_, body := s.get(t, "http://"+s.admin+"/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// The stalled reader, the missing body and the aborted download, through
// the whole frame with the flags a user sets:
//   - a client that requests a large file and stops reading releases the
//     only disk slot, with outcome canceled, about --send-timeout after its
//     last progress, and the close is counted;
//   - a GET that declares a body and never sends it is answered (408)
//     within --body-timeout, holding no slot meanwhile;
//   - a download aborted mid-stream is counted canceled, not ok.
//
// Over a second: hostile clients on real sockets against a serve process,
// each waiting out a real timeout.
func TestServeHostileClientsReleaseSlots(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // runs after startServe's cleanup
	const timeout = 300 * time.Millisecond
	s := startServeInProcess(t, "--root", siteDir(t), "--max-inflight", "1", "--send-timeout", timeout.String(), "--body-timeout", timeout.String())
	canceled := `sluice_admission_completed_total{gate="disk",kind="stream",outcome="canceled"}`

	t.Run("stalled reader", func(t *testing.T) {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		testutil.Eventually(t, "the stream to take the only slot", func() bool {
			return s.metric(t, `sluice_admission_inflight{gate="disk"}`) == 1
		})
		if code, _ := s.get(t, "http://"+s.addr+"/cold.txt"); code != http.StatusServiceUnavailable {
			t.Fatalf("cold read while the stream holds the slot: %d, want 503", code)
		}
		stalled := time.Now()
		testutil.Eventually(t, "the stalled stream to release its slot", func() bool { return s.metric(t, canceled) == 1 })
		t.Logf("slot released %v after the client stalled (send timeout %v)", time.Since(stalled), timeout)
		if n := s.metric(t, "sluice_connections_closed_send_timeout_total"); n != 1 {
			t.Errorf("send-timeout closes = %v, want 1", n)
		}
		if ok := s.metric(t, `sluice_admission_completed_total{gate="disk",kind="stream",outcome="ok"}`); ok != 0 {
			t.Errorf("stalled stream counted ok (%v)", ok)
		}
		if code, body := s.get(t, "http://"+s.addr+"/cold.txt"); code != 200 || body != "cold" {
			t.Errorf("cold read after the release: %d %q", code, body)
		}
	})

	t.Run("missing body", func(t *testing.T) {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sent := time.Now()
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
		time.Sleep(50 * time.Millisecond) // let it reach the handler
		if code, _ := s.get(t, "http://"+s.addr+"/cold2.txt"); code != 200 {
			t.Errorf("cold read while a body is awaited: %d, want 200 (no slot held)", code)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		if !bytes.HasPrefix(b, []byte("HTTP/1.1 408")) {
			t.Errorf("request without its declared body got %q, want 408 then close", b)
		}
		if took := time.Since(sent); took > 10*timeout {
			t.Errorf("answered after %v, want about the body timeout %v", took, timeout)
		}
		testutil.Eventually(t, "the body timeout to be counted", func() bool {
			return s.metric(t, "sluice_connections_closed_body_timeout_total") == 1
		})
	})

	t.Run("aborted download", func(t *testing.T) {
		before := s.metric(t, canceled)
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
		testutil.Eventually(t, "the aborted stream to be counted canceled", func() bool { return s.metric(t, canceled) == before+1 })
	})
}

func TestServeAbsurdValuesExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--read-header-timeout", "1ns"}, "--read-header-timeout 1ns: want 100ms to 24h0m0s"},
		{[]string{"--max-conns", "999999999999"}, "--max-conns 999999999999: want 0"},
		{[]string{"--shutdown-timeout", "1000000h"}, "--shutdown-timeout 1000000h0m0s: want 0s to 1h0m0s"},
		{[]string{"--send-timeout", "0s"}, "--send-timeout 0s: want 100ms"},
		{[]string{"--body-timeout", "10ms"}, "--body-timeout 10ms: want 100ms"},
		{[]string{"--drain-delay", "-1s"}, "--drain-delay -1s: want 0s to 10m0s"},
		{[]string{"--idle-timeout", "100000h"}, "--idle-timeout"},
		{[]string{"--max-inflight", "off", "--queue", "3"}, "--max-inflight off"},
	} {
		// Free ports and a short life, so a value wrongly accepted ends
		// the run (exit 0) instead of serving for ever. The flags are
		// checked before anything starts, so the life bounds only a run
		// that accepted the value: it can be short.
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--drain-delay", "0"}, c.args...)
		code, out := runSubcommand(ctx, runServe, nil, args...)
		cancel()
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, out, c.want)
		}
	}
	// The environment twins go through the same checks.
	for name, want := range map[string]string{
		"SLUICE_SEND_TIMEOUT": "--send-timeout 1ns", "SLUICE_BODY_TIMEOUT": "--body-timeout 1ns", "SLUICE_DRAIN_DELAY": "--drain-delay 1ns",
	} {
		v := "1ns"
		if name == "SLUICE_DRAIN_DELAY" {
			v = "-1ns"
			want = "--drain-delay -1ns"
		}
		args := []string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}
		if name != "SLUICE_DRAIN_DELAY" {
			// No drain delay, so that a run that accepted the value
			// stops at once (the flag would override the variable
			// under test in the drain delay's own case).
			args = append(args, "--drain-delay", "0")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		code, out := runSubcommand(ctx, runServe, map[string]string{name: v}, args...)
		cancel()
		if code != exitUsage || !strings.Contains(out, want) {
			t.Errorf("%s=%s: exit %d, %q; want 2 and %q", name, v, code, out, want)
		}
	}
}

// --max-conns is about file descriptors, and the help says so.
func TestServeHelpSaysMaxConnsProtectsDescriptors(t *testing.T) {
	_, out := runSubcommand(context.Background(), runServe, nil, "--help")
	for _, want := range []string{"file descriptors, not concurrency", "-send-timeout", "-body-timeout", "-drain-delay", "second signal", "off: no gate"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestServeWarnings(t *testing.T) {
	warnings := func(o serveOptions, work int64) string {
		var buf bytes.Buffer
		o.warn(slog.New(slog.NewTextHandler(&buf, nil)), work)
		return buf.String()
	}
	base := serveOptions{adminAddr: "127.0.0.1:9090"}
	if w := warnings(base, 16); w != "" {
		t.Errorf("defaults warn: %s", w)
	}
	for _, addr := range []string{"0.0.0.0:9090", ":9090", "[::]:9090", "10.1.2.3:9090", "example.com:9090"} {
		o := base
		o.adminAddr = addr
		if w := warnings(o, 16); !strings.Contains(w, "admin listener is not on loopback") {
			t.Errorf("--admin-addr %s: no warning", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:9090", "localhost:9090"} {
		o := base
		o.adminAddr = addr
		if w := warnings(o, 16); w != "" {
			t.Errorf("--admin-addr %s warns: %s", addr, w)
		}
	}
	// A user's setting: a gate of 8 with a queue of 16, and 16
	// connections against 64 keep-alive workers.
	o := base
	o.maxConns = 16
	if w := warnings(o, 8+16); !strings.Contains(w, "below a plausible client pool") || !strings.Contains(w, "plausible_pool=96") {
		t.Errorf("--max-conns 16 with 24 gate places: %q", w)
	}
	o.maxConns = 96
	if w := warnings(o, 8+16); w != "" {
		t.Errorf("--max-conns 96 warns: %s", w)
	}
	o.maxConns = 40
	if w := warnings(o, -1); !strings.Contains(w, "plausible_pool=64") {
		t.Errorf("--max-conns 40 without a gate: %q", w)
	}
	var buf bytes.Buffer
	warnLabAddr(slog.New(slog.NewTextHandler(&buf, nil)), "0.0.0.0:18440")
	if !strings.Contains(buf.String(), "unauthenticated") {
		t.Errorf("lab on all interfaces: %q", buf.String())
	}
}

// child is the test binary re-executed as `sluice`.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	logs  *lockedBuffer
	exit  chan error
}

func startChild(t *testing.T, nofile int, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	if nofile > 0 {
		cmd.Env = append(cmd.Env, childNoFileEnv+"="+strconv.Itoa(nofile))
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1000), logs: &lockedBuffer{}, exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.logs.Write([]byte(sc.Text() + "\n"))
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		c.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case err := <-c.exit:
			c.exit <- err
		case <-time.After(10 * time.Second):
		}
	})
	return c
}

// record waits for the JSON log record with msg.
func (c *child) record(t *testing.T, msg string) map[string]any {
	t.Helper()
	return c.nthRecord(t, msg, 1)
}

// nthRecord waits for the child's n-th log record with the given msg, as
// nthRecord does, and fails at once if the child exits without it (a
// signal that killed it): its log is complete then, and waiting longer
// cannot help.
func (c *child) nthRecord(t *testing.T, msg string, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var exited error
		select {
		case err := <-c.exit:
			c.exit <- err
			exited = fmt.Errorf("exited: %v", err)
		default:
		}
		// The log is read to its end before the exit is reported, so
		// this look after an exit sees every line.
		if rec := findRecord(c.logs.String(), msg, n); rec != nil {
			return rec
		}
		if exited != nil {
			t.Fatalf("the child %v before its %d-th log record %q:\n%s", exited, n, msg, c.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %d-th log record %q in:\n%s", n, msg, c.logs.String())
	return nil
}

// wait returns the exit code, or fails after d.
func (c *child) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-c.exit:
		c.exit <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("still running after %v:\n%s", d, c.logs.String())
		return -1
	}
}

// A second SIGTERM or SIGINT while the server drains stops it at once,
// with a non-zero status and a log line saying what was cut. Before, the
// second signal was swallowed and only SIGKILL ended a long drain.
// Over a second: a serve process fills a stalled download's socket buffers
// and starts draining before the second signal.
func TestServeSecondSignalStopsAtOnce(t *testing.T) {
	c := startChild(t, 0, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json",
		"--root", siteDir(t), "--shutdown-timeout", "1h", "--drain-delay", "0", "--send-timeout", "1h")
	rec := c.record(t, "serving")
	addr := fmt.Sprint(rec["addr"])
	// A download that stops reading holds the stream slot: the drain has
	// to wait for it.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.record(t, "draining; send SIGINT or SIGTERM again to stop at once")
	select {
	case err := <-c.exit:
		t.Fatalf("exited (%v) on the first signal with work in flight:\n%s", err, c.logs)
	case <-time.After(200 * time.Millisecond):
	}
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, 5*time.Second); code != exitFail {
		t.Errorf("exit %d after the second signal, want %d", code, exitFail)
	}
	cut := c.record(t, "shutdown aborted; cut work short")
	if cut["open_conns"] != float64(1) || fmt.Sprint(cut["gate_disk"]) != "map[inflight:1 waiting:0]" {
		t.Errorf("cut record %v, want one connection and the disk slot", cut)
	}
	c.record(t, "second signal: stopping at once")
}

// Under `ulimit -n 64`, a --max-conns that does not fit is refused at
// start with the largest value that does, and with that value a flood of
// 1,000 connections gets, every one, either service or the busy reply:
// before, --max-conns 200 was accepted, the flood hit EMFILE, and 749
// clients got no reply at all.
// Over a second: a flood of 1,000 real connections on a serve process with a
// lowered descriptor limit.
func TestServeMaxConnsFitsTheDescriptorLimit(t *testing.T) {
	dir := siteDir(t)
	args := []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--root", dir, "--drain-delay", "0"}
	refused := startChild(t, 64, append(args, "--max-conns", "200")...)
	if code := refused.wait(t, 30*time.Second); code != exitUsage {
		t.Fatalf("--max-conns 200 under ulimit -n 64: exit %d, want 2:\n%s", code, refused.logs)
	}
	m := regexp.MustCompile(`largest that fits is (\d+)`).FindStringSubmatch(refused.logs.String())
	if m == nil || !strings.Contains(refused.logs.String(), "--max-conns 200") {
		t.Fatalf("refusal does not name the flag and the largest value that fits:\n%s", refused.logs)
	}
	fits, _ := strconv.Atoi(m[1])

	c := startChild(t, 64, append(args, "--max-conns", strconv.Itoa(fits))...)
	rec := c.record(t, "serving")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	warm, err := http.Get("http://" + addr + "/small.txt") // cached from now on
	if err != nil {
		t.Fatal(err)
	}
	warm.Body.Close()

	const flood = 1000
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for range flood {
		wg.Go(func() {
			verdict := floodOne(addr)
			mu.Lock()
			counts[verdict]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("flood of %d against --max-conns %d under ulimit -n 64: %v", flood, fits, counts)
	if counts["served"]+counts["busy"] != flood {
		t.Errorf("%d of %d clients got neither service nor the busy reply: %v", flood-counts["served"]-counts["busy"], flood, counts)
	}
	if counts["served"] == 0 {
		t.Error("nobody was served")
	}
	resp, err := http.Get("http://" + admin + "/state")
	if err != nil {
		t.Fatalf("admin listener after the flood: %v", err)
	}
	defer resp.Body.Close()
	var st struct {
		Connections struct {
			AcceptErrors map[string]uint64 `json:"accept_errors"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if n := st.Connections.AcceptErrors["emfile"]; n != 0 {
		t.Errorf("%d EMFILE accept errors: the limit did not keep the server within its descriptors", n)
	}
}

// floodOne connects, asks for a cached file and reads until the server
// closes or has answered: "served", "busy", or what went wrong.
func floodOne(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "dial error"
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(c, "GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(c) // a reset after the reply still leaves the reply
	switch {
	case bytes.HasPrefix(b, []byte("HTTP/1.1 200")) && bytes.HasSuffix(b, []byte("small")):
		return "served"
	case bytes.HasPrefix(b, []byte("HTTP/1.1 503")) && bytes.Contains(b, []byte(`"reason":"max_conns"`)):
		return "busy"
	case len(b) == 0:
		return "no reply"
	}
	return "garbled"
}
