package ratelimit

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const serviceYAML = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 2, burst: 2}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: free
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: category
    value: account
    rate_limit:
      unit: minute
      requests_per_unit: 10
      algorithm: fixed_window
      replaces: [{name: per-route}]
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 1, name: per-route, algorithm: fixed_window}
`

// A minute-aligned start, 10 s into the window.
var t0 = time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC)

func TestFixedWindowCountsLikeTheReference(t *testing.T) {
	clk := newClock(t0)
	s := mustService(t, Config{Now: clk.Now}, serviceYAML)
	var got []string
	for range 5 {
		got = append(got, statuses(call(t, s, req("api", desc("user", "alice"))))...)
	}
	want := []string{"OK:2", "OK:1", "OK:0", "OVER_LIMIT:0", "OVER_LIMIT:0"}
	if !slices.Equal(got, want) {
		t.Errorf("user alice: %v, want %v", got, want)
	}
	// Another value of the key-only descriptor has its own counter.
	if c := statuses(call(t, s, req("api", desc("user", "bob")))); c[0] != "OK:2" {
		t.Errorf("user bob: %v", c)
	}
	resp := call(t, s, req("api", desc("user", "alice")))
	st := resp.Statuses[0]
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || st.CurrentLimit.RequestsPerUnit != 3 ||
		st.CurrentLimit.Unit != pb.RateLimitResponse_RateLimit_MINUTE || st.DurationUntilReset.AsDuration() != 50*time.Second {
		t.Errorf("over-limit status: overall %v, %v", resp.OverallCode, st)
	}
	if h := header(resp, "Retry-After"); h != "50" {
		t.Errorf("Retry-After %q, want 50 (the window's end)", h)
	}
	clk.Add(50 * time.Second) // the next window
	if c := statuses(call(t, s, req("api", desc("user", "alice")))); c[0] != "OK:2" {
		t.Errorf("next window: %v", c)
	}
}

func TestHitsAddend(t *testing.T) {
	clk := newClock(t0)
	s := mustService(t, Config{Now: clk.Now}, serviceYAML)
	r := req("api", desc("user", "h"))
	r.HitsAddend = 2
	if c := statuses(call(t, s, r)); c[0] != "OK:1" {
		t.Errorf("request hits_addend 2: %v", c)
	}
	// A descriptor's own hits_addend wins, zero included: a check that
	// counts nothing.
	r.Descriptors = []*rlv3.RateLimitDescriptor{withHits(desc("user", "h"), 0)}
	if c := statuses(call(t, s, r)); c[0] != "OK:1" {
		t.Errorf("check with hits 0: %v", c)
	}
	r.Descriptors = []*rlv3.RateLimitDescriptor{withHits(desc("user", "h"), 5)}
	if c := statuses(call(t, s, r)); c[0] != "OVER_LIMIT:0" {
		t.Errorf("hits 5 over a limit of 3: %v", c)
	}
	// The reference counts hits over the limit too: a check now says over.
	r.Descriptors = []*rlv3.RateLimitDescriptor{withHits(desc("user", "h"), 0)}
	if c := statuses(call(t, s, r)); c[0] != "OVER_LIMIT:0" {
		t.Errorf("check after going over: %v", c)
	}
}

func TestGCRAHasNoWindowEdgeDoubleBurst(t *testing.T) {
	const rules = `
domain: d
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 10}
`
	// One second before a minute's edge.
	clk := newClock(time.Date(2030, 1, 1, 12, 0, 59, 0, time.UTC))
	s := mustService(t, Config{Now: clk.Now}, rules)
	admitted := func(key string) int {
		n := 0
		for range 30 {
			if call(t, s, req("d", desc(key, "x"))).OverallCode == pb.RateLimitResponse_OK {
				n++
			}
		}
		return n
	}
	// 30 hits in the last second of a window and 30 more in the first
	// second of the next: 2 s in all.
	fixedA := admitted("fixed")
	clk.Add(2 * time.Second)
	fixedB := admitted("fixed")
	if fixedA+fixedB != 20 {
		t.Errorf("fixed window across the edge admitted %d+%d, want 10+10: the double burst", fixedA, fixedB)
	}
	// GCRA runs on the real clock here (quota.Quota reads time.Now): a
	// full bucket of 10, then 10 per minute, so within two seconds at
	// most 10 plus what two seconds refill.
	g := 0
	for range 60 {
		if call(t, s, req("d", desc("gcra", "x"))).OverallCode == pb.RateLimitResponse_OK {
			g++
		}
	}
	if g < 10 || g > 11 {
		t.Errorf("gcra admitted %d of 60 at once, want the burst of 10 (11 with a refill)", g)
	}
}

func TestShadowQuotaUnlimitedZeroAndReplaces(t *testing.T) {
	clk := newClock(t0)
	s := mustService(t, Config{Now: clk.Now}, serviceYAML)
	call(t, s, req("api", desc("shadowed", "x")))
	resp := call(t, s, req("api", desc("shadowed", "x")))
	if resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].Code != pb.RateLimitResponse_OK {
		t.Errorf("shadow mode must answer OK: %v", resp)
	}
	call(t, s, req("api", desc("quota", "x")))
	resp = call(t, s, req("api", desc("quota", "x")))
	if resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit == nil {
		t.Errorf("quota mode must answer OK with the limit: %v", resp)
	}
	resp = call(t, s, req("api", desc("free", "x")))
	if st := resp.Statuses[0]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Errorf("unlimited: %v", st)
	}
	if resp := call(t, s, req("api", desc("zero", "x"))); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("zero requests per unit must be over: %v", resp)
	}
	// route alone: a limit of 1.
	call(t, s, req("api", desc("route", "r")))
	if resp := call(t, s, req("api", desc("route", "r"))); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("route over its own limit: %v", resp)
	}
	// With category=account, which replaces per-route, route is not counted.
	resp = call(t, s, req("api", desc("category", "account"), desc("route", "r")))
	if resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[1].CurrentLimit != nil {
		t.Errorf("replaced limit still applied: %v", resp)
	}
	// Global shadow mode: counted, never enforced.
	sh := mustService(t, Config{Now: clk.Now, ShadowMode: true}, serviceYAML)
	call(t, sh, req("api", desc("route", "r")))
	resp = call(t, sh, req("api", desc("route", "r")))
	if resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].Code != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("global shadow: overall %v, status %v", resp.OverallCode, resp.Statuses[0].Code)
	}
}

func TestOverallCodeAndHeaders(t *testing.T) {
	clk := newClock(t0)
	s := mustService(t, Config{Now: clk.Now}, serviceYAML)
	resp := call(t, s, req("api", desc("user", "u"), desc("nomatch", "x"), desc("tenant", "t")))
	if got := statuses(resp); !slices.Equal(got, []string{"OK:2", "OK:0", "OK:1"}) {
		t.Errorf("statuses %v", got)
	}
	if resp.Statuses[1].CurrentLimit != nil {
		t.Error("an unmatched descriptor reported a limit")
	}
	if p := header(resp, "RateLimit-Policy"); p != `"api.user";q=3;w=60, "api.tenant";q=2;w=1` {
		t.Errorf("RateLimit-Policy %q", p)
	}
	if r := header(resp, "RateLimit"); !strings.HasPrefix(r, `"api.user";r=2;t=50, "api.tenant";r=1;t=`) {
		t.Errorf("RateLimit %q", r)
	}
	if header(resp, "Retry-After") != "" {
		t.Error("Retry-After on an OK response")
	}
	call(t, s, req("api", desc("user", "u")))
	call(t, s, req("api", desc("user", "u")))
	resp = call(t, s, req("api", desc("user", "u"), desc("tenant", "t2")))
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || resp.Statuses[1].Code != pb.RateLimitResponse_OK {
		t.Errorf("one descriptor over must make the overall code over: %v", statuses(resp))
	}
	quiet := mustService(t, Config{Now: clk.Now, NoHeaders: true}, serviceYAML)
	if resp := call(t, quiet, req("api", desc("user", "u"))); len(resp.ResponseHeadersToAdd) != 0 {
		t.Errorf("NoHeaders: %v", resp.ResponseHeadersToAdd)
	}
}

func TestRequestsTheReferenceRefusesOrIgnores(t *testing.T) {
	s := mustService(t, Config{}, serviceYAML)
	for _, r := range []*pb.RateLimitRequest{
		req(""),
		req("api"),
		{Domain: "api", Descriptors: make([]*rlv3.RateLimitDescriptor, MaxDescriptors+1)},
	} {
		if _, err := s.ShouldRateLimit(context.Background(), r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", r, err)
		}
	}
	resp := call(t, s, req("elsewhere", desc("user", "u")))
	if resp.OverallCode != pb.RateLimitResponse_OK || len(resp.Statuses) != 1 {
		t.Errorf("unknown domain: %v", resp)
	}
	st := s.State()
	if st.UnknownDomain != 1 || st.Invalid != 3 {
		t.Errorf("state counts unknown %d, invalid %d", st.UnknownDomain, st.Invalid)
	}
}

func TestRequestCarriesItsOwnLimit(t *testing.T) {
	clk := newClock(t0)
	s := mustService(t, Config{Now: clk.Now, Algorithm: FixedWindow}, serviceYAML)
	d := desc("anything", "x")
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	if c := statuses(call(t, s, req("api", d))); c[0] != "OK:0" {
		t.Errorf("override first hit: %v", c)
	}
	if c := statuses(call(t, s, req("api", d))); c[0] != "OVER_LIMIT:0" {
		t.Errorf("override second hit: %v", c)
	}
	d.Limit.Unit = typev3.RateLimitUnit_UNKNOWN
	if _, err := s.ShouldRateLimit(context.Background(), req("api", d)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("override with unknown unit: %v", err)
	}
}

func TestReloadKeepsCountersOfUnchangedRules(t *testing.T) {
	clk := newClock(t0)
	s := mustService(t, Config{Now: clk.Now}, serviceYAML)
	call(t, s, req("api", desc("user", "u")))
	call(t, s, req("api", desc("user", "u")))
	if err := s.SetTable(mustParse(t, serviceYAML+"  - key: added\n    rate_limit: {unit: second, requests_per_unit: 1}\n")); err != nil {
		t.Fatal(err)
	}
	if c := statuses(call(t, s, req("api", desc("user", "u")))); c[0] != "OK:0" {
		t.Errorf("after a reload the count started again: %v", c)
	}
	// A changed limit is a new rule: new counters.
	changed := strings.Replace(serviceYAML, "requests_per_unit: 3", "requests_per_unit: 5", 1)
	if err := s.SetTable(mustParse(t, changed)); err != nil {
		t.Fatal(err)
	}
	if c := statuses(call(t, s, req("api", desc("user", "u")))); c[0] != "OK:4" {
		t.Errorf("changed rule: %v", c)
	}
	if st := s.State(); st.Reloads.OK != 3 {
		t.Errorf("reloads %+v", st.Reloads)
	}
}
