package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/quota"

	"go.uber.org/goleak"
)

func TestParseQuotaSpec(t *testing.T) {
	q, err := parseQuotaSpec("name=per-client,rate=100/s,burst=20,key=header:X-Api-Key,cost=/search:15,cost=/s:2,max-keys=500")
	if err != nil {
		t.Fatal(err)
	}
	if q.name != "per-client" || q.rate != 100 || q.burst != 20 || q.keyHeader != "X-Api-Key" || q.maxKeys != 500 ||
		q.costs["/search"] != 15 || q.costs["/s"] != 2 {
		t.Fatalf("parsed %+v", q)
	}
	for spec, want := range map[string]struct {
		rate  float64
		burst int
	}{
		"name=a,rate=6000/m":      {100, 100},
		"name=a,rate=36/h,key=ip": {0.01, 1},
		"name=a,rate=5/10s":       {0.5, 1},
		"name=a,rate=2.5/s":       {2.5, 3},
	} {
		q, err := parseQuotaSpec(spec)
		if err != nil || math.Abs(q.rate-want.rate) > 1e-9 || q.burst != want.burst || q.keyHeader != "" {
			t.Errorf("%s: %+v, %v; want rate %v burst %d", spec, q, err, want.rate, want.burst)
		}
	}
	bad := map[string]string{
		"":                                    "empty quota",
		"rate=1/s":                            "missing name",
		"name=a":                              "missing rate",
		"name=a,rate=fast":                    `part "rate=fast"`,
		"name=a,rate=0/s":                     `count "0"`,
		"name=a,rate=1/fortnight":             `unit "fortnight"`,
		"name=a,rate=1/-1s":                   `unit "-1s"`,
		"name=a,rate=NaN/s":                   `count "NaN"`,
		"name=a,rate=1/s,burst=0":             `part "burst=0"`,
		"name=a,rate=1/s,burst=-3":            `part "burst=-3"`,
		"name=a,rate=1/s,key=cookie:x":        `part "key=cookie:x"`,
		"name=a,rate=1/s,key=header:bad h":    `part "key=header:bad h"`,
		"name=a,rate=1/s,cost=search:5":       `path prefix "search"`,
		"name=a,rate=1/s,burst=5,cost=/x:6":   "exceeds burst=5",
		"name=a,rate=1/s,cost=/x:1,cost=/x:2": "priced twice",
		"name=a,rate=1/s,colour=red":          `unknown field "colour"`,
		"name=a,rate=1/s,rate=2/s":            "rate given twice",
		"name=a b,rate=1/s":                   `part "name=a b"`,
		"name=a,,rate=1/s":                    `part ""`,
		"name=a,rate=1e12/s":                  "out of range",
	}
	for spec, want := range bad {
		if _, err := parseQuotaSpec(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseQuotaSpec(%q): %v, want an error naming %q", spec, err, want)
		}
	}
}

func FuzzParseQuotaSpec(f *testing.F) {
	for _, s := range []string{
		"name=per-client,rate=100/s,burst=20,key=header:X-Api-Key",
		"name=a,rate=5/10s,cost=/x:1,cost=/y:2,max-keys=9", "name=a,rate=1/s,key=ip", "=,=", "name=,rate=/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := parseQuotaSpec(s)
		if err != nil {
			return
		}
		if quota.CheckName(q.name) != nil || !(q.rate > 0) || math.IsInf(q.rate, 0) || q.burst < 1 || q.burst > maxBurst {
			t.Fatalf("%q accepted as %+v", s, q)
		}
		for p, c := range q.costs {
			if !strings.HasPrefix(p, "/") || c < 1 || c > q.burst {
				t.Fatalf("%q: cost %s:%d accepted", s, p, c)
			}
		}
		// What was accepted builds a quota.
		if _, err := quota.New(quota.Config{Name: q.name, Rate: q.rate, Burst: q.burst, MaxKeys: q.maxKeys}); err != nil {
			t.Fatalf("%q accepted but quota.New says %v", s, err)
		}
	})
}

func TestServeQuotaBadFlagsExitTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		envs map[string]string
		want string
	}{
		{"bad rate", []string{"--quota", "name=x,rate=fast"}, nil, `part "rate=fast"`},
		{"bad env twin", nil, map[string]string{"SLUICE_QUOTA": "name=x,rate=1/s,burst=lots"}, "SLUICE_QUOTA"},
		{"duplicate name", []string{"--quota", "name=x,rate=1/s", "--quota", "name=x,rate=2/s"}, nil, `"x" used twice`},
		{"redis without quota", []string{"--quota-redis", "redis://127.0.0.1:1/0"}, nil, "without any --quota"},
		{"bad redis url", []string{"--quota", "name=x,rate=1/s", "--quota-redis", "http://x"}, nil, "--quota-redis"},
		{"bad quota-fail", []string{"--quota", "name=x,rate=1/s", "--quota-fail", "maybe"}, nil, "--quota-fail"},
		{"bad mode", []string{"--quota", "name=x,rate=1/s", "--quota-mode", "fast"}, nil, "--quota-mode"},
		{"bad instances", []string{"--quota", "name=x,rate=1/s", "--quota-instances", "0"}, nil, "--quota-instances 0"},
		{"bad proxies", []string{"--quota", "name=x,rate=1/s", "--trusted-proxies", "10.0.0.0/33"}, nil, "10.0.0.0/33"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, tt.args...)
			code, out := runSubcommand(context.Background(), runServe, tt.envs, args...)
			if code != exitUsage || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, exitUsage, tt.want)
			}
		})
	}
}

// TestServeQuota429 runs serve in-process with a local quota: the third
// request of a key within a second gets 429 with the contract's answer,
// and /metrics shows the quota.
func TestServeQuota429(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	e := env{stdout: &out, stderr: &out, getenv: func(k string) string {
		return map[string]string{"SLUICE_QUOTA": "name=per-client,rate=1/s,burst=2,key=header:X-Api-Key"}[k]
	}}
	go func() {
		done <- runServe(ctx, e, []string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0"})
	}()
	rec := logRecord(t, &out, "serving")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	do := func(url, key string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	var codes []int
	var last *http.Response
	var body string
	for range 3 {
		last, body = do("http://"+addr+"/", "k1")
		codes = append(codes, last.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("codes %v, want [200 200 429]", codes)
	}
	if last.Header.Get("Retry-After") != "1" || !strings.Contains(body, `"error":"RATE_LIMITED"`) || !strings.Contains(body, `"gate":"per-client"`) ||
		last.Header.Get("RateLimit-Policy") != `"per-client";q=2;w=2` {
		t.Fatalf("429 answer: %v %q", last.Header, body)
	}
	if resp, _ := do("http://"+addr+"/", "k2"); resp.StatusCode != 200 {
		t.Fatalf("another key: %d", resp.StatusCode)
	}
	_, metrics := do("http://"+admin+"/metrics", "")
	for _, want := range []string{`sluice_quota_allowed_total{quota="per-client"} 3`, `sluice_quota_limited_total{quota="per-client"} 1`,
		`sluice_quota_mode{mode="local",quota="per-client"} 1`,
		// attributable by sluice load --metrics, like a gate's refusal
		`sluice_admission_rejected_total{gate="per-client",kind="default",reason="rate"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	_, state := do("http://"+admin+"/state", "")
	var st struct {
		Extra map[string]struct {
			Quota   string `json:"quota"`
			Mode    string `json:"mode"`
			Allowed uint64 `json:"allowed"`
			Limited uint64 `json:"limited"`
		} `json:"extra"`
	}
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		t.Fatalf("/state: %v\n%s", err, state)
	}
	if q := st.Extra["quota.per-client"]; q.Quota != "per-client" || q.Mode != "local" || q.Allowed != 3 || q.Limited != 1 {
		t.Errorf("/state quota section %+v, want per-client local allowed 3 limited 1\n%s", q, state)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}

// buildSluice builds the sluice binary once per test.
func buildSluice(t *testing.T) string {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH; cannot build the sluice binary")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServe starts a `sluice serve` process and returns its main and
// admin addresses; it is killed when the test ends.
func startServe(t *testing.T, bin string, args ...string) (addr, admin string) {
	return startServeEnv(t, bin, append(os.Environ(), "SLUICE_QUOTA="), args...)
}

// startServeEnv is startServe with the process's environment.
func startServeEnv(t *testing.T, bin string, env []string, args ...string) (addr, admin string) {
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0"}, args...)...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	found := make(chan [2]string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec struct{ Msg, Addr, Admin_addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "serving" {
				found <- [2]string{rec.Addr, rec.Admin_addr}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-found:
		return a[0], a[1]
	case <-exited:
		t.Fatal("sluice serve exited before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("sluice serve did not report its address")
	}
	return "", ""
}

// TestServeFleetQuotaThreeProcesses: three `sluice serve` processes share
// one quota through a real redis-server. Clients hammer all three with one
// API key; over the run the total admitted stays within the quota (burst
// + rate x elapsed, plus 3 leases in lease mode).
// 6 to 10 s: three sluice serve processes and a redis-server, hammered in
// each spending mode.
func TestServeFleetQuotaThreeProcesses(t *testing.T) {
	srv := redistest.Start(t)
	bin := buildSluice(t)
	const rate, burst = 50.0, 10
	for _, mode := range []string{"exact", "lease"} {
		t.Run(mode, func(t *testing.T) {
			spec := fmt.Sprintf("name=fleet-%s,rate=%.0f/s,burst=%d,key=header:X-Api-Key", mode, rate, burst)
			var addrs, admins []string
			for range 3 {
				a, adm := startServe(t, bin, "--quota", spec, "--quota-redis", srv.URL(), "--quota-instances", "3", "--quota-mode", mode,
					"--quota-redis-timeout", "500ms") // a loaded CI machine: keep decisions on Redis
				addrs, admins = append(addrs, a), append(admins, adm)
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 16}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			var ok, limited, other atomic.Int64
			start := time.Now()
			const window = 1500 * time.Millisecond
			var wg sync.WaitGroup
			for i := range 12 {
				addr := addrs[i%3]
				wg.Go(func() {
					for time.Since(start) < window {
						req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
						req.Header.Set("X-Api-Key", "shared-client")
						resp, err := c.Do(req)
						if err != nil {
							other.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						switch resp.StatusCode {
						case 200:
							ok.Add(1)
						case 429:
							limited.Add(1)
						default:
							other.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			bound := burst + rate*elapsed + 1
			leaseSize := max(1, burst/10)
			if mode == "lease" {
				bound += 3 * float64(leaseSize)
			}
			// Decisions made while Redis was unreachable are made by each
			// instance's fallback share, outside the shared bucket: allow
			// for them (normally zero).
			var fallbacks float64
			for _, adm := range admins {
				resp, err := c.Get("http://" + adm + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], "sluice_quota_fallback_decisions_total{") {
						n, err := strconv.ParseFloat(f[1], 64)
						if err != nil {
							t.Fatalf("metrics line %q: %v", line, err)
						}
						fallbacks += n
					}
				}
			}
			bound += fallbacks
			t.Logf("%s: %d admitted, %d limited, %d other in %.2fs; %v fallback decisions; bound %.0f",
				mode, ok.Load(), limited.Load(), other.Load(), elapsed, fallbacks, bound)
			if float64(ok.Load()) > bound {
				t.Fatalf("three instances admitted %d in %.2fs; the shared quota allows %.0f", ok.Load(), elapsed, bound)
			}
			if float64(ok.Load()) < 0.5*(rate*elapsed) || limited.Load() == 0 || other.Load() != 0 {
				t.Fatalf("admitted %d, limited %d, other %d: the quota was not exercised as expected", ok.Load(), limited.Load(), other.Load())
			}
		})
	}
}

// TestServeQuotaRedisDownFailsOpen: with Redis unreachable, serve still
// answers within its share (burst 8 over 4 instances: 2 at once), and
// /metrics says it is deciding in fallback mode.
func TestServeQuotaRedisDownFailsOpen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(ctx, env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}, []string{
			"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0",
			"--quota", "name=down,rate=0.4/s,burst=8,key=header:X-Api-Key",
			"--quota-redis", "redis://" + dead + "/0", "--quota-instances", "4"})
	}()
	rec := logRecord(t, &out, "serving")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var codes []int
	for range 4 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Header.Set("X-Api-Key", "k")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a request took %v with Redis down", d)
		}
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 || codes[3] != 429 {
		t.Fatalf("codes %v, want the share of 2 admitted then 429", codes)
	}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `sluice_quota_mode{mode="fallback",quota="down"} 1`) {
		t.Fatalf("/metrics does not show fallback mode:\n%s", b)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}
