package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"go.uber.org/goleak"
)

func TestServeAdmissionBadFlagsExitTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		envs map[string]string
		want string
	}{
		{"unknown law", []string{"--limit", "magic"}, nil, `--limit "magic"`},
		{"min above max", []string{"--limit", "aimd", "--limit-min", "10", "--limit-max", "5"}, nil, "--limit-min 10 is above --limit-max 5"},
		{"negative min", []string{"--limit", "vegas", "--limit-min", "-1"}, nil, "--limit-min -1"},
		{"max too big", []string{"--limit", "vegas", "--limit-max", "99999999"}, nil, "--limit-max 99999999"},
		{"negative slo", []string{"--limit", "gradient2", "--slo", "-1s"}, nil, "--slo -1s"},
		{"slo with fixed", []string{"--slo", "100ms"}, nil, "--slo needs an adaptive --limit"},
		{"min with fixed", []string{"--limit-min", "3"}, nil, "--limit-min needs an adaptive --limit"},
		{"bad discipline", []string{"--queue", "4", "--queue-discipline", "random"}, nil, `--queue-discipline "random"`},
		{"discipline without queue", []string{"--queue-discipline", "codel"}, nil, "--queue-discipline codel needs --queue"},
		{"bad header", []string{"--queue", "4", "--priority-header", "X Priority"}, nil, `--priority-header "X Priority"`},
		{"header without queue", []string{"--priority-header", "X-Priority"}, nil, "--priority-header needs --queue"},
		{"share unknown class", []string{"--queue", "4", "--priority-header", "P", "--class-share", "bulk=0.1"}, nil, `unknown class "bulk"`},
		{"share not a number", []string{"--queue", "4", "--priority-header", "P", "--class-share", "sheddable=lots"}, nil, "--class-share \"sheddable=lots\": class share"},
		{"share out of range", []string{"--queue", "4", "--priority-header", "P", "--class-share", "sheddable=1.5"}, nil, "outside (0, 1]"},
		{"shares sum", []string{"--queue", "4", "--priority-header", "P", "--class-share", "sheddable=0.6", "--class-share", "critical=0.6"}, nil, "more than 1"},
		{"share twice", []string{"--queue", "4", "--priority-header", "P", "--class-share", "sheddable=0.1", "--class-share", "sheddable=0.2"}, nil, "given twice"},
		{"share without header", []string{"--queue", "4", "--class-share", "sheddable=0.1"}, nil, "--class-share needs --priority-header"},
		{"bad env twin", []string{"--queue", "4"}, map[string]string{"SLUICE_QUEUE_DISCIPLINE": "stack"}, `--queue-discipline "stack"`},
		{"bad env law", nil, map[string]string{"SLUICE_LIMIT": "pid"}, `--limit "pid"`},
		{"bad env share", []string{"--queue", "4", "--priority-header", "P"}, map[string]string{"SLUICE_CLASS_SHARE": "x"}, "SLUICE_CLASS_SHARE"},
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

// TestServeAdmissionWired runs serve with every admission flag and checks
// that the disk gate got them: the class from the header is counted, the
// adaptive limit shows in /state and /metrics, and the queue age is
// exported under the name sluice doctor reads.
// About 5 s: a sluice serve process under real load until its adaptive
// limit and queue show.
func TestServeAdmissionWired(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan int, 1)
	e := env{stdout: &out, stderr: &out, getenv: func(k string) string {
		return map[string]string{"SLUICE_LOG_FORMAT": "json", "SLUICE_QUEUE_DISCIPLINE": "codel"}[k]
	}}
	go func() {
		done <- runServe(ctx, e, []string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--queue", "8",
			"--limit", "aimd", "--limit-min", "2", "--limit-max", "16", "--slo", "100ms",
			"--priority-header", "X-Priority", "--class-share", "sheddable=0.25", "--cache-bytes", "0"})
	}()
	rec := logRecord(t, &out, "serving")
	addr, admin := fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	if r := logRecord(t, &out, "disk gate admission"); r["queue_discipline"] != "codel" || r["limit"] != "aimd" {
		t.Errorf("admission log %v", r)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	get := func(url, class string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if class != "" {
			req.Header.Set("X-Priority", class)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, class := range []string{"sheddable", "sheddable", "bogus", ""} {
		if code, _ := get("http://"+addr+"/", class); code != http.StatusOK {
			t.Fatalf("GET / as %q: %d", class, code)
		}
	}
	code, body := get("http://"+admin+"/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`sluice_admission_class_admitted_total{class="sheddable",gate="disk"} 2`,
		`sluice_admission_class_admitted_total{class="critical",gate="disk"} 2`,
		`sluice_admission_oldest_wait_seconds{gate="disk"} 0`,
		`sluice_limit_capacity{gate="disk",law="aimd"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, body = get("http://"+admin+"/state", "")
	var st struct {
		Gates []struct {
			Gate    string                     `json:"gate"`
			Classes map[string]json.RawMessage `json:"classes"`
		} `json:"gates"`
		Limits []struct {
			Gate, Law      string
			Limit          int64   `json:"limit"`
			CeilingSeconds float64 `json:"ceiling_seconds"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("/state %d %v: %s", code, err, body)
	}
	if len(st.Limits) != 1 || st.Limits[0].Gate != "disk" || st.Limits[0].Law != "aimd" || st.Limits[0].Limit < 2 || st.Limits[0].Limit > 16 || st.Limits[0].CeilingSeconds != 0.1 {
		t.Errorf("/state limits %+v", st.Limits)
	}
	if len(st.Gates) != 1 || len(st.Gates[0].Classes) != admit.NumClasses {
		t.Errorf("/state gates %s", body)
	}
	tr.CloseIdleConnections()
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}

// TestServeAdmissionQueueWaitFromSLO: with an adaptive --limit, an --slo
// and a --queue but no --max-wait, the disk gate the flags build waits at
// most a quarter of the SLO (what the limit's SLO budget leaves the
// queue); anything else keeps --max-wait, or the gate's default.
func TestServeAdmissionQueueWaitFromSLO(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration // how long a queued read waits before wait_timeout; 0: refused at once
	}{
		{"adaptive with slo", []string{"--queue", "4", "--limit", "gradient2", "--limit-min", "1", "--slo", "50ms"}, 12500 * time.Microsecond},
		{"max-wait given", []string{"--queue", "4", "--max-wait", "30ms", "--limit", "gradient2", "--slo", "50ms"}, 30 * time.Millisecond},
		{"no queue", []string{"--limit", "gradient2", "--slo", "50ms"}, 0},
		{"no slo", []string{"--queue", "4", "--limit", "vegas"}, admit.DefaultMaxWait},
		{"fixed", []string{"--queue", "4"}, admit.DefaultMaxWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			st := addStaticFlags(fs)
			o := addAdmissionFlags(fs)
			if err := fs.Parse(append([]string{"--max-inflight", "1"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := o.validate(st.queue); err != nil {
				t.Fatal(err)
			}
			lim, err := o.limitConfig(nil)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				disk, _, _, cleanup, err := st.build(nil, nil, lim)
				if err != nil {
					t.Fatal(err)
				}
				defer cleanup()
				if (disk.Limit() != nil) != (lim != nil) {
					t.Fatalf("adaptive limit %v, want one only with an adaptive --limit", disk.Limit())
				}
				g := disk.Gate()
				p, err := g.TryAcquire()
				if err != nil {
					t.Fatal(err)
				}
				defer p.Done(admit.OutcomeOK)
				start := time.Now()
				_, err = g.Acquire(context.Background())
				if err == nil || time.Since(start) != tc.want {
					t.Errorf("a queued read was refused (%v) after %v, want after %v", err, time.Since(start), tc.want)
				}
			})
		})
	}
}
