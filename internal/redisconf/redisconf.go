// Package redisconf turns the Redis flags of sluice's commands into
// go-redis options set up the way a quota store behind a breaker needs
// them: one client for the fleet quotas of `sluice serve` and `sluice
// proxy` (--quota-redis URL and --quota-redis-timeout), a universal client
// (one server, a cluster or Sentinel) for `sluice ratelimit` (--redis and
// its companions). The rules are the same for both: no command retries,
// a dial timeout of at least MinDialTimeout, the caller's deadline on
// every command.
//
// It is internal: a library user builds its own *redis.Client and hands
// it to quota/redisquota; these are the settings the CLI picks for it.
package redisconf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
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

// Universal is where a universal client (redis.UniversalClient) finds
// Redis, as `sluice ratelimit` takes it. Error messages name ratelimit's
// flags: --redis (Target), --redis-master, --redis-cluster.
type Universal struct {
	// Target is a URL (redis://host:6379/0, rediss://...: one server) or
	// comma-separated host:port addresses: one server, a cluster's seeds,
	// or with Master the sentinels. Empty means no Redis.
	Target string
	// Master is the Sentinel master's name; Target then lists sentinels.
	Master string
	// Cluster treats a single address as a cluster seed.
	Cluster bool
	// Password is for the addresses of Target; it replaces a URL's own.
	Password string
	// TLS dials the addresses of Target with TLS 1.2 or later (a rediss://
	// URL implies it).
	TLS bool
}

// UniversalOptions turns u into options for a universal client whose
// every command must answer within timeout, with the rules of Options.
// It returns nil options (and no error) when u names no Redis at all;
// settings that contradict each other or an address that is not
// host:port are errors wrapping ErrInvalid.
func UniversalOptions(u Universal, timeout time.Duration) (*redis.UniversalOptions, error) {
	if u.Target == "" {
		if u.Master != "" || u.Cluster {
			return nil, invalid("--redis-master and --redis-cluster need --redis")
		}
		return nil, nil
	}
	if timeout <= 0 {
		return nil, invalid(fmt.Sprintf("timeout %v: must be greater than zero", timeout))
	}
	if u.Master != "" && u.Cluster {
		return nil, invalid("--redis-master (Sentinel) and --redis-cluster exclude each other")
	}
	o := &redis.UniversalOptions{MasterName: u.Master, IsClusterMode: u.Cluster}
	if strings.Contains(u.Target, "://") {
		if u.Master != "" || u.Cluster {
			return nil, invalid("--redis is a URL: --redis-master and --redis-cluster take host:port addresses")
		}
		one, err := redis.ParseURL(u.Target)
		if err != nil {
			return nil, invalid(fmt.Sprintf("--redis %q: %v", u.Target, err))
		}
		o.Addrs, o.DB, o.Username, o.Password, o.TLSConfig = []string{one.Addr}, one.DB, one.Username, one.Password, one.TLSConfig
		if u.Password != "" {
			o.Password = u.Password
		}
	} else {
		for addr := range strings.SplitSeq(u.Target, ",") {
			addr = strings.TrimSpace(addr)
			if err := checkHostPort(addr); err != nil {
				return nil, err
			}
			o.Addrs = append(o.Addrs, addr)
		}
		o.Password = u.Password
		if u.TLS {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	o.MaxRetries = -1
	o.DialTimeout = max(timeout, MinDialTimeout)
	o.ContextTimeoutEnabled = true
	return o, nil
}

// checkHostPort refuses an address of --redis that is not host:port.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid(fmt.Sprintf("--redis %q: want host:port, e.g. 127.0.0.1:6379 (%v)", addr, err))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return invalid(fmt.Sprintf("--redis %q: port %q is not a number from 0 to 65535", addr, port))
	}
	if host != "" && net.ParseIP(host) == nil && strings.ContainsAny(host, " /") {
		return invalid(fmt.Sprintf("--redis %q: bad host %q", addr, host))
	}
	return nil
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
