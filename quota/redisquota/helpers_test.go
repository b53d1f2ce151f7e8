package redisquota

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestMain(m *testing.M) {
	// Re-executed as a slot holder by TestKilledHolderSlotsReturn.
	if addr := os.Getenv(helperEnv); addr != "" {
		holdSlotsForever(addr)
		return
	}
	// go-redis reports every failed dial through a process-wide logger;
	// the fault-injection tests cause hundreds. Their effects are
	// asserted, so the log lines are noise here.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

const helperEnv = "SLUICE_TEST_HOLD_SLOTS_ADDR"

// holdSlotsForever takes two slots of the "killme" gate, says so on
// stdout, and keeps renewing them until it is killed.
func holdSlotsForever(addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	s, err := NewSlots(SlotsConfig{Name: "killme", Capacity: 3, Client: c, TTL: time.Second})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for range 2 {
		if _, err := s.TryAcquire(context.Background()); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	fmt.Println("held")
	select {}
}

// newClient returns a client for srv that fails fast: connection errors
// must reach the breaker, not be retried for seconds.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 16,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func startRedis(t *testing.T) (*redistest.Server, *redis.Client) {
	srv := redistest.Start(t)
	return srv, newClient(t, srv.Addr())
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func mustNew(t testing.TB, cfg Config) *Quota {
	t.Helper()
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
