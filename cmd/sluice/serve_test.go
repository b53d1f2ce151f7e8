package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"

	"go.uber.org/goleak"
)

// lockedBuffer is a goroutine-safe stderr for subcommands run in-process.
type lockedBuffer = testutil.SyncBuffer

// runSubcommand runs a subcommand in-process with the given environment.
func runSubcommand(ctx context.Context, run func(context.Context, env, []string) int, envs map[string]string, args ...string) (int, string) {
	var out lockedBuffer
	code := run(ctx, env{stdout: &out, stderr: &out, getenv: func(k string) string { return envs[k] }}, args)
	return code, out.String()
}

// logRecord finds the first JSON log record with the given msg in the
// output, waiting for it to appear.
func logRecord(t *testing.T, out *lockedBuffer, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
				return rec
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log record %q in:\n%s", msg, out.String())
	return nil
}

func TestServeBadFlagsExitTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		envs map[string]string
		want string
	}{
		{"negative max-conns", []string{"--max-conns", "-1"}, nil, "--max-conns -1"},
		{"bad addr", []string{"--addr", "localhost"}, nil, "--addr \"localhost\""},
		{"bad port", []string{"--admin-addr", "127.0.0.1:http2"}, nil, "--admin-addr"},
		{"same addr twice", []string{"--addr", "127.0.0.1:7000", "--admin-addr", "127.0.0.1:7000"}, nil, "its own port"},
		{"zero idle timeout", []string{"--idle-timeout", "0s"}, nil, "--idle-timeout 0s"},
		{"negative header timeout", []string{"--read-header-timeout", "-1s"}, nil, "--read-header-timeout"},
		{"negative shutdown timeout", []string{"--shutdown-timeout", "-1s"}, nil, "--shutdown-timeout"},
		{"log format", []string{"--log-format", "xml"}, nil, "--log-format \"xml\""},
		{"log level", []string{"--log-level", "loud"}, nil, "--log-level \"loud\""},
		{"positional", []string{"extra"}, nil, "unexpected argument \"extra\""},
		{"unknown flag", []string{"--nope"}, nil, "unknown flag --nope"},
		{"bad env twin", nil, map[string]string{"SLUICE_MAX_CONNS": "many"}, "SLUICE_MAX_CONNS"},
		{"bad env duration", nil, map[string]string{"SLUICE_SHUTDOWN_TIMEOUT": "-5s"}, "--shutdown-timeout"},
		{"unknown engine", []string{"--engine", "slow"}, nil, "--engine \"slow\": want fast or net"},
		{"fast engine with h2c", []string{"--engine", "fast", "--h2c"}, nil, "--engine fast serves cleartext HTTP/1.1 only"},
		{"fast engine from the environment with h2c", []string{"--h2c"}, map[string]string{"SLUICE_ENGINE": "fast"}, "--engine fast serves cleartext HTTP/1.1 only"},
		{"quota companion without quota", []string{"--trusted-proxies", "10.0.0.0/8"}, nil, "--trusted-proxies without any --quota"},
		{"quota twin without quota", nil, map[string]string{"SLUICE_QUOTA_FAIL": "closed"}, "--quota-fail without any --quota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runSubcommand(context.Background(), runServe, tt.envs, tt.args...)
			if code != exitUsage || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, exitUsage, tt.want)
			}
		})
	}
}

func TestServeHelpListsFlags(t *testing.T) {
	code, out := runSubcommand(context.Background(), runServe, nil, "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-addr", "-admin-addr", "-max-conns", "-idle-timeout", "-read-header-timeout",
		"-shutdown-timeout", "-log-level", "-log-format", "-engine", "SLUICE_SOME_FLAG"} {
		if !strings.Contains(out, f) {
			t.Errorf("--help lacks %q", f)
		}
	}
}

// TestServeRunsAndShutsDown starts serve on free ports (from an
// environment twin and a flag), checks both listeners, then cancels.
func TestServeRunsAndShutsDown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	e := env{stdout: &out, stderr: &out, getenv: func(k string) string {
		return map[string]string{"SLUICE_ADDR": "127.0.0.1:0", "SLUICE_LOG_FORMAT": "json"}[k]
	}}
	go func() {
		done <- runServe(ctx, e, []string{"--admin-addr", "127.0.0.1:0", "--max-conns", "32", "--shutdown-timeout", "2s", "--drain-delay", "0"})
	}()
	rec := logRecord(t, &out, "serving")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	if rec["max_conns"] != float64(32) {
		t.Errorf("max_conns = %v, want 32 from the flag", rec["max_conns"])
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	get := func(url string) (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The first GET of the demo index reads it from disk through the gate
	// (a hold sample), the second is a cache hit.
	for range 2 {
		if code, _ := get("http://" + addr + "/"); code != http.StatusOK {
			t.Errorf("main listener answered %d, want 200 from the demo site", code)
		}
	}
	if code, body := get("http://" + admin + "/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("http://" + admin + "/metrics"); code != 200 || !strings.Contains(body, "process_cpu_seconds_total") ||
		!strings.Contains(body, "sluice_connections_max 32") {
		t.Errorf("/metrics: %d, lacks process or connection metrics", code)
	} else {
		for _, want := range []string{
			`sluice_cache_hits_total 1`,
			`sluice_admission_admitted_total{gate="disk",kind="read"} 1`,
			`sluice_admission_hold_seconds_count{gate="disk",kind="read"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	}
	if code, body := get("http://" + admin + "/state"); code != 200 || !strings.Contains(body, `"max_conns": 32`) {
		t.Errorf("/state: %d %q", code, body)
	}
	tr.CloseIdleConnections()
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d after shutdown:\n%s", code, out.String())
	}
	logRecord(t, &out, "shut down cleanly")
}

// TestServePortInUseExitsFive: a listener that cannot bind exits 5, the
// status documented for it, and names the flag of that listener.
func TestServePortInUseExitsFive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	e := env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	go func() {
		done <- runServe(ctx, e, []string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0"})
	}()
	rec := logRecord(t, &out, "serving")
	code, msg := runSubcommand(context.Background(), runServe, nil, "--addr", "127.0.0.1:0", "--admin-addr", fmt.Sprint(rec["admin_addr"]))
	if code != exitBind || !strings.Contains(msg, "--admin-addr "+fmt.Sprint(rec["admin_addr"])+": the address is in use") {
		t.Errorf("exit %d, %q; want 5 naming --admin-addr", code, msg)
	}
	cancel()
	<-done
}

// FuzzServeFlags feeds arbitrary values to the frame's flags: parsing and
// validation never panic, and whatever validates has well-formed
// addresses and sane numbers.
func FuzzServeFlags(f *testing.F) {
	f.Add("127.0.0.1:8080", "127.0.0.1:9090", "0", "60s", "info", "text")
	f.Add("localhost", ":0", "-1", "0s", "loud", "xml")
	f.Add("[::1]:80", "[::1]:81", "99999999999999999999", "1h", "DEBUG", "json")
	f.Add("1.2.3.4:99999", "a:b:c", "12", "-3s", "warn+2", "text")
	f.Fuzz(func(t *testing.T, addr, admin, maxConns, idle, level, format string) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o serveOptions
		o.register(fs)
		args := []string{"--addr=" + addr, "--admin-addr=" + admin, "--max-conns=" + maxConns,
			"--idle-timeout=" + idle, "--log-level=" + level, "--log-format=" + format}
		if err := parseFlags(fs, env{stderr: io.Discard, getenv: func(string) string { return "" }}, args); err != nil {
			return
		}
		if err := o.validate(); err != nil {
			return
		}
		if _, _, err := net.SplitHostPort(o.addr); err != nil {
			t.Fatalf("accepted --addr %q: %v", o.addr, err)
		}
		if o.maxConns < 0 || o.idleTimeout <= 0 {
			t.Fatalf("accepted max-conns %d idle %v", o.maxConns, o.idleTimeout)
		}
		if _, err := o.log.logger(io.Discard); err != nil && (o.log.format == "text" || o.log.format == "json") && strings.EqualFold(o.log.level, "info") {
			t.Fatalf("logger(%q, %q): %v", o.log.level, o.log.format, err)
		}
	})
}
