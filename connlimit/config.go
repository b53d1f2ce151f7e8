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
	// DefaultSendTimeout bounds the time between two successful writes of
	// a response when Config.SendTimeout is zero (nginx's send_timeout).
	DefaultSendTimeout = 60 * time.Second
	// DefaultBodyTimeout bounds the time between two successful reads of
	// a request body when Config.BodyTimeout is zero (nginx's
	// client_body_timeout).
	DefaultBodyTimeout = 60 * time.Second
	// explicitOverhead is the number of descriptors, beyond the
	// connections and the lingering refusals, that an explicit MaxConns
	// must leave free: standard streams, the listeners, the runtime's
	// poller, an admin listener and a few of its connections, files being
	// read.
	explicitOverhead = 16
	// fallbackNoFileLimit stands in for an unlimited (RLIM_INFINITY) or
	// unknown descriptor limit when deriving MaxConns.
	fallbackNoFileLimit = 1 << 20
)

// ErrInvalidConfig is wrapped by every error New returns for a Config
// field that is out of range. Inspect with errors.Is.
var ErrInvalidConfig = errors.New("connlimit: invalid config")

// ErrNoHeadroom is returned by New when the process's file-descriptor
// limit has no room for the connections: MaxConns is derived (zero) and
// the limit is not larger than the reserve, or MaxConns is set and, with
// the reserve, does not fit under the limit (the message names the
// largest value that fits). Raise the limit (ulimit -n) or lower
// MaxConns.
var ErrNoHeadroom = errors.New("connlimit: file-descriptor limit leaves no room for connections")

// Config configures a Listener. The zero value is a valid default: the
// connection limit is derived from the file-descriptor limit, over-limit
// connections get HTTPBusyReply(1), and Accept backs off on EMFILE.
type Config struct {
	// MaxConns is the most connections open at once (accepted and not
	// yet closed). It protects file descriptors, not concurrency: set it
	// well above the clients' connection pools and bound work with a
	// gate. Zero derives it at New time from the soft RLIMIT_NOFILE minus
	// Reserve; a value that does not fit under that limit is refused
	// (ErrNoHeadroom; see the package documentation). Negative or above
	// 1<<20 is invalid.
	MaxConns int

	// Reserve is the number of file descriptors kept back for files,
	// upstream sockets, refused connections and the runtime. With
	// MaxConns derived, zero means max(DefaultMinReserve,
	// limit/DefaultReserveFraction). With MaxConns set, zero means
	// MaxRefusing plus 16 (standard streams, listeners, the poller, an
	// admin listener, files being read), and New refuses a MaxConns that
	// does not fit under the soft RLIMIT_NOFILE with that reserve
	// (ErrNoHeadroom, naming the largest value that fits). Negative is
	// invalid.
	Reserve int

	// BusyReply is written to a connection refused because the limit is
	// reached, before it is closed. Nil means HTTPBusyReply(1): an HTTP/1.1
	// 503 with Retry-After: 1 and Connection: close, or, to a client whose
	// first bytes are the cleartext HTTP/2 preface (h2c with prior
	// knowledge), an HTTP/2 GOAWAY (ENHANCE_YOUR_CALM, the same JSON as
	// debug data). A non-nil empty slice
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

	// SendTimeout bounds the time between two successful writes of a
	// response (nginx's send_timeout): not a cap on the whole response, so
	// a large file to a slow but live client completes, while a client
	// that stops reading is cut off this long after its last progress
	// (Stats.ClosedSendTimeout). Set per request through
	// http.ResponseController by the handler wrapper ConfigureServer
	// installs. Zero means DefaultSendTimeout; negative means none.
	SendTimeout time.Duration

	// BodyTimeout bounds the time between two successful reads of a
	// request body (nginx's client_body_timeout), including net/http's
	// own discard of a body the handler did not read: a request that
	// declares a body and never sends it is closed this long after its
	// headers (Stats.ClosedBodyTimeout). Zero means DefaultBodyTimeout;
	// negative means none.
	BodyTimeout time.Duration

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

// http2Preface is what a cleartext HTTP/2 client with prior knowledge
// sends first (RFC 9113 section 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// http2BusyReply is the default busy reply for such a client: an empty
// SETTINGS frame (the server preface) and a GOAWAY with last stream 0,
// error ENHANCE_YOUR_CALM and the contract's JSON as debug data, so the
// client reports the refusal ("server sent GOAWAY ... ENHANCE_YOUR_CALM,
// debug=...max_conns...") instead of a protocol error.
var http2BusyReply = func() []byte {
	debug := []byte(`{"error":"BUSY","gate":"connections","reason":"max_conns"}`)
	settings := []byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}
	n := 8 + len(debug)
	goaway := []byte{byte(n >> 16), byte(n >> 8), byte(n), 0x7, 0, 0, 0, 0, 0,
		0, 0, 0, 0, // last stream ID 0: nothing was processed
		0, 0, 0, 0xb} // ENHANCE_YOUR_CALM
	return append(append(settings, goaway...), debug...)
}()

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
	httpBusyReply     bool // busyReply is the default HTTP one
	busyWriteTimeout  time.Duration
	refuseLinger      time.Duration
	maxRefusing       int
	maxAcceptBackoff  time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	sendTimeout       time.Duration
	bodyTimeout       time.Duration
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
		sendTimeout:       cfg.SendTimeout,
		bodyTimeout:       cfg.BodyTimeout,
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
	case cfg.MaxConns > fallbackNoFileLimit:
		return r, fmt.Errorf("%w: MaxConns %d is above %d", ErrInvalidConfig, cfg.MaxConns, fallbackNoFileLimit)
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
	if r.sendTimeout == 0 {
		r.sendTimeout = DefaultSendTimeout
	}
	if r.bodyTimeout == 0 {
		r.bodyTimeout = DefaultBodyTimeout
	}
	if cfg.BusyReply == nil {
		r.busyReply, r.httpBusyReply = HTTPBusyReply(1), true
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
	if cfg.MaxConns > 0 {
		if err := checkExplicitMaxConns(noFile, cfg, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// checkExplicitMaxConns refuses an explicit MaxConns that, with its
// refusals and the fixed overhead, would not fit under the soft
// RLIMIT_NOFILE: such a limit is never reached, and the flood it was
// meant to stop ends in EMFILE instead of busy replies. When the limit
// cannot be read (no RLIMIT_NOFILE on the platform) the value is trusted.
// Without an explicit MaxRefusing, the lingering refusals are scaled down
// to fit a small descriptor limit.
func checkExplicitMaxConns(noFile func() (uint64, error), cfg Config, r *resolved) error {
	soft, err := noFile()
	if err != nil {
		return nil
	}
	limit := int(min(soft, fallbackNoFileLimit))
	if cfg.MaxRefusing == 0 {
		// A quarter of what the connections leave over, at least one.
		r.maxRefusing = min(r.maxRefusing, max(1, (limit-cfg.MaxConns-explicitOverhead)/4))
	}
	reserve := cfg.Reserve
	if reserve == 0 {
		reserve = r.maxRefusing + explicitOverhead
	}
	if fits := limit - reserve; cfg.MaxConns > fits {
		if fits < 1 {
			return fmt.Errorf("%w: MaxConns %d: the file-descriptor limit %d leaves no room for connections after a reserve of %d (raise ulimit -n)",
				ErrNoHeadroom, cfg.MaxConns, limit, reserve)
		}
		return fmt.Errorf("%w: MaxConns %d does not fit the file-descriptor limit %d: with %d descriptors kept back for refusals, listeners and files, the largest that fits is %d (or raise ulimit -n)",
			ErrNoHeadroom, cfg.MaxConns, limit, reserve, fits)
	}
	return nil
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
