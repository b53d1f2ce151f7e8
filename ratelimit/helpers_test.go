package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) {
	// go-redis reports every failed dial through a process-wide logger;
	// the fault tests cause many, and assert their effects.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// clock is a settable clock for in-process counters.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustParse(t testing.TB, yaml string) *Table {
	t.Helper()
	tb, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func mustService(t testing.TB, cfg Config, yaml string) *Service {
	t.Helper()
	s, err := New(cfg, mustParse(t, yaml))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *rlv3.RateLimitDescriptor, n uint64) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func req(domain string, ds ...*rlv3.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

func call(t testing.TB, s *Service, r *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := s.ShouldRateLimit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// statuses is each descriptor's code and remaining, "OK:3" or "OVER_LIMIT:0".
func statuses(resp *pb.RateLimitResponse) []string {
	out := make([]string, len(resp.Statuses))
	for i, st := range resp.Statuses {
		out[i] = st.Code.String() + ":" + itoa(st.LimitRemaining)
	}
	return out
}

func itoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func header(resp *pb.RateLimitResponse, name string) string {
	for _, h := range resp.ResponseHeadersToAdd {
		if h.Key == name {
			return h.Value
		}
	}
	return ""
}
