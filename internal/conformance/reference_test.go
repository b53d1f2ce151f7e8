package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// referenceBin is the reference server, built once by TestMain.
var referenceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rls-reference-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	referenceBin = filepath.Join(dir, "ratelimit")
	start := time.Now()
	build := exec.Command("go", "build", "-o", referenceBin, "github.com/envoyproxy/ratelimit/src/service_cmd")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the reference rate limit server: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "reference rate limit server built in %v\n", time.Since(start).Round(100*time.Millisecond))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The configuration both servers load: every kind of descriptor the
// reference supports. Hour units keep the tests away from window edges.
const config = `
domain: conf
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: plan
    value: gold
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: route
    value: api*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: org
    value: acme
    descriptors:
      - key: team
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: category
    value: account
    rate_limit:
      unit: hour
      requests_per_unit: 10
      replaces: [{name: per-route}]
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 1, name: per-route}
  - key: secondly
    rate_limit: {unit: second, requests_per_unit: 20}
`

func startReference(t *testing.T, redisAddr string) pb.RateLimitServiceClient {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "rt", "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rt", "config", "conf.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "grpc.sock")
	cmd := exec.Command(referenceBin)
	cmd.Env = append(os.Environ(),
		"RUNTIME_ROOT="+dir, "RUNTIME_SUBDIRECTORY=rt", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"USE_STATSD=false", "DISABLE_STATS=true", "LOG_LEVEL=warn",
		"HOST=127.0.0.1", "PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0", "GRPC_UDS="+sock,
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=single", "REDIS_URL="+redisAddr,
		"CACHE_KEY_PREFIX=reference:",
	)
	var out bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, &out}, lockedWriter{&mu, &out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("reference server output:\n%s", out.String())
			mu.Unlock()
		}
	})
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := pb.NewRateLimitServiceClient(cc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.ShouldRateLimit(ctx, request("elsewhere", desc("x", "y")))
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference server did not answer within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func startSluice(t *testing.T, redisAddr string, alg ratelimit.Algorithm, prefix string) pb.RateLimitServiceClient {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	table, err := ratelimit.Parse("conf.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ratelimit.New(ratelimit.Config{Redis: rc, Algorithm: alg, Prefix: prefix, Timeout: time.Second}, table)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterRateLimitServiceServer(g, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewRateLimitServiceClient(cc)
}

func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func hits(d *rlv3.RateLimitDescriptor, n uint64) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func request(domain string, ds ...*rlv3.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// summary is what must be equal: the overall code, and per descriptor the
// code, the limit and what remains.
func summary(resp *pb.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(resp.OverallCode.String())
	for _, st := range resp.Statuses {
		fmt.Fprintf(&b, " [%v rem=%d", st.Code, st.LimitRemaining)
		if l := st.CurrentLimit; l != nil {
			fmt.Fprintf(&b, " limit=%d/%v", l.RequestsPerUnit, l.Unit)
		}
		b.WriteString("]")
	}
	return b.String()
}

// script is the sequence of calls both servers get, in this order.
func script() []*pb.RateLimitRequest {
	var rs []*pb.RateLimitRequest
	repeat := func(n int, mk func() *pb.RateLimitRequest) {
		for range n {
			rs = append(rs, mk())
		}
	}
	repeat(5, func() *pb.RateLimitRequest { return request("conf", desc("user", "alice")) })
	repeat(2, func() *pb.RateLimitRequest { return request("conf", desc("user", "bob")) })
	repeat(7, func() *pb.RateLimitRequest { return request("conf", desc("plan", "gold")) })
	rs = append(rs, request("conf", desc("plan", "silver"))) // no rule
	repeat(3, func() *pb.RateLimitRequest { return request("conf", desc("route", "api/v1")) })
	repeat(3, func() *pb.RateLimitRequest { return request("conf", desc("route", "apix")) })
	rs = append(rs, request("conf", desc("route", "ap")))
	rs = append(rs, request("conf", desc("files", "files/a")), request("conf", desc("files", "files/b")),
		request("conf", desc("files", "files/c"))) // one shared counter
	repeat(3, func() *pb.RateLimitRequest { return request("conf", desc("org", "acme", "team", "red")) })
	rs = append(rs, request("conf", desc("org", "acme")), request("conf", desc("org", "other", "team", "red")))
	rs = append(rs, request("conf", desc("free", "x")), request("conf", desc("free", "x")))
	repeat(3, func() *pb.RateLimitRequest { return request("conf", desc("shadow", "s")) })
	// replaces: category=account turns per-route off for this request.
	repeat(2, func() *pb.RateLimitRequest { return request("conf", desc("category", "account"), desc("path", "/a")) })
	repeat(2, func() *pb.RateLimitRequest { return request("conf", desc("path", "/b")) })
	// Several descriptors, one over.
	rs = append(rs, request("conf", desc("user", "carol"), desc("user", "alice"), desc("plan", "none")))
	// hits_addend: the request's, a descriptor's, zero (a check).
	r := request("conf", desc("user", "dave"))
	r.HitsAddend = 2
	rs = append(rs, r)
	rs = append(rs, request("conf", hits(desc("user", "dave"), 0)), request("conf", hits(desc("user", "dave"), 1)),
		request("conf", hits(desc("user", "dave"), 0)), request("conf", hits(desc("user", "erin"), 5)),
		request("conf", hits(desc("user", "erin"), 0)))
	// A limit carried by the request.
	o := desc("anything", "z")
	o.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
	repeat(3, func() *pb.RateLimitRequest { return request("conf", o) })
	// Unknown domain and unmatched descriptors.
	rs = append(rs, request("nobody", desc("user", "alice")), request("conf", desc("nothing", "x")))
	return rs
}

func awayFromHourEdge(t *testing.T) {
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < 20*time.Second {
		t.Logf("waiting %v for the next hour", left)
		time.Sleep(left + 200*time.Millisecond)
	}
}

// TestFixedWindowMatchesTheReference: the same calls to the reference
// server and to sluice with algorithm fixed_window, on one Redis, get the
// same codes, limits and limit_remaining, call for call.
func TestFixedWindowMatchesTheReference(t *testing.T) {
	srv := redistest.Start(t)
	ref := startReference(t, srv.Addr())
	sl := startSluice(t, srv.Addr(), ratelimit.FixedWindow, "sluice:")
	awayFromHourEdge(t)
	ctx := context.Background()
	for i, r := range script() {
		want, err := ref.ShouldRateLimit(ctx, r)
		if err != nil {
			t.Fatalf("call %d to the reference: %v", i, err)
		}
		got, err := sl.ShouldRateLimit(ctx, r)
		if err != nil {
			t.Fatalf("call %d to sluice: %v", i, err)
		}
		if summary(got) != summary(want) {
			t.Errorf("call %d %v:\n  sluice    %s\n  reference %s", i, r.Descriptors, summary(got), summary(want))
		}
		for j, st := range want.Statuses {
			if st.DurationUntilReset == nil {
				continue
			}
			d := got.Statuses[j].DurationUntilReset.AsDuration() - st.DurationUntilReset.AsDuration()
			if d < -time.Second || d > time.Second {
				t.Errorf("call %d status %d: duration_until_reset %v, reference %v", i, j,
					got.Statuses[j].DurationUntilReset.AsDuration(), st.DurationUntilReset.AsDuration())
			}
		}
	}
}

// TestGCRADiffersOnlyAtTheWindowEdge: within one window GCRA (burst =
// requests_per_unit) gives the reference's answers; across a window's
// edge the reference admits the limit twice within a moment, GCRA only
// the burst plus what the time between refilled.
func TestGCRADiffersOnlyAtTheWindowEdge(t *testing.T) {
	srv := redistest.Start(t)
	ref := startReference(t, srv.Addr())
	sl := startSluice(t, srv.Addr(), ratelimit.GCRA, "gcra:")
	awayFromHourEdge(t)
	ctx := context.Background()
	// Within a window: a burst to one key.
	for i := range 5 {
		r := request("conf", desc("user", "within"))
		want, _ := ref.ShouldRateLimit(ctx, r)
		got, err := sl.ShouldRateLimit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if summary(got) != summary(want) {
			t.Errorf("hit %d within a window: sluice %s, reference %s", i, summary(got), summary(want))
		}
	}
	// Across an edge: 30 hits just before a second ends and 30 just
	// after, to a limit of 20 per second.
	burst := func(c pb.RateLimitServiceClient, key string) int {
		n := 0
		for range 30 {
			resp, err := c.ShouldRateLimit(ctx, request("conf", desc("secondly", key)))
			if err != nil {
				t.Fatal(err)
			}
			if resp.OverallCode == pb.RateLimitResponse_OK {
				n++
			}
		}
		return n
	}
	for attempt := range 5 {
		key := fmt.Sprint("edge", attempt)
		next := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(next.Add(-150 * time.Millisecond)))
		refA, slA := burst(ref, key), burst(sl, key)
		if time.Now().After(next) {
			continue // too slow to finish before the edge: try again
		}
		time.Sleep(time.Until(next.Add(10 * time.Millisecond)))
		start := time.Now()
		refB, slB := burst(ref, key), burst(sl, key)
		elapsed := time.Since(next.Add(-150 * time.Millisecond))
		if time.Since(start) > 500*time.Millisecond {
			continue
		}
		if refA+refB != 40 {
			t.Errorf("the reference admitted %d+%d across the edge, want 20+20", refA, refB)
		}
		// 20 per second: the burst of 20, plus a token per 50 ms.
		if limit := 20 + int(elapsed/(50*time.Millisecond)) + 1; slA+slB > limit {
			t.Errorf("GCRA admitted %d+%d across the edge in %v, want at most %d", slA, slB, elapsed, limit)
		}
		t.Logf("across the edge in %v: reference %d+%d, gcra %d+%d", elapsed.Round(time.Millisecond), refA, refB, slA, slB)
		return
	}
	t.Skip("the machine was too slow to send the bursts within a second's edge five times")
}
