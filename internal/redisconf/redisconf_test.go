package redisconf_test

import (
	"context"
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
	// command has failed.
	testutil.Eventually(t, "go-redis's dial failure in the log at debug level", func() bool {
		return strings.Contains(logs.String(), "level=DEBUG") && strings.Contains(logs.String(), "failed to dial")
	})
}
