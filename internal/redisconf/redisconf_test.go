package redisconf_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/redisconf"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testutil"
)

func TestOptionsFailFast(t *testing.T) {
	o, err := redisconf.Options("redis://u:p@127.0.0.1:6390/3", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "127.0.0.1:6390" || o.DB != 3 || o.Username != "u" || o.Password != "p" {
		t.Errorf("address %q db %d user %q: the URL was not read", o.Addr, o.DB, o.Username)
	}
	if o.MaxRetries != -1 || !o.ContextTimeoutEnabled || o.DialTimeout != redisconf.MinDialTimeout {
		t.Errorf("retries %d, context deadlines %v, dial timeout %v: want -1, true and the %v floor",
			o.MaxRetries, o.ContextTimeoutEnabled, o.DialTimeout, redisconf.MinDialTimeout)
	}
	if o, err := redisconf.Options("redis://127.0.0.1:6390/0", 2*time.Second); err != nil || o.DialTimeout != 2*time.Second {
		t.Errorf("a timeout above the floor: dial timeout %v, %v", o.DialTimeout, err)
	}
	for _, tc := range []struct {
		url     string
		timeout time.Duration
		want    string
	}{
		{"http://127.0.0.1:6379", time.Second, "invalid URL scheme"},
		{"redis://127.0.0.1:6379/x", time.Second, "invalid database number"},
		{"redis://127.0.0.1:6379/0", 0, "timeout 0s: must be greater than zero"},
		{"redis://127.0.0.1:6379/0", -time.Second, "timeout -1s"},
	} {
		_, err := redisconf.Options(tc.url, tc.timeout)
		if !errors.Is(err, redisconf.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), redisconf.ErrInvalid.Error()) {
			t.Errorf("Options(%q, %v): %v, want ErrInvalid saying only %q", tc.url, tc.timeout, err, tc.want)
		}
	}
}

// TestNewClient: a client talks to a real Redis; against one that is down
// a command fails within its deadline, without a retry, and go-redis's
// own complaint about the dial goes to the logger at debug level.
func TestNewClient(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := redistest.Start(t)
	var logs testutil.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := redisconf.NewClient(srv.URL(), 200*time.Millisecond, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("Get: %q, %v", v, err)
	}

	srv.Kill()
	c.Close()
	dead, err := redisconf.NewClient(srv.URL(), 200*time.Millisecond, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := dead.Ping(cctx).Err(); err == nil {
		t.Fatal("Ping of a Redis that is down succeeded")
	}
	// go-redis may log the failed dial from its own goroutine, after the
	// command has failed: within milliseconds, so 3 s is ample, and a
	// line that never comes fails in 3 s, not 10.
	testutil.EventuallyWithin(t, 3*time.Second, "go-redis's dial failure in the log at debug level", func() bool {
		return strings.Contains(logs.String(), "level=DEBUG") && strings.Contains(logs.String(), "failed to dial")
	})
}

// TestUniversalOptions: the universal client's settings follow the same
// fail-fast rules, read a URL or addresses, and refuse what contradicts.
func TestUniversalOptions(t *testing.T) {
	if o, err := redisconf.UniversalOptions(redisconf.Universal{}, time.Second); o != nil || err != nil {
		t.Errorf("no Redis: %+v, %v; want nil, nil", o, err)
	}
	o, err := redisconf.UniversalOptions(redisconf.Universal{Target: "rediss://u:p@10.0.0.1:6380/2", Password: "q"}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Addrs) != 1 || o.Addrs[0] != "10.0.0.1:6380" || o.DB != 2 || o.Username != "u" || o.Password != "q" || o.TLSConfig == nil {
		t.Errorf("URL: %+v; want its address, db, user, TLS, and the password given apart", o)
	}
	if o.MaxRetries != -1 || !o.ContextTimeoutEnabled || o.DialTimeout != redisconf.MinDialTimeout {
		t.Errorf("retries %d, context deadlines %v, dial timeout %v: want -1, true and the %v floor",
			o.MaxRetries, o.ContextTimeoutEnabled, o.DialTimeout, redisconf.MinDialTimeout)
	}
	o, err = redisconf.UniversalOptions(redisconf.Universal{Target: "10.0.0.1:26379, 10.0.0.2:26379", Master: "mymaster", Password: "s", TLS: true}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Addrs) != 2 || o.Addrs[1] != "10.0.0.2:26379" || o.MasterName != "mymaster" || o.Password != "s" ||
		o.TLSConfig == nil || o.TLSConfig.MinVersion != tls.VersionTLS12 || o.DialTimeout != 2*time.Second {
		t.Errorf("sentinels: %+v", o)
	}
	if o, err := redisconf.UniversalOptions(redisconf.Universal{Target: "10.0.0.1:7000", Cluster: true}, time.Second); err != nil || !o.IsClusterMode || o.TLSConfig != nil {
		t.Errorf("cluster seed: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		u    redisconf.Universal
		want string
	}{
		{redisconf.Universal{Master: "m"}, "--redis-master and --redis-cluster need --redis"},
		{redisconf.Universal{Cluster: true}, "need --redis"},
		{redisconf.Universal{Target: "redis://127.0.0.1:6379", Master: "m"}, "--redis is a URL"},
		{redisconf.Universal{Target: "10.0.0.1:1", Master: "m", Cluster: true}, "exclude each other"},
		{redisconf.Universal{Target: "redis://[::1"}, `--redis "redis://[::1"`},
		{redisconf.Universal{Target: "10.0.0.1"}, `--redis "10.0.0.1": want host:port`},
		{redisconf.Universal{Target: "10.0.0.1:1,10.0.0.2:x"}, `port "x"`},
		{redisconf.Universal{Target: "a b:1"}, `bad host "a b"`},
	} {
		_, err := redisconf.UniversalOptions(tc.u, time.Second)
		if !errors.Is(err, redisconf.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want ErrInvalid mentioning %q", tc.u, err, tc.want)
		}
	}
	if _, err := redisconf.UniversalOptions(redisconf.Universal{Target: "10.0.0.1:1"}, 0); !errors.Is(err, redisconf.ErrInvalid) {
		t.Errorf("a zero timeout: %v", err)
	}
}
