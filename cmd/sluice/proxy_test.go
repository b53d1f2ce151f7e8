package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/proxy"
)

func TestProxyBadFlagsExitTwo(t *testing.T) {
	dir := t.TempDir()
	badRules := writeRules(t, `{"routes":[{"name":"a","cost":-1}]}`)
	fleetRules := writeRules(t, `{"routes":[{"name":"search","quota":{"rate":1,"scope":"fleet"}}]}`)
	badQueueing := writeRules(t, `{"routes":[{"name":"a","max_inflight":2,"queue":2,"class_shares":["sheddable=0.1"]}]}`)
	up := []string{"--upstream", "http://127.0.0.1:9"}
	tests := []struct {
		name string
		args []string
		envs map[string]string
		want string
	}{
		{"no upstream", nil, nil, "--upstream is required"},
		{"bad upstream", []string{"--upstream", "ftp://x"}, nil, `upstream "ftp://x"`},
		{"upstream without host", []string{"--upstream", "http://"}, nil, "want http://host:port"},
		{"zero max-inflight", append(up, "--max-inflight", "0"), nil, "--max-inflight 0"},
		{"unknown law", append(up, "--limit", "magic"), nil, `--limit "magic"`},
		{"slo without adaptive", append(up, "--slo", "100ms"), nil, "need an adaptive --limit"},
		{"limit-max above max-inflight", append(up, "--limit", "aimd", "--max-inflight", "8", "--limit-max", "9"), nil, "limit_max 9"},
		{"max-wait without queue", append(up, "--max-wait", "1s"), nil, "--max-wait needs --queue"},
		{"zero attempts", append(up, "--attempts", "0"), nil, "--attempts 0"},
		{"zero upstream timeout", append(up, "--upstream-timeout", "0s"), nil, "--upstream-timeout 0s"},
		{"missing config", append(up, "--config", filepath.Join(dir, "nope.json")), nil, "--config"},
		{"bad config", append(up, "--config", badRules), nil, "cost -1"},
		{"bad quota", append(up, "--quota", "name=q"), nil, "missing rate"},
		{"bad env twin", nil, map[string]string{"SLUICE_UPSTREAM": "nope"}, "SLUICE_UPSTREAM"},
		{"positional", append(up, "extra"), nil, `unexpected argument "extra"`},
		{"bad discipline", append(up, "--queue", "4", "--queue-discipline", "stack"), nil, `--queue-discipline "stack"`},
		{"discipline without queue", append(up, "--queue-discipline", "lifo"), nil, "--queue-discipline lifo needs --queue"},
		{"bad priority header", append(up, "--queue", "4", "--priority-header", "X P"), nil, `--priority-header "X P"`},
		{"priority header without queue", append(up, "--priority-header", "X-P"), nil, "--priority-header needs --queue"},
		{"share unknown class", append(up, "--queue", "4", "--priority-header", "P", "--class-share", "bulk=0.1"), nil, `unknown class "bulk"`},
		{"shares sum", append(up, "--queue", "4", "--priority-header", "P", "--class-share", "sheddable=0.6", "--class-share", "critical=0.6"), nil, "more than 1"},
		{"share without header", append(up, "--queue", "4", "--class-share", "sheddable=0.1"), nil, "--class-share needs --priority-header"},
		{"bad discipline twin", append(up, "--queue", "4"), map[string]string{"SLUICE_QUEUE_DISCIPLINE": "stack"}, `--queue-discipline "stack"`},
		{"bad share twin", append(up, "--queue", "4", "--priority-header", "P"), map[string]string{"SLUICE_CLASS_SHARE": "sheddable=2"}, "SLUICE_CLASS_SHARE"},
		{"bad route queueing", append(up, "--config", badQueueing), nil, "class_shares needs priority_header"},
		{"fleet scope without redis", append(up, "--config", fleetRules), nil, "needs a fleet store"},
		{"redis without any quota", append(up, "--quota-redis", "redis://127.0.0.1:1/0"), nil, "--quota-redis without any --quota"},
		{"bad redis url for routes", append(up, "--config", fleetRules, "--quota-redis", "http://x"), nil, "--quota-redis"},
		{"bad fleet mode for routes", append(up, "--config", fleetRules, "--quota-redis", "redis://127.0.0.1:1/0", "--quota-mode", "fast"), nil, "--quota-mode"},
		{"quota named like a route quota", append(up, "--config", fleetRules, "--quota", "name=search-quota,rate=1/s"), nil, "--quota name=search-quota"},
		{"quota named like the breaker", append(up, "--quota", "name=upstream-breaker,rate=1/s"), nil, "--quota name=upstream-breaker"},
		{"upstream port out of range", []string{"--upstream", "http://h:99999"}, nil, `upstream "http://h:99999": port "99999" is not a number from 1 to 65535`},
		{"upstream empty port", []string{"--upstream", "http://h:"}, nil, `upstream "http://h:": empty port`},
		{"upstream port in the twin", nil, map[string]string{"SLUICE_UPSTREAM": "http://127.0.0.1:9,http://h:70000"}, `SLUICE_UPSTREAM`},
		{"1ns upstream timeout", append(up, "--upstream-timeout", "1ns"), nil, "--upstream-timeout 1ns: want 10ms to 1h0m0s"},
		{"endless upstream timeout", append(up, "--upstream-timeout", "2562047h"), nil, "--upstream-timeout 2562047h0m0s: want 10ms to 1h0m0s"},
		{"1ns eject-for", append(up, "--eject-for", "1ns"), nil, "--eject-for 1ns: want 100ms to 1h0m0s"},
		{"1ns stale-if-error", append(up, "--stale-if-error", "1ns"), nil, "--stale-if-error 1ns: want 1s to 168h0m0s, or 0 (off)"},
		{"negative stale-if-error", append(up, "--stale-if-error", "-1s"), nil, "--stale-if-error -1s"},
		{"1ns max-wait", append(up, "--queue", "4", "--max-wait", "1ns"), nil, "--max-wait 1ns: want 1ms to 10m0s, or 0 (the default)"},
		{"1ns slo", append(up, "--limit", "aimd", "--slo", "1ns"), nil, "--slo 1ns: want 1ms to 10m0s, or 0 (none)"},
		{"quota mode without quota", append(up, "--quota-mode", "lease"), nil, "--quota-mode without any --quota"},
		{"quota companions without quota", append(up, "--quota-redis-timeout", "1s", "--quota-fail", "closed"), nil, "--quota-fail, --quota-redis-timeout without any --quota"},
		{"quota twin without quota", up, map[string]string{"SLUICE_QUOTA_INSTANCES": "3"}, "--quota-instances without any --quota"},
		{"trusted proxies under both names", append(up, "--trusted-proxies", "10.0.0.0/8", "--quota-trusted-proxies", "10.1.0.0/16"), nil, "--trusted-proxies and --quota-trusted-proxies, its deprecated name, are both given"},
		{"bad trusted proxies", append(up, "--trusted-proxies", "10.0.0.0/99"), nil, `--trusted-proxies: "10.0.0.0/99" is not a CIDR`},
		{"duplicate routes key", append(up, "--config", writeRules(t, `{"routes":[{"name":"a"}],"routes":[{"name":"b"}]}`)), nil, `key "routes" given twice`},
		{"lower-case method", append(up, "--config", writeRules(t, `{"routes":[{"name":"reads","methods":["get"]}]}`)), nil, `route 0 ("reads"): method "get"`},
		{"duplicate path", append(up, "--config", writeRules(t, `{"routes":[{"name":"a","path":"/x"},{"name":"b","path":"/x"}]}`)), nil, `route 1 ("b"): never matches: route 0 ("a")`},
		{"upstreams in the file and the flag", append(up, "--config", writeRules(t, `{"upstreams":["http://127.0.0.1:9"],"routes":[]}`)), nil, "list the upstream instances in one place"},
		{"no upstream anywhere", []string{"--config", writeRules(t, `{"routes":[]}`)}, nil, "--upstream is required"},
		{"bad upstream in the file", []string{"--config", writeRules(t, `{"upstreams":["http://h:99999"],"routes":[]}`)}, nil, `upstreams[0] "http://h:99999": port "99999"`},
		{"NUL in a path", append(up, "--config", writeRules(t, `{"routes":[{"name":"a","path":"/x\u0000"}]}`)), nil, `route 0 ("a"): path "/x\x00": control character`},
	}
	// A context already ended: a case that is wrongly accepted fails to
	// listen and returns at once instead of serving until the test times
	// out.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runSubcommand(ended, runProxy, tt.envs, tt.args...)
			if code != exitUsage || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, exitUsage, tt.want)
			}
		})
	}
}

// TestProxyConfigWithByteOrderMark: a rules file saved with a UTF-8 byte
// order mark (as some editors write it) is read as if it had none.
func TestProxyConfigWithByteOrderMark(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer up.Close()
	rules := writeRules(t, "\ufeff"+`{"routes":[{"name":"search","path":"/search","max_inflight":3}]}`)
	px := startProxy(t, nil, "--upstream", up.URL, "--config", rules)
	if rec := logRecord(t, px.out, "proxying"); rec["routes"] != float64(1) {
		t.Fatalf("started with %v routes, want 1", rec["routes"])
	}
	px.stop(t)
}

// TestProxyServesAndAttributes runs `sluice proxy` in-process against a
// real upstream with a route file: answers pass, a route quota refuses
// with 429, the refusal appears in sluice_admission_rejected_total under
// the gate its body names, /state carries the proxy's routes, and
// shutdown is clean.
func TestProxyServesAndAttributes(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	defer up.Close()
	rules := writeRules(t, `{"routes":[
		{"name":"search","path":"/search","max_inflight":4,"quota":{"rate":0.001,"burst":1,"key":"header:X-Key"}}
	]}`)
	px := startProxy(t, map[string]string{"SLUICE_UPSTREAM": up.URL}, "--config", rules, "--max-inflight", "8")
	addr, admin := px.addr, px.admin
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func(u string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/"); code != 200 || body != "hello from upstream" {
		t.Fatalf("proxied: %d %q", code, body)
	}
	if code, _ := get("http://"+addr+"/search", "X-Key", "k"); code != 200 {
		t.Fatalf("first search: %d", code)
	}
	code, body := get("http://"+addr+"/search", "X-Key", "k")
	if code != 429 || !strings.Contains(body, `"gate":"search-quota"`) {
		t.Fatalf("second search: %d %s", code, body)
	}
	_, metrics := get("http://" + admin + "/metrics")
	if !strings.Contains(metrics, `sluice_admission_rejected_total{gate="search-quota",kind="default",reason="rate"} 1`) {
		t.Fatalf("the quota refusal is not in sluice_admission_rejected_total:\n%s", grepLines(metrics, "rejected_total"))
	}
	if !strings.Contains(metrics, `sluice_breaker_state{breaker="upstream-breaker",state="closed"} 1`) {
		t.Fatalf("no breaker metrics:\n%s", grepLines(metrics, "breaker"))
	}
	code, body = get("http://" + admin + "/state")
	var st struct {
		Gates []struct{ Gate string } `json:"gates"`
		Extra struct {
			Proxy struct {
				Routes []struct {
					Name  string
					Gate  *struct{ Capacity int64 }
					Quota *struct{ Limited uint64 }
				}
				Breaker *struct{ State string }
			} `json:"proxy"`
		} `json:"extra"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Fatalf("/state: %d %v %s", code, err, body)
	}
	pst := st.Extra.Proxy
	r := pst.Routes
	if len(st.Gates) != 2 || len(r) != 1 || r[0].Name != "search" || r[0].Gate == nil || r[0].Gate.Capacity != 4 || r[0].Quota == nil || pst.Breaker == nil || pst.Breaker.State != "closed" {
		t.Fatalf("/state: %s", body)
	}
	if code, _ := get("http://" + admin + "/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	tr.CloseIdleConnections()
	px.stop(t)
}

func grepLines(s, sub string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// FuzzParseUpstream: an accepted --upstream is an http(s) URL with a host
// that the proxy accepts; nothing panics.
func FuzzParseUpstream(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:9000", "https://api.example/base", "ftp://x", "http://", "http://u:p@h", "://", "http://h?q=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseUpstream(s)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Fatalf("accepted %q as %#v", s, u)
		}
		p, err := proxy.New(proxy.Config{Upstreams: []*url.URL{u}})
		if err != nil {
			t.Fatalf("accepted %q, but the proxy refuses it: %v", s, err)
		}
		for _, g := range p.Gates() {
			g.Close()
		}
	})
}

// TestProxyHostileClientsReleaseSlots: in `sluice proxy` the listener's
// --body-timeout and --send-timeout (not the proxy's own deadlines, which
// are off there) free the upstream slot of a client that never sends its
// declared body and of one that never reads its answer.
func TestProxyHostileClientsReleaseSlots(t *testing.T) {
	big := strings.Repeat("x", 16<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, big)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer up.Close()
	px := startProxy(t, nil, "--upstream", up.URL, "--body-timeout", "200ms", "--send-timeout", "200ms")
	addr, admin := px.addr, px.admin
	inflight := func() (admitted, inUse int64) {
		resp, err := http.Get("http://" + admin + "/state")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Extra struct {
				Proxy struct {
					Upstream struct {
						Admitted int64 `json:"admitted"`
						Inflight int64 `json:"inflight"`
					} `json:"upstream_gate"`
				} `json:"proxy"`
			} `json:"extra"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Extra.Proxy.Upstream.Admitted, st.Extra.Proxy.Upstream.Inflight
	}
	for i, req := range []string{
		"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789", // body never sent
		"GET /big HTTP/1.1\r\nHost: x\r\n\r\n",                                         // answer never read
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprint(c, req)
		deadline := time.Now().Add(10 * time.Second)
		for {
			admitted, inUse := inflight()
			if admitted == int64(i+1) && inUse == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("client %d: upstream gate admitted %d, in use %d after 10 s", i, admitted, inUse)
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	px.stop(t)
}

// TestProxyPriorityAndDisciplines runs `sluice proxy` with
// --priority-header on a queued upstream gate and routes with their own
// disciplines: under pressure the newest sheddable request is refused with
// reason shed (and counted under its gate) while the critical one is
// served first; /state shows each gate's discipline, classes and queue age.
func TestProxyPriorityAndDisciplines(t *testing.T) {
	entered, pass := make(chan string, 8), make(chan struct{}, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		select {
		case <-pass:
			fmt.Fprint(w, "ok")
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	rules := writeRules(t, `{"routes":[
		{"name":"recent","path":"/recent","max_inflight":2,"queue":4,"queue_discipline":"lifo"},
		{"name":"steady","path":"/steady","max_inflight":2,"queue":4,"queue_discipline":"codel","priority_header":"X-Tier","class_shares":["sheddable=0.5"]}
	]}`)
	px := startProxy(t, map[string]string{"SLUICE_PRIORITY_HEADER": "X-Priority"}, "--upstream", up.URL,
		"--config", rules, "--max-inflight", "1", "--queue", "2", "--max-wait", "10s", "--class-share", "critical_plus=0.1")
	addr, admin := px.addr, px.admin
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	type answer struct {
		code int
		body string
	}
	send := func(path, class string) <-chan answer {
		ch := make(chan answer, 1)
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if class != "" {
			req.Header.Set("X-Priority", class)
		}
		go func() {
			resp, err := c.Do(req)
			if err != nil {
				ch <- answer{code: -1, body: err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			ch <- answer{resp.StatusCode, string(b)}
		}()
		return ch
	}
	type gateState struct {
		Discipline      string  `json:"discipline"`
		Waiting         int64   `json:"waiting"`
		QueueAgeSeconds float64 `json:"queue_age_seconds"`
		PriorityHeader  string  `json:"priority_header"`
		Classes         []struct {
			Class string
			Share float64
			Shed  uint64
		} `json:"classes"`
	}
	var st struct {
		Extra struct {
			Proxy struct {
				Upstream gateState `json:"upstream_gate"`
				Routes   []struct {
					Name string
					Gate *gateState
				}
			} `json:"proxy"`
		} `json:"extra"`
	}
	readState := func() {
		t.Helper()
		resp, err := c.Get("http://" + admin + "/state")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		st.Extra.Proxy.Upstream = gateState{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
	}
	waitQueued := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for readState(); st.Extra.Proxy.Upstream.Waiting != n; readState() {
			if time.Now().After(deadline) {
				t.Fatalf("upstream gate: %d waiting, want %d", st.Extra.Proxy.Upstream.Waiting, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	c0 := send("/c0", "")
	if p := <-entered; p != "/c0" {
		t.Fatalf("first request reached the upstream as %q", p)
	}
	s1 := send("/s1", "sheddable")
	waitQueued(1)
	s2 := send("/s2", "sheddable")
	waitQueued(2)
	c3 := send("/c3", "critical")
	if a := <-s2; a.code != 503 || !strings.Contains(a.body, `"gate":"upstream","reason":"shed"`) {
		t.Fatalf("the newest sheddable request under pressure: %d %s; want 503 from the upstream gate, reason shed", a.code, a.body)
	}
	waitQueued(2)
	u := st.Extra.Proxy.Upstream
	if u.Discipline != "fifo" || u.PriorityHeader != "X-Priority" || u.QueueAgeSeconds <= 0 || len(u.Classes) != 4 ||
		u.Classes[0].Share != 0.1 || u.Classes[3].Class != "sheddable" || u.Classes[3].Shed != 1 {
		t.Fatalf("upstream gate in /state: %+v", u)
	}
	routes := st.Extra.Proxy.Routes
	if len(routes) != 2 || routes[0].Gate.Discipline != "lifo" || routes[0].Gate.Classes != nil ||
		routes[1].Gate.Discipline != "codel" || routes[1].Gate.PriorityHeader != "X-Tier" || routes[1].Gate.Classes[3].Share != 0.5 {
		t.Fatalf("routes in /state: %+v", routes)
	}
	pass <- struct{}{}
	if p := <-entered; p != "/c3" {
		t.Fatalf("after /c0, %q reached the upstream; want the critical /c3 before the older sheddable /s1", p)
	}
	pass <- struct{}{}
	<-entered
	pass <- struct{}{}
	for name, ch := range map[string]<-chan answer{"c0": c0, "s1": s1, "c3": c3} {
		if a := <-ch; a.code != 200 {
			t.Errorf("%s: %d %s; want 200", name, a.code, a.body)
		}
	}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `sluice_admission_rejected_total{gate="upstream",kind="default",reason="shed"} 1`) {
		t.Fatalf("the shed request is not counted:\n%s", grepLines(string(metrics), "rejected_total"))
	}
	tr.CloseIdleConnections()
	px.stop(t)
}

// TestProxyRefusalsAttributedByLoad runs `sluice load --metrics` against a
// `sluice proxy` whose global --quota and route quota refuse: every
// refusal in the report is attributed, to the quota its answer names.
// About 2 s: a real sluice load run against a real sluice proxy.
func TestProxyRefusalsAttributedByLoad(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer up.Close()
	rules := writeRules(t, `{"routes":[{"name":"search","path":"/search","quota":{"rate":1,"burst":1}}]}`)
	px := startProxy(t, nil, "--upstream", up.URL,
		"--config", rules, "--quota", "name=global,rate=20/s,burst=20,key=ip")
	addr, admin := px.addr, px.admin
	w, byGate, stdout := loadAttributed(t, addr, admin, "/", "/search")
	if byGate["global/rate"] == 0 || byGate["search-quota/rate"] == 0 {
		t.Fatalf("server rejections %v: want refusals by both quotas\n%s", byGate, stdout)
	}
	for _, rf := range w.Counts.Refusals {
		if rf.Status != http.StatusTooManyRequests || (rf.Gate != "global" && rf.Gate != "search-quota") || rf.Reason != "rate" {
			t.Errorf("refusal %+v: want 429s from the quotas only", rf)
		}
	}
	px.stop(t)
}

// TestProxyFleetQuotas runs two `sluice proxy` instances on one real
// redis-server with --quota-redis: a route quota from the config file and
// the global --quota are both shared by the two, so what one proxy spent
// the other refuses.
func TestProxyFleetQuotas(t *testing.T) {
	redisSrv := redistest.Start(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer up.Close()
	rules := writeRules(t, `{"routes":[{"name":"search","path":"/search","quota":{"rate":0.001,"burst":1,"key":"header:X-Key"}}]}`)
	var pxs []*runningProxy
	for range 2 {
		pxs = append(pxs, startProxy(t, map[string]string{"SLUICE_QUOTA_REDIS": redisSrv.URL()}, "--upstream", up.URL,
			"--config", rules, "--quota", "name=global,rate=1/h,burst=4,key=ip", "--quota-instances", "2", "--quota-redis-timeout", "500ms"))
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for i, step := range []struct {
		proxy    int
		path     string
		wantCode int
		wantGate string
	}{
		{0, "/search", 200, ""},
		{1, "/search", 429, "search-quota"}, // the route's fleet bucket of 1 was spent at proxy 0
		{0, "/", 200, ""},
		{1, "/", 200, ""}, // the global fleet bucket of 4 is now spent
		{0, "/", 429, "global"},
		{1, "/", 429, "global"},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+pxs[step.proxy].addr+step.path, nil)
		req.Header.Set("X-Key", "alice")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != step.wantCode || (step.wantGate != "" && !strings.Contains(string(body), `"gate":"`+step.wantGate+`"`)) {
			t.Fatalf("step %d: %s at proxy %d: %d %s; want %d from %q", i, step.path, step.proxy, resp.StatusCode, body, step.wantCode, step.wantGate)
		}
	}
	resp, err := c.Get("http://" + pxs[1].admin + "/state")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Extra map[string]json.RawMessage `json:"extra"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var pst struct {
		Routes []struct {
			QuotaScope string          `json:"quota_scope"`
			Fleet      json.RawMessage `json:"fleet"`
		}
	}
	if err := json.Unmarshal(st.Extra["proxy"], &pst); err != nil || len(pst.Routes) != 1 || pst.Routes[0].QuotaScope != "fleet" || len(pst.Routes[0].Fleet) == 0 {
		t.Fatalf("route quota in /state: %v %s", err, st.Extra["proxy"])
	}
	if !strings.Contains(string(st.Extra["quota.global"]), `"fleet"`) {
		t.Fatalf("global quota in /state: %s", st.Extra["quota.global"])
	}
	tr.CloseIdleConnections()
	for _, px := range pxs {
		px.stop(t)
	}
}

// TestProxyBreakerRefusalsAttributedByLoad: against a dead upstream the
// breaker (and the retry policy's throttling) refuse; `sluice load
// --metrics` attributes those refusals too.
// About 2 s: a real sluice load run against a real sluice proxy.
func TestProxyBreakerRefusalsAttributedByLoad(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connections refused from now on
	px := startProxy(t, nil, "--upstream", deadURL,
		"--eject-after", "0")
	_, byGate, stdout := loadAttributed(t, px.addr, px.admin, "/")
	// Which of the two refuses first depends on timing; both are counted
	// by the proxy outside its gates.
	if byGate["upstream-breaker/breaker_open"]+byGate["upstream-retry/shed"] == 0 {
		t.Fatalf("server rejections %v: want refusals by the breaker or the retry policy\n%s", byGate, stdout)
	}
	px.stop(t)
}

// TestProxyGateRefusalsAttributedByLoad: the route's gate and the upstream
// gate refuse under a slow upstream; `sluice load --metrics` attributes
// every refusal to the gate that made it.
// About 2 s: a real sluice load run against a real sluice proxy.
func TestProxyGateRefusalsAttributedByLoad(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	rules := writeRules(t, `{"routes":[{"name":"slow","path":"/slow","max_inflight":1}]}`)
	px := startProxy(t, nil, "--upstream", up.URL, "--config", rules, "--max-inflight", "2")
	_, byGate, stdout := loadAttributed(t, px.addr, px.admin, "/", "/slow")
	if byGate["slow/full"] == 0 || byGate["upstream/full"] == 0 {
		t.Fatalf("server rejections %v: want refusals by the route's gate and the upstream gate\n%s", byGate, stdout)
	}
	px.stop(t)
}

// loadAttributed runs `sluice load --metrics` for a second at 200
// requests/s over paths of the proxy at addr, requires refusals, every
// one of them attributed, and returns the window, the server's rejections
// by "gate/reason" and the printed report.
func loadAttributed(t *testing.T, addr, admin string, paths ...string) (load.Window, map[string]float64, string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	args := []string{"load", "--rate", "200", "--duration", "1s", "--metrics", "http://" + admin + "/metrics",
		"--max-lag", "1s", "--live", "off", "--out", report}
	for _, p := range paths {
		args = append(args, "--url", "http://"+addr+p)
	}
	code, stdout, stderr := runCmd(context.Background(), nil, args...)
	if code == exitUsage {
		t.Fatalf("load: exit %d\n%s\n%s", code, stdout, stderr)
	}
	r, err := load.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Steps[0].Windows[0]
	m := w.Metrics
	if m == nil || m.Error != "" {
		t.Fatalf("no metrics in the report: %+v", m)
	}
	byGate := map[string]float64{}
	for _, rj := range m.Rejections {
		byGate[rj.Gate+"/"+rj.Reason] += rj.Delta
	}
	if w.Counts.Refused == 0 || m.Unattributed != 0 || m.Attributed != w.Counts.Refused {
		t.Fatalf("refused %d, attributed %d, unattributed %d (rejections %v): want refusals, every one attributed\n%s",
			w.Counts.Refused, m.Attributed, m.Unattributed, byGate, stdout)
	}
	return w, byGate, stdout
}

// runningProxy is `sluice proxy` run in-process by startProxy.
type runningProxy struct {
	addr, admin string // the proxy's and the admin listener's host:port
	out         *lockedBuffer
	done        chan int
	cancel      context.CancelFunc
}

// startProxy runs `sluice proxy` in-process with args (and the
// environment envs) on free loopback ports, JSON logs and a quick
// shutdown, and returns once it listens.
func startProxy(t *testing.T, envs map[string]string, args ...string) *runningProxy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	px := &runningProxy{out: &lockedBuffer{}, done: make(chan int, 1), cancel: cancel}
	args = append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json",
		"--shutdown-timeout", "2s", "--drain-delay", "0s"}, args...)
	go func() {
		e := env{stdout: px.out, stderr: px.out, getenv: func(k string) string { return envs[k] }}
		px.done <- runProxyOnEngine(ctx, e, args)
	}()
	rec := logRecord(t, px.out, "proxying")
	px.addr, px.admin = fmt.Sprint(rec["addr"]), fmt.Sprint(rec["admin_addr"])
	return px
}

// stop shuts the proxy down and requires a clean exit.
func (px *runningProxy) stop(t *testing.T) {
	t.Helper()
	px.cancel()
	if code := <-px.done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, px.out.String())
	}
}

// writeRules writes a config file of route rules and returns its path.
func writeRules(t *testing.T, rules string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "routes.json")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
