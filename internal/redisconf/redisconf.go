// Package redisconf turns the fleet-quota flags of `sluice serve` and
// `sluice proxy` (--quota-redis URL and --quota-redis-timeout) into a go-redis
// client set up the way a quota store behind a breaker needs it.
//
// It is internal: a library user builds its own *redis.Client and hands
// it to quota/redisquota; these are the settings the CLI picks for it.
package redisconf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrInvalid is wrapped by the errors of a URL or timeout that cannot make
// a client. Its text is not in their messages, which say only what is
// wrong, so the caller can name the flag.
var ErrInvalid = errors.New("invalid Redis settings")

// invalid is an ErrInvalid error with its own message only.
type invalid string

func (e invalid) Error() string { return string(e) }
func (e invalid) Unwrap() error { return ErrInvalid }

// MinDialTimeout is the shortest dial timeout a client gets, however short
// the quota's timeout: a loopback dial on a loaded machine can take longer
// than a command's budget, and a dial that never completes only feeds the
// breaker.
const MinDialTimeout = 100 * time.Millisecond

// Options reads url (redis://[user:password@]host:port/db, or rediss://
// for TLS, as redis.ParseURL reads it) into options for a client whose
// every command must answer within timeout: no command retries (a dead
// Redis must reach the breaker at once, not be retried behind it), a dial
// timeout of timeout but at least MinDialTimeout, and the caller's context
// deadline honoured on every command. A bad URL or a timeout of zero or
// less is an error wrapping ErrInvalid.
func Options(url string, timeout time.Duration) (*redis.Options, error) {
	if timeout <= 0 {
		return nil, invalid(fmt.Sprintf("timeout %v: must be greater than zero", timeout))
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, invalid(err.Error())
	}
	opts.MaxRetries = -1
	opts.DialTimeout = max(timeout, MinDialTimeout)
	opts.ContextTimeoutEnabled = true
	return opts, nil
}

// NewClient returns a client built from Options(url, timeout). It also
// sends go-redis's own log, which reports every failed dial while Redis
// is down through a process-wide logger that writes to stderr, to logger
// at debug level (nil discards it): the breaker and the quota's own
// warnings already say what matters. That logger is process-wide, so the
// last NewClient's logger receives every client's lines; a command has
// one logger.
func NewClient(url string, timeout time.Duration, logger *slog.Logger) (*redis.Client, error) {
	opts, err := Options(url, timeout)
	if err != nil {
		return nil, err
	}
	SetLogger(logger)
	return redis.NewClient(opts), nil
}

// SetLogger sends go-redis's process-wide log to logger at debug level
// (nil discards it), as NewClient does, for callers that build their own
// client (a universal client for Cluster or Sentinel).
func SetLogger(logger *slog.Logger) { redis.SetLogger(debugLogger{logger}) }

// debugLogger adapts go-redis's logging to slog at debug level.
type debugLogger struct{ l *slog.Logger }

func (d debugLogger) Printf(ctx context.Context, format string, v ...any) {
	if d.l != nil {
		d.l.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
	}
}
