package main

import (
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestServerGC(t *testing.T) {
	unset := func(string) string { return "" }
	set := func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}
	for _, tc := range []struct {
		args   []string
		getenv func(string) string
		want   int
		ok     bool
	}{
		{[]string{"proxy", "--upstream", "http://x"}, unset, serverGCPercent, true},
		{[]string{"serve"}, unset, serverGCPercent, true},
		{[]string{"ratelimit"}, unset, serverGCPercent, true},
		{[]string{"proxy"}, set, 0, false}, // the operator's GOGC wins
		{[]string{"load", "--rate", "10"}, unset, 0, false},
		{[]string{"help", "proxy"}, unset, 0, false},
		{nil, unset, 0, false},
	} {
		got, ok := serverGC(tc.args, tc.getenv)
		if got != tc.want || ok != tc.ok {
			t.Errorf("serverGC(%q) = %d, %v; want %d, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

// TestServerProcessGCTarget: a `sluice serve` process runs with the
// servers' GC target, which its Go metrics show, unless GOGC says
// otherwise.
func TestServerProcessGCTarget(t *testing.T) {
	bin := buildSluice(t)
	base := []string{"SLUICE_QUOTA="}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") {
			base = append(base, kv)
		}
	}
	for _, tc := range []struct {
		gogc string // "": not set
		want string
	}{
		{"", strconv.Itoa(serverGCPercent)},
		{"150", "150"},
	} {
		env := slices.Clip(base)
		if tc.gogc != "" {
			env = append(env, "GOGC="+tc.gogc)
		}
		_, admin := startServeEnv(t, bin, env)
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "\ngo_gc_gogc_percent "+tc.want+"\n") {
			i := strings.Index(string(body), "go_gc_gogc_percent ")
			t.Errorf("GOGC=%q: want go_gc_gogc_percent %s, metrics say %.40q", tc.gogc, tc.want, string(body)[max(i, 0):])
		}
	}
}
