package connlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Defaults used when the corresponding Config field is zero.
const (
	// DefaultMinReserve is the smallest number of file descriptors kept
	// back from the derived connection limit (see Config.Reserve).
	DefaultMinReserve = 64
	// DefaultReserveFraction is the share of the file-descriptor limit
	// kept back from the derived connection limit, as 1/N (here 1/10).
	DefaultReserveFraction = 10
	// DefaultBusyWriteTimeout bounds the write of the busy reply.
	DefaultBusyWriteTimeout = 100 * time.Millisecond
	// DefaultRefuseLinger bounds the polite refusal of one connection
	// (see Config.RefuseLinger).
	DefaultRefuseLinger = 500 * time.Millisecond
	// DefaultMaxRefusing bounds the refused connections lingering at once.
	DefaultMaxRefusing = 64
	// DefaultMaxAcceptBackoff caps the pause after a temporary Accept
	// error (EMFILE, ENFILE, ...); net/http uses the same 1 s cap.
	DefaultMaxAcceptBackoff = time.Second
	// MinAcceptBackoff is the first pause after a temporary Accept error;
	// each consecutive error doubles it up to Config.MaxAcceptBackoff.
	MinAcceptBackoff = 5 * time.Millisecond
	// DefaultReadHeaderTimeout is applied to an http.Server by
	// ConfigureServer when Config.ReadHeaderTimeout is zero.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is applied to an http.Server by ConfigureServer
	// when Config.IdleTimeout is zero.
	DefaultIdleTimeout = 60 * time.Second
	// fallbackNoFileLimit stands in for an unlimited (RLIM_INFINITY) or
	// unknown descriptor limit when deriving MaxConns.
	fallbackNoFileLimit = 1 << 20
)

// ErrInvalidConfig is wrapped by every error New returns for a Config
// field that is out of range. Inspect with errors.Is.
var ErrInvalidConfig = errors.New("connlimit: invalid config")

// ErrNoHeadroom is returned by New when MaxConns is derived (zero) and the
// process's file-descriptor limit is not larger than the reserve, so no
// connection could be admitted. Raise the limit (ulimit -n) or set
// MaxConns explicitly.
var ErrNoHeadroom = errors.New("connlimit: file-descriptor limit leaves no room for connections")

// Config configures a Listener. The zero value is a valid default: the
// connection limit is derived from the file-descriptor limit, over-limit
// connections get HTTPBusyReply(1), and Accept backs off on EMFILE.
type Config struct {
	// MaxConns is the most connections open at once (accepted and not
	// yet closed). Zero derives it at New time from the soft
	// RLIMIT_NOFILE minus Reserve (see the package documentation).
	// Negative is invalid.
	MaxConns int

	// Reserve is the number of file descriptors kept back for files,
	// upstream sockets, refused connections and the runtime when MaxConns
	// is derived. Zero means max(DefaultMinReserve, limit/DefaultReserveFraction).
	// Ignored when MaxConns is set. Negative is invalid.
	Reserve int

	// BusyReply is written to a connection refused because the limit is
	// reached, before it is closed. Nil means HTTPBusyReply(1): an HTTP/1.1
	// 503 with Retry-After: 1 and Connection: close. A non-nil empty slice
	// means close without writing (for protocols other than cleartext
	// HTTP/1.x, TLS included). The slice is copied by New.
	BusyReply []byte

	// BusyWriteTimeout bounds the write of BusyReply (which may happen on
	// the accept path, see MaxRefusing). Zero means
	// DefaultBusyWriteTimeout. Negative is invalid.
	BusyWriteTimeout time.Duration

	// RefuseLinger bounds the time a refused connection is handled in a
	// goroutine of its own: wait (at most 100 ms) for the client's request
	// to start, write BusyReply, send FIN, and discard input until the
	// client closes, so that the close does not turn into a reset that
	// destroys the reply in flight. Zero means DefaultRefuseLinger.
	// Negative means write at once on the accept path and close.
	RefuseLinger time.Duration

	// MaxRefusing bounds the refused connections lingering at once; each
	// holds a file descriptor, so they come out of Reserve. Beyond it a
	// refused connection gets BusyReply at once on the accept path and
	// is closed (the client may then see a reset after the reply, or
	// instead of it). Zero means DefaultMaxRefusing, or a quarter of the reserve (at least 1) if that
	// is smaller and MaxConns is derived. Negative is invalid.
	MaxRefusing int

	// MaxAcceptBackoff caps the pause after a temporary Accept error.
	// Pauses start at MinAcceptBackoff and double. Zero means
	// DefaultMaxAcceptBackoff. Negative or below MinAcceptBackoff is invalid.
	MaxAcceptBackoff time.Duration

	// ReadHeaderTimeout is set on an http.Server by ConfigureServer: the
	// time a client has to send a request's headers (slowloris). Zero
	// means DefaultReadHeaderTimeout; negative means no header timeout.
	// The Listener itself does not use it.
	ReadHeaderTimeout time.Duration

	// IdleTimeout is set on an http.Server by ConfigureServer: how long
	// a keep-alive connection may wait for its next request. Zero means
	// DefaultIdleTimeout; negative means no idle timeout. The Listener
	// itself does not use it.
	IdleTimeout time.Duration

	// Logger receives limit transitions and Accept back-offs. Nil means
	// silent.
	Logger *slog.Logger
}

// HTTPBusyReply returns a complete HTTP/1.1 503 response for an
// over-limit connection, with the given Retry-After in seconds (values
// below 1 become 1), Connection: close and the JSON body
// {"error":"BUSY","gate":"connections","reason":"max_conns"}.
func HTTPBusyReply(retryAfterSeconds int) []byte {
	retryAfterSeconds = max(retryAfterSeconds, 1)
	const body = `{"error":"BUSY","gate":"connections","reason":"max_conns"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\n" +
		"Retry-After: " + strconv.Itoa(retryAfterSeconds) + "\r\n" +
		"Connection: close\r\n" +
		"Cache-Control: no-store\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"\r\n" + body)
}

// Validate reports what New would reject, without a listener: an error
// wrapping ErrInvalidConfig or ErrNoHeadroom, or nil. With MaxConns zero
// it reads the process's file-descriptor limit. Useful to check flags
// before binding a port.
func (cfg Config) Validate() error {
	_, err := cfg.resolve(softNoFile)
	return err
}

// resolved is a Config with the defaults filled in and the limit derived.
type resolved struct {
	maxConns          int
	busyReply         []byte
	busyWriteTimeout  time.Duration
	refuseLinger      time.Duration
	maxRefusing       int
	maxAcceptBackoff  time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	logger            *slog.Logger
}

// resolve validates cfg and fills in defaults; noFile reads the soft
// file-descriptor limit and is only called when MaxConns is zero.
func (cfg Config) resolve(noFile func() (uint64, error)) (resolved, error) {
	r := resolved{
		busyWriteTimeout:  cfg.BusyWriteTimeout,
		refuseLinger:      cfg.RefuseLinger,
		maxRefusing:       cfg.MaxRefusing,
		maxAcceptBackoff:  cfg.MaxAcceptBackoff,
		readHeaderTimeout: cfg.ReadHeaderTimeout,
		idleTimeout:       cfg.IdleTimeout,
		logger:            cfg.Logger,
	}
	switch {
	case cfg.MaxConns < 0:
		return r, fmt.Errorf("%w: MaxConns %d is negative (0 derives it from the file-descriptor limit)", ErrInvalidConfig, cfg.MaxConns)
	case cfg.Reserve < 0:
		return r, fmt.Errorf("%w: Reserve %d is negative", ErrInvalidConfig, cfg.Reserve)
	case cfg.BusyWriteTimeout < 0:
		return r, fmt.Errorf("%w: BusyWriteTimeout %v is negative", ErrInvalidConfig, cfg.BusyWriteTimeout)
	case cfg.MaxRefusing < 0:
		return r, fmt.Errorf("%w: MaxRefusing %d is negative", ErrInvalidConfig, cfg.MaxRefusing)
	case cfg.MaxAcceptBackoff != 0 && cfg.MaxAcceptBackoff < MinAcceptBackoff:
		return r, fmt.Errorf("%w: MaxAcceptBackoff %v is below %v", ErrInvalidConfig, cfg.MaxAcceptBackoff, MinAcceptBackoff)
	}
	if r.busyWriteTimeout == 0 {
		r.busyWriteTimeout = DefaultBusyWriteTimeout
	}
	if r.refuseLinger == 0 {
		r.refuseLinger = DefaultRefuseLinger
	}
	if r.maxAcceptBackoff == 0 {
		r.maxAcceptBackoff = DefaultMaxAcceptBackoff
	}
	if r.readHeaderTimeout == 0 {
		r.readHeaderTimeout = DefaultReadHeaderTimeout
	}
	if r.idleTimeout == 0 {
		r.idleTimeout = DefaultIdleTimeout
	}
	if cfg.BusyReply == nil {
		r.busyReply = HTTPBusyReply(1)
	} else {
		r.busyReply = append([]byte{}, cfg.BusyReply...)
	}
	r.maxConns = cfg.MaxConns
	defaultRefusing := DefaultMaxRefusing
	if r.maxConns == 0 {
		n, reserve, err := deriveMaxConns(noFile, cfg.Reserve)
		if err != nil {
			return r, err
		}
		r.maxConns = n
		// Lingering refused connections hold descriptors out of the
		// reserve; let them take at most a quarter of it.
		defaultRefusing = min(DefaultMaxRefusing, max(1, reserve/4))
	}
	if r.maxRefusing == 0 {
		r.maxRefusing = defaultRefusing
	}
	return r, nil
}

// deriveMaxConns computes the default limit, the soft RLIMIT_NOFILE minus
// the reserve, and returns the reserve it used.
func deriveMaxConns(noFile func() (uint64, error), reserve int) (maxConns, reserveUsed int, err error) {
	soft, err := noFile()
	if err != nil {
		return 0, 0, fmt.Errorf("connlimit: MaxConns is 0 and the file-descriptor limit cannot be read (set MaxConns): %w", err)
	}
	if soft > fallbackNoFileLimit {
		// RLIM_INFINITY or a huge hard limit: the fd table is not the
		// binding constraint; cap so the number stays meaningful.
		soft = fallbackNoFileLimit
	}
	limit := int(soft)
	if reserve == 0 {
		reserve = max(DefaultMinReserve, limit/DefaultReserveFraction)
	}
	if limit <= reserve {
		return 0, 0, fmt.Errorf("%w: soft RLIMIT_NOFILE %d, reserve %d", ErrNoHeadroom, limit, reserve)
	}
	return limit - reserve, reserve, nil
}
