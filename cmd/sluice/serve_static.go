package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/demosite"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/static"
)

// staticOptions are the `sluice serve` flags that configure the static-file
// handler (package static). On the command line a zero turns a feature off
// (--cache-bytes 0: no cache; --revalidate 0: check on every request),
// where in static.Config a zero means "the default".
type staticOptions struct {
	root              string
	slots             slotsFlag
	maxWait           time.Duration
	queue             int
	cacheBytes        byteSize
	maxCachedFileSize byteSize
	revalidate        time.Duration
	gateStreams       bool
	gateScope         string
	dotfiles          bool

	handler *static.Handler // set by build
}

// addStaticFlags registers the static-file flags on fs.
func addStaticFlags(fs *flag.FlagSet) *staticOptions {
	o := &staticOptions{
		cacheBytes:        static.DefaultCacheBytes,
		maxCachedFileSize: static.DefaultMaxCachedFileSize,
	}
	fs.StringVar(&o.root, "root", "", "directory to serve (default: the built-in demo site)")
	o.slots = slotsFlag{n: static.DefaultWorkLimit}
	fs.Var(&o.slots, "max-inflight", "slots of the \"disk\" gate, a number `N` or off: disk reads (and gated streams) in flight at once;\noff: no gate at all (every read goes through)")
	deprecate(fs, "work-limit", "max-inflight")
	fs.DurationVar(&o.maxWait, "max-wait", 0, "longest wait in the disk queue before 503 (0: the gate's default, 1s, or with an adaptive --limit and --slo a quarter of the SLO; needs --queue)")
	fs.IntVar(&o.queue, "queue", 0, "disk reads that may wait for a slot (0: refuse at once when full)")
	fs.Var(&o.cacheBytes, "cache-bytes", "bytes of file content kept in memory, e.g. 64MiB (0: no cache)")
	fs.Var(&o.maxCachedFileSize, "max-cached-file-size", "largest file kept in memory; larger files stream (0: stream every file)")
	fs.DurationVar(&o.revalidate, "revalidate", static.DefaultRevalidate, "how long a cached file is served before its size and mtime are checked again (0: every request)")
	fs.BoolVar(&o.gateStreams, "gate-streams", true, "large-file streams hold a disk slot for their whole duration")
	fs.StringVar(&o.gateScope, "gate-scope", "disk", "where the slot is taken: disk (before a disk read) or request (before the cache: the request-scoped bug, for demonstrations)")
	fs.BoolVar(&o.dotfiles, "dotfiles", false, "serve names starting with \".\" (hidden as 404 by default)")
	return o
}

// config validates the flags and turns them into a static.Config.
func (o *staticOptions) config(logger *slog.Logger) (static.Config, error) {
	var errs []error
	if !o.slots.off && (o.slots.n < 1 || o.slots.n > admit.MaxCapacity) {
		errs = append(errs, fmt.Errorf("--max-inflight %d: want 1 to %d, or off", o.slots.n, admit.MaxCapacity))
	}
	if o.queue < 0 || o.queue > maxQueue {
		errs = append(errs, fmt.Errorf("--queue %d: want 0 to %d", o.queue, maxQueue))
	}
	if o.maxWait < 0 || o.maxWait > maxMaxWait {
		errs = append(errs, fmt.Errorf("--max-wait %s: want 0 to %s", o.maxWait, maxMaxWait))
	}
	if o.maxWait > 0 && o.queue == 0 {
		errs = append(errs, errors.New("--max-wait needs --queue: without a queue a full gate refuses at once"))
	}
	if o.slots.off && (o.queue > 0 || o.gateScope == "request") {
		errs = append(errs, errors.New("--max-inflight off has no gate: --queue and --gate-scope request need one"))
	}
	if o.revalidate < 0 || o.revalidate > maxRevalidate {
		errs = append(errs, fmt.Errorf("--revalidate %s: want 0 to %s", o.revalidate, maxRevalidate))
	}
	if o.cacheBytes < 0 || o.cacheBytes > maxCacheBytes {
		errs = append(errs, fmt.Errorf("--cache-bytes %d: want 0 to %d (1TiB)", o.cacheBytes, int64(maxCacheBytes)))
	}
	if o.maxCachedFileSize < 0 || o.maxCachedFileSize > maxCacheBytes {
		errs = append(errs, fmt.Errorf("--max-cached-file-size %d: want 0 to %d (1TiB)", o.maxCachedFileSize, int64(maxCacheBytes)))
	}
	scope, err := static.ParseScope(o.gateScope)
	if err != nil {
		errs = append(errs, fmt.Errorf("--gate-scope %q: want disk or request", o.gateScope))
	}
	if err := errors.Join(errs...); err != nil {
		return static.Config{}, err
	}
	cfg := static.Config{
		Root:              o.root,
		Dotfiles:          o.dotfiles,
		WorkLimit:         o.slots.workLimit(),
		Queue:             o.queue,
		MaxWait:           o.maxWait,
		CacheBytes:        offIfZero(int64(o.cacheBytes)),
		MaxCachedFileSize: offIfZero(int64(o.maxCachedFileSize)),
		Revalidate:        time.Duration(offIfZero(int64(o.revalidate))),
		UngatedStreams:    !o.gateStreams,
		Scope:             scope,
		Logger:            logger,
	}
	if cfg.Root == "" {
		cfg.FS = demosite.FS() // the quick start: no --root serves the demo site
	}
	return cfg, nil
}

// offIfZero maps the command line's "0 = off" to static.Config's "negative
// = off" (its zero means "default").
func offIfZero(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}

// build returns the handler to mount on the main listener, the gates it
// uses (for /metrics and /state), its collectors, and a cleanup function
// to call after the server has shut down.
//
// obs observes the disk gate and lim, if not nil, gives it an adaptive
// limit (the handler's Limit).
func (o *staticOptions) build(logger *slog.Logger, obs admit.Observer, lim *limit.Config) (*static.Handler, []*admit.Gate, []prometheus.Collector, func(), error) {
	cfg, err := o.config(logger)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cfg.Observer, cfg.Limit = obs, lim
	h, err := static.New(cfg)
	o.handler = h
	if err != nil {
		if cfg.Root != "" {
			return nil, nil, nil, nil, fmt.Errorf("--root %q: %w", cfg.Root, err)
		}
		return nil, nil, nil, nil, err
	}
	if logger != nil {
		what := "built-in demo site"
		if cfg.Root != "" {
			what = cfg.Root
		}
		logger.Info("serving static files", "root", what, "max_inflight", o.slots.String(), "gate_scope", cfg.Scope.String(),
			"cache_bytes", int64(o.cacheBytes), "max_cached_file_size", int64(o.maxCachedFileSize), "gate_streams", o.gateStreams)
	}
	cache := promsluice.NewCacheMetrics(func() promsluice.CacheStats {
		s := h.Stats()
		return promsluice.CacheStats{Hits: s.Hits, Misses: s.Misses, Evictions: s.Evictions, Entries: s.Entries, Bytes: s.Bytes}
	})
	var gates []*admit.Gate
	if g := h.Gate(); g != nil {
		gates = append(gates, g)
	}
	return h, gates, []prometheus.Collector{cache}, func() { h.Close() }, nil
}

// gateWork is the work the disk gate admits or queues at once, or -1
// without a gate.
func (o *staticOptions) gateWork() int64 {
	if o.slots.off {
		return -1
	}
	return o.slots.n + int64(o.queue)
}

// Accepted ranges of the static flags.
const (
	maxQueue      = 1 << 20
	maxMaxWait    = 10 * time.Minute
	maxRevalidate = 24 * time.Hour
	maxCacheBytes = byteSize(1 << 40)
)

// slotsFlag is serve's --max-inflight flag: a number of slots, or "off" (no
// gate). A number is kept as given, negative or zero included, so that
// the refusal shows what was typed.
type slotsFlag struct {
	n   int64
	off bool
}

func (f *slotsFlag) String() string {
	if f.off {
		return "off"
	}
	return strconv.FormatInt(f.n, 10)
}

func (f *slotsFlag) Set(s string) error {
	if strings.EqualFold(strings.TrimSpace(s), "off") {
		*f = slotsFlag{off: true}
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number of slots or off")
	}
	*f = slotsFlag{n: n}
	return nil
}

// workLimit is the flag as static.Config.WorkLimit: the slots, or -1 (no
// gate) for off.
func (f slotsFlag) workLimit() int64 {
	if f.off {
		return -1
	}
	return f.n
}

// byteSize is a flag.Value for sizes: a whole number of bytes with an
// optional unit, B, K/KB/KiB, M/MB/MiB, G/GB/GiB (all powers of 1024, as
// nginx reads them).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseByteSize parses "1048576", "512K", "64MiB", "1 GB".
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional unit (K, M, G, KiB, MiB, GiB)", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: number out of range", s)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (want K, M, G, KiB, MiB or GiB)", s, strings.TrimSpace(t[i:]))
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}
