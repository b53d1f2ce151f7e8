package proxy

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota/redisquota"
)

func TestParseRules(t *testing.T) {
	routes, err := ParseRules(strings.NewReader(`{"routes":[
		{"name":"search","path":"/search","host":"api.example","methods":["GET","HEAD"],
		 "max_inflight":8,"queue":16,"max_wait":"250ms","limit":"vegas","limit_min":2,"slo":"200ms",
		 "cost":2,"quota":{"rate":10,"burst":20,"key":"header:X-Api-Key"},
		 "queue_discipline":"codel","priority_header":"X-Priority","class_shares":["sheddable=0.1","critical=50%"]},
		{"name":"rest"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := routes[0]
	if r.Name != "search" || r.MaxInflight != 8 || time.Duration(r.MaxWait) != 250*time.Millisecond || r.Law != "vegas" ||
		time.Duration(r.SLO) != 200*time.Millisecond || r.Cost != 2 || r.Quota.Burst != 20 || len(r.Methods) != 2 ||
		r.Discipline != "codel" || r.PriorityHeader != "X-Priority" || len(r.ClassShares) != 2 {
		t.Fatalf("parsed %+v", r)
	}
	if len(routes) != 2 || routes[1].Name != "rest" {
		t.Fatalf("routes %+v", routes)
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"routes":[{"name":""}]}`, "name"},
		{`{"routes":[{"name":"a b"}]}`, "name"},
		{`{"routes":[{"name":"a"},{"name":"a"}]}`, "used twice"},
		{`{"routes":[{"name":"upstream"}]}`, "reserved"},
		{`{"routes":[{"name":"a","path":"nope"}]}`, "path"},
		{`{"routes":[{"name":"a","host":"a/b"}]}`, "host"},
		{`{"routes":[{"name":"a","methods":["G ET"]}]}`, "method"},
		{`{"routes":[{"name":"a","queue":3}]}`, "need max_inflight"},
		{`{"routes":[{"name":"a","max_inflight":2,"max_wait":"1s"}]}`, "max_wait needs queue"},
		{`{"routes":[{"name":"a","max_inflight":2,"limit":"magic"}]}`, "limit"},
		{`{"routes":[{"name":"a","max_inflight":2,"limit":"aimd","limit_max":3}]}`, "limit_max 3"},
		{`{"routes":[{"name":"a","max_inflight":2,"slo":"1s"}]}`, "adaptive"},
		{`{"routes":[{"name":"a","max_wait":"soon"}]}`, "duration"},
		{`{"routes":[{"name":"a","cost":5,"quota":{"rate":1,"burst":2}}]}`, "exceeds quota burst"},
		{`{"routes":[{"name":"a","quota":{"rate":0}}]}`, "rate"},
		{`{"routes":[{"name":"a","quota":{"rate":1,"key":"cookie:x"}}]}`, "key"},
		{`{"routes":[{"name":"a","colour":"red"}]}`, "unknown field"},
		{`{"routes":[{"name":"a","queue_discipline":"lifo"}]}`, "need max_inflight"},
		{`{"routes":[{"name":"a","max_inflight":2,"queue_discipline":"lifo"}]}`, "queue_discipline lifo needs queue"},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"queue_discipline":"stack"}]}`, `queue_discipline "stack"`},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"priority_header":"X P"}]}`, `priority_header "X P"`},
		{`{"routes":[{"name":"a","max_inflight":2,"priority_header":"X-P"}]}`, "priority_header needs queue"},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"class_shares":["sheddable=0.1"]}]}`, "class_shares needs priority_header"},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"priority_header":"P","class_shares":["bulk=0.1"]}]}`, `unknown class "bulk"`},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"priority_header":"P","class_shares":["sheddable=0.6","critical=0.6"]}]}`, "more than 1"},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"priority_header":"P","class_shares":"sheddable=0.1"}]}`, `route 0 ("a"): class_shares: want a list [...] of strings, got a string`},
		{`{"routes":[{"name":"a"},{"name":"b","max_inflight":"8"}]}`, `route 1 ("b"): max_inflight: want a whole number, got a string`},
		{`{"routes":[{"name":"a","quota":{"rate":true}}]}`, `route 0 ("a"): quota: rate true: want tokens per second, a number (5) or a rate such as "100/s"`},
		{`{"routes":[{"name":"a","quota":{"rate":"5"}}]}`, `route 0 ("a"): quota: rate "5": want N/s`},
		{`{"routes":[{"name":"a","quota":{"rate":"5/s","burst":"x"}}]}`, `route 0 ("a"): quota: burst: want a whole number, got a string`},
		{`{"routes":[{"name":"a","quota":{"rate":"5/s","colour":"red"}}]}`, `route 0 ("a"): quota: unknown field "colour"`},
		{`{"routes":[]} {}`, "trailing"},
		{`{"routes":[{"name":"a"}],"routes":[{"name":"b"}]}`, `key "routes" given twice`},
		{`{"routes":[{"name":"a","path":"/x","path":"/y"}]}`, `route 0 ("a"): routes[0]: key "path" given twice`},
		{`{"routes":[{"name":"a"},{"name":"b","quota":{"rate":1,"rate":2}}]}`, `route 1 ("b"): routes[1].quota: key "rate" given twice`},
		{`{"routes":[{"name":"a","methods":["GET","get"]}]}`, `route 0 ("a"): method "get": methods are case-sensitive`},
		{`{"routes":[{"name":"a","methods":["Post"]}]}`, `write "POST"`},
		{`{"routes":[{"name":"a","path":"/x"},{"name":"b","path":"/x"}]}`, `route 1 ("b"): never matches: route 0 ("a")`},
		{`{"routes":[{"name":"a","path":"/"},{"name":"b","host":"h.example","path":"/x"}]}`, `route 1 ("b"): never matches`},
		{`{"routes":[{"name":"a","methods":["GET","POST"]},{"name":"b","path":"/x","methods":["GET"]}]}`, `route 1 ("b"): never matches`},
		{`{"routes":[{"name":"a","path":"/x\u0000y"}]}`, `route 0 ("a"): path "/x\x00y": control character 0x00`},
		{`{"routes":[{"name":"a","path":"/x\ny"}]}`, "control character 0x0a"},
		{`{"routes":[{"name":"a","max_inflight":2,"queue":2,"max_wait":"1ns"}]}`, `route 0 ("a"): max_wait 1ns: want 1ms to 10m0s`},
		{`{"routes":[{"name":"a","max_inflight":2,"limit":"aimd","slo":"2562047h"}]}`, "slo 2562047h0m0s: want 1ms to 10m0s"},
		{"\xef\xbb\xbf\xef\xbb\xbf{}", "invalid character"},
		{`[`, "unexpected EOF"},
	} {
		_, err := ParseRules(strings.NewReader(tc.in))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want ErrInvalidConfig mentioning %q", tc.in, err, tc.want)
		}
	}
}

// TestParseRulesAccepts: what is not a mistake passes: a leading UTF-8
// byte order mark, the same path for other methods or another host, and a
// catch-all after the specific routes.
func TestParseRulesAccepts(t *testing.T) {
	for _, in := range []string{
		"\xef\xbb\xbf" + `{"routes":[{"name":"a"}]}`,
		`{"routes":[{"name":"a","path":"/x","methods":["GET"]},{"name":"b","path":"/x","methods":["POST"]},{"name":"c","path":"/x"}]}`,
		`{"routes":[{"name":"a","host":"a.example","path":"/x"},{"name":"b","host":"b.example","path":"/x"},{"name":"c","path":"/x/y"},{"name":"d"}]}`,
		`{"routes":[{"name":"a","methods":["GET"]},{"name":"b","methods":["GET","PUT"]}]}`,
		`{"routes":[{"name":"a","path":"/caf\u00e9","max_inflight":1,"queue":1,"max_wait":"1ms"}]}`,
	} {
		if _, err := ParseRules(strings.NewReader(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestParseFileUpstreams: a config file may name the upstream instances,
// checked as New checks them.
func TestParseFileUpstreams(t *testing.T) {
	f, err := ParseFile(strings.NewReader(`{"upstreams":["http://10.0.0.5:9000/api","http://10.0.0.6:9000/api"],"routes":[{"name":"a"}]}`))
	if err != nil || len(f.Upstreams) != 2 || f.Upstreams[1].Host != "10.0.0.6:9000" || len(f.Routes) != 1 {
		t.Fatalf("ParseFile: %+v, %v", f, err)
	}
	if f, err := ParseFile(strings.NewReader(`{"routes":[]}`)); err != nil || f.Upstreams != nil {
		t.Fatalf("a file without upstreams: %+v, %v", f, err)
	}
	for in, want := range map[string]string{
		`{"upstreams":["http://a:1/x","http://b:1/y"],"routes":[]}`: "same path",
		`{"upstreams":["http://a:0"],"routes":[]}`:                  `upstreams[0] "http://a:0": port`,
		`{"upstreams":["::"],"routes":[]}`:                          `upstreams[0] "::"`,
		`{"upstreams":"http://a:1","routes":[]}`:                    "upstreams: want a list [...] of strings, got a string",
	} {
		if _, err := ParseFile(strings.NewReader(in)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalidConfig mentioning %q", in, err, want)
		}
	}
}

func TestCheckUpstream(t *testing.T) {
	for in, ok := range map[string]bool{
		"http://127.0.0.1:9000": true, "https://api.example/base": true, "http://[::1]:80": true, "http://h": true,
		"http://h:99999": false, "http://h:0": false, "http://h:": false, "http://:80": false, "http://h:-1": false,
		"http://u:p@h:1": false, "http://h:1/?q": false, "http://h:1/#f": false, "ftp://h:1": false, "http:h": false,
	} {
		u, err := url.Parse(in)
		if err != nil {
			if ok {
				t.Errorf("%s: %v", in, err)
			}
			continue
		}
		if err := CheckUpstream(u); (err == nil) != ok {
			t.Errorf("CheckUpstream(%s) = %v; want ok=%v", in, err, ok)
		}
	}
}

// FuzzParseRules: any input either fails with ErrInvalidConfig or gives
// routes that New accepts; it never panics.
func FuzzParseRules(f *testing.F) {
	f.Add(`{"routes":[{"name":"a","path":"/a","max_inflight":3,"limit":"aimd","slo":"1s","cost":2,"quota":{"rate":5,"key":"ip"}}]}`)
	f.Add(`{"routes":[{"name":"b","host":"x.example","methods":["GET"],"queue":2,"max_inflight":1,"max_wait":"10ms"}]}`)
	f.Add(`{"routes":[{"name":"c","quota":{"rate":1e-9,"burst":0}}]}`)
	f.Add(`{}`)
	f.Add(`{"routes":[{"name":"d","max_inflight":2,"queue":4,"queue_discipline":"lifo","priority_header":"X-Priority","class_shares":["sheddable=0.25","critical_plus=10%"]}]}`)
	f.Add(`{"routes":[{"name":"e","max_inflight":1,"queue":1,"queue_discipline":"codel","priority_header":"P","class_shares":["critical=1"]}]}`)
	f.Add(`{"routes":[{"name":"f","max_inflight":1,"queue":1,"priority_header":"P","class_shares":["sheddable=0.5,critical=0.5"]}]}`)
	f.Add(`{"routes":[{"name":"g","quota":{"rate":5,"scope":"local"}}]}`)
	f.Add(`{"routes":[{"name":"h","path":"/h","quota":{"rate":0.5,"burst":3,"key":"header:K","scope":"fleet"}},{"name":"i","quota":{"rate":2}}]}`)
	f.Add(`{"routes":[{"name":"a"}],"routes":[{"name":"b"}]}`)
	f.Add("\xef\xbb\xbf" + `{"routes":[{"name":"j","path":"/j","methods":["GET"]},{"name":"k","path":"/j"}]}`)
	f.Add(`{"routes":[{"name":"l","path":"/l\u0000","methods":["get"]}]}`)
	up, _ := url.Parse("http://127.0.0.1:9")
	// A fleet store that is never called: New builds fleet quotas
	// without talking to Redis.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:9"})
	f.Cleanup(func() { _ = client.Close() })
	f.Add(`{"upstreams":["http://127.0.0.1:9/a","https://[::1]:443/a"],"routes":[{"name":"m","path":"/m"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		file, err := ParseFile(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		routes, ups := file.Routes, file.Upstreams
		if len(ups) == 0 {
			ups = []*url.URL{up}
		}
		p, err := New(Config{Upstreams: ups, Routes: routes, MaxInflight: admit.MaxCapacity,
			FleetQuotas: &redisquota.Config{Client: client}})
		if err != nil {
			t.Fatalf("accepted rules rejected by New: %v", err)
		}
		for i, rt := range routes {
			if err := checkPathPrefix(rt.PathPrefix); err != nil || shadowedBy(routes, i) >= 0 {
				t.Fatalf("accepted route %d (%+v): path %v, shadowed by %d", i, rt, err, shadowedBy(routes, i))
			}
			for _, m := range rt.Methods {
				if m != strings.ToUpper(m) {
					t.Fatalf("accepted method %q", m)
				}
			}
		}
		if duplicateKey([]byte(strings.TrimPrefix(in, "\xef\xbb\xbf"))) != nil {
			t.Fatalf("accepted a document with a duplicate key: %q", in)
		}
		for _, g := range p.Gates() {
			g.Close()
		}
	})
}

// TestRouteQuotaRateAsWritten: a route quota's rate is a number of
// tokens per second, or a rate as --quota writes it; both mean the same.
func TestRouteQuotaRateAsWritten(t *testing.T) {
	for in, want := range map[string]float64{
		`5`: 5, `0.5`: 0.5, `"5/s"`: 5, `"600/m"`: 10, `"3/10s"`: 0.3, `"36/h"`: 0.01,
	} {
		routes, err := ParseRules(strings.NewReader(`{"routes":[{"name":"a","quota":{"rate":` + in + `,"burst":2,"key":"ip"}}]}`))
		if err != nil || len(routes) != 1 || routes[0].Quota == nil || routes[0].Quota.Rate != want ||
			routes[0].Quota.Burst != 2 || routes[0].Quota.Key != "ip" {
			t.Errorf("rate %s: %+v, %v; want rate %v, burst 2, key ip", in, routes, err, want)
		}
	}
}
