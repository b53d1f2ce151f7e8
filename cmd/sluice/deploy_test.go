package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testutil"
)

// deployDir holds the Prometheus rules and the Grafana dashboard.
var deployDir = filepath.Join("..", "..", "deploy")

// promtool returns the promtool binary. Without it the test is skipped
// with a message, except under CI, where it fails: CI installs it.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found on PATH and CI is set: install the Debian package prometheus (.ci/run does)")
		}
		t.Skip("promtool not found on PATH: install the Debian package prometheus to check the alert rules and the dashboard")
	}
	return bin
}

func runPromtool(t *testing.T, bin, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRulesCheckAndUnitTests runs promtool check rules and promtool
// test rules on deploy/prometheus.
func TestAlertRulesCheckAndUnitTests(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join(deployDir, "prometheus")
	runPromtool(t, bin, dir, "check", "rules", "sluice-rules.yaml")
	runPromtool(t, bin, dir, "test", "rules", "sluice-rules.test.yaml")
}

// dashboardExprs returns every PromQL expression of the dashboard, with
// Grafana's variables replaced so that Prometheus can parse them.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "sluice-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", `"$job"`, `".*"`, `"$instance"`, `".*"`, `"$gate"`, `".*"`)
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel of type %s has no query", p.Type)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, vars.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *[a-z_]+\)$`)
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if v.Type != "query" || !ok {
			continue
		}
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		if m == nil {
			t.Errorf("variable query %v: want label_values(SELECTOR, label)", q["query"])
			continue
		}
		exprs = append(exprs, vars.Replace(m[1]))
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions in the dashboard", len(exprs))
	}
	return exprs
}

// ruleExprs returns the rules file's expressions.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "sluice-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The rules are YAML; their exprs are the only values that name
	// metrics, so the whole file is scanned for names below, and
	// promtool parses it.
	return []string{string(b)}
}

var metricName = regexp.MustCompile(`\bsluice_[a-z0-9_]+\b`)

// TestDashboardAndRulesNameExportedMetrics: every dashboard expression
// parses (promtool, as recording rules), and every sluice_* name in the
// dashboard and the rules is one that serve, proxy or ratelimit exports,
// read from their live /metrics.
func TestDashboardAndRulesNameExportedMetrics(t *testing.T) {
	bin := promtool(t)
	exprs := dashboardExprs(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(e)
		fmt.Fprintf(&rules, "      - record: dashboard:expr_%d\n        expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-rules.yaml"), []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "rules", "dashboard-rules.yaml")

	exported := liveMetricNames(t)
	for what, texts := range map[string][]string{"dashboard": exprs, "rules": ruleExprs(t)} {
		for _, text := range texts {
			for _, name := range metricName.FindAllString(text, -1) {
				if !exported[name] {
					t.Errorf("the %s name %s, which no sluice server exports", what, name)
				}
			}
		}
	}
}

// liveMetricNames runs serve (a quota, an adaptive limit), proxy (retry
// budget, breaker) and ratelimit (on Redis), sends each a request, and
// returns every metric name their /metrics lists (a histogram's _bucket,
// _sum and _count included).
func liveMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	redis := redistest.Start(t)
	names := map[string]bool{}
	scrape := func(admin string) {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for name, f := range fams {
			names[name] = true
			if len(f.Metric) > 0 && (f.Metric[0].Histogram != nil || f.Metric[0].Summary != nil) {
				names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
			}
		}
	}
	get := func(url string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- runServe(ctx, env{stdout: out, stderr: out, getenv: func(string) string { return "" }}, []string{
			"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0s",
			"--quota", "name=per-client,rate=100/s", "--limit", "aimd"})
	}()
	rec := logRecord(t, out, "serving")
	get("http://" + fmt.Sprint(rec["addr"]) + "/")
	scrape(fmt.Sprint(rec["admin_addr"]))
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("serve exit %d:\n%s", code, out.String())
	}

	// The proxy: one upstream slot and a queue, so that a second request
	// waits (the wait histogram has a sample) while the first is held.
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "up")
	}))
	defer up.Close()
	px := startProxy(t, nil, "--upstream", up.URL, "--limit", "gradient2", "--limit-max", "1", "--max-inflight", "1", "--queue", "4", "--max-wait", "10s")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { get("http://" + px.addr + "/") })
	}
	testutil.Eventually(t, "a request queued at the proxy", func() bool {
		resp, err := http.Get("http://" + px.admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `sluice_admission_waiting{gate="upstream"} 1`)
	})
	close(release)
	wg.Wait()
	scrape(px.admin)
	px.stop(t)

	path := writeRLSConfig(t, t.TempDir(), rlsConfig)
	r := startRLS(t, "--config", path, "--redis", redis.URL())
	r.decide(t, "edge", "remote_address", "x")
	scrape(r.admin)
	r.stop(t)

	for _, want := range []string{"sluice_admission_offered_total", "sluice_quota_mode", "sluice_breaker_state",
		"sluice_retry_budget_exhausted_total", "sluice_limit_capacity", "sluice_ratelimit_decisions_total", "sluice_ratelimit_redis_seconds_bucket"} {
		if !names[want] {
			all := make([]string, 0, len(names))
			for n := range names {
				all = append(all, n)
			}
			slices.Sort(all)
			t.Fatalf("the live servers do not export %s; they export %v", want, all)
		}
	}
	return names
}
