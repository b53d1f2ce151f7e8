package static

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
)

// Defaults applied to zero Config fields.
const (
	DefaultWorkLimit         = 16
	DefaultCacheBytes        = 64 << 20
	DefaultMaxCachedFileSize = 1 << 20
	DefaultRevalidate        = time.Second
	// GateName is the name of the gate that guards disk reads.
	GateName = "disk"
	// IndexFile is served for a directory URL ending in "/".
	IndexFile = "index.html"
)

// Kinds of work the disk gate counts apart.
const (
	KindRead   = "read"   // a whole file read into the cache
	KindStream = "stream" // a large file streamed to the client
)

// ErrInvalidConfig is wrapped by every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("static: invalid config")

// Scope says where the disk gate takes its slot.
type Scope uint8

const (
	// ScopeDisk (the zero Scope) takes a slot right before a file is read
	// from disk and releases it right after. Cache hits, HEAD, 304, 404,
	// 403 and redirects never touch the gate.
	ScopeDisk Scope = iota
	// ScopeRequest takes a slot for every request before the cache is
	// looked up, and holds it until the response is written. This is the
	// request-scoped bug, kept so that its cliff can be shown and tested:
	// cache hits are refused once concurrency passes the work limit.
	ScopeRequest
)

// String returns "disk" or "request".
func (s Scope) String() string {
	switch s {
	case ScopeDisk:
		return "disk"
	case ScopeRequest:
		return "request"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// ParseScope parses "disk" or "request".
func ParseScope(s string) (Scope, error) {
	switch s {
	case "disk":
		return ScopeDisk, nil
	case "request":
		return ScopeRequest, nil
	}
	return 0, fmt.Errorf("%w: gate scope %q: want \"disk\" or \"request\"", ErrInvalidConfig, s)
}

// Config configures a Handler. Root or FS is required; for every other
// field the zero value is a valid default: a 16-slot disk gate that
// refuses at once when full, a 64 MiB cache of files up to 1 MiB
// revalidated every second, large files streamed under the gate, and
// dotfiles hidden.
type Config struct {
	// Root is the directory to serve. Nothing outside it is reachable:
	// it is opened with os.OpenRoot, so "..", absolute names and symbolic
	// links that point outside are refused by the kernel-checked walk.
	// The path is looked up again at most once per Revalidate; when it
	// names another directory (a deploy swapped a symbolic link), that one
	// is served from then on. Empty means FS; with both empty New
	// returns ErrInvalidConfig.
	Root string

	// FS, when Root is empty, is the file system to serve. It is also the
	// hook for tests and benchmarks that need a slow disk: wrap a real FS
	// so that Read sleeps. Open and Stat are never gated (they read no
	// content); Read is. Files with a zero modification time get neither
	// Last-Modified nor ETag, except in an embed.FS: its files, which never
	// have a time and never change, are hashed at New into strong ETags.
	FS fs.FS

	// Dotfiles serves names with a component starting with "." (".env",
	// ".git/config"). False (the zero value) answers them with 404, as if
	// they did not exist.
	Dotfiles bool

	// WorkLimit is the number of slots of the "disk" gate: how many disk
	// reads (and, with streams gated, large-file streams) may run at once.
	// Zero means DefaultWorkLimit; negative means no gate at all: every
	// read goes through, and Handler.Gate returns nil (ScopeRequest then
	// is an error).
	WorkLimit int64

	// Queue is how many disk reads may wait for a slot when all are taken.
	// Zero means none: a read that finds the gate full is refused at once
	// with 503. Negative is an error.
	Queue int

	// MaxWait bounds the time a queued read waits before it is refused
	// (reason wait_timeout). Zero means admit.DefaultMaxWait; negative
	// means only the client's context ends the wait. Ignored without Queue.
	MaxWait time.Duration

	// CacheBytes bounds the bytes of file content held in memory. Zero
	// means DefaultCacheBytes; negative turns the cache off (every GET
	// reads the disk).
	CacheBytes int64

	// MaxCachedFileSize is the largest file read whole into the cache;
	// larger files are streamed. Zero means DefaultMaxCachedFileSize;
	// negative means every file is streamed. It is capped at CacheBytes.
	MaxCachedFileSize int64

	// Revalidate is how long a cached file is served without checking,
	// with one stat (never gated), that it is the same file: size,
	// modification time, and on Linux device, inode, change time and mode.
	// A file changed on disk is never served stale for longer than this.
	// It is also how often Root is looked up again. Zero means
	// DefaultRevalidate; negative means check on every request.
	Revalidate time.Duration

	// UngatedStreams lets streams of large files run without a disk slot.
	// False (the zero value) makes a stream hold a
	// slot for its whole duration: a stream is a disk read spread over
	// time, and leaving it out lets slow clients pile up unbounded disk
	// work. See the package documentation for the trade-off.
	UngatedStreams bool

	// Scope says where the slot is taken. The zero value, ScopeDisk, is the
	// fix; ScopeRequest reproduces the request-scoped bug.
	Scope Scope

	// Observer, if not nil, sees every decision of the disk gate.
	Observer admit.Observer

	// Limit, if not nil, lets an adaptive limit move the disk gate's
	// capacity (limit.NewGate builds the gate with it): WorkLimit is then
	// where it starts, unless Limit.Initial says otherwise, and
	// Handler.Limit returns it. Nil keeps the capacity fixed at WorkLimit.
	// It needs a gate (WorkLimit not negative).
	Limit *limit.Config

	// Logger receives one line per unexpected failure (a read error, a
	// file that changed while it was read). Nil means silent.
	Logger *slog.Logger
}
