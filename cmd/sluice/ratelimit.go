package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicehq/sluice/internal/redisconf"
	"github.com/sluicehq/sluice/quota/redisquota"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/server"
)

// Defaults of `sluice ratelimit`: the reference server's gRPC port.
const defaultRatelimitAddr = "127.0.0.1:8081"

// stringList is a repeatable flag; one value may also hold several
// comma-separated items (so the environment twin can carry more than one).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

type ratelimitOptions struct {
	serve       serveOptions
	configs     stringList
	merge       bool
	noWatch     bool
	redis       string
	redisMaster string
	redisClust  bool
	redisPass   string
	redisTLS    bool
	prefix      string
	instances   int
	fail        string
	mode        string
	algorithm   string
	timeout     time.Duration
	maxKeys     int
	shadow      bool
	noHeaders   bool
}

func (o *ratelimitOptions) register(fs *flag.FlagSet) {
	// The frame's flags that mean something for a gRPC listener; the
	// HTTP ones (TLS, h2c, header and body timeouts) are not offered.
	s := &o.serve
	fs.StringVar(&s.addr, "addr", defaultRatelimitAddr, "gRPC listener `host:port` for envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1")
	fs.StringVar(&s.adminAddr, "admin-addr", server.DefaultAdminAddr, "admin listener `host:port` for /livez, /readyz, /healthz, /metrics and /state; keep it private")
	fs.IntVar(&s.maxConns, "max-conns", 0, "most open connections on the gRPC listener (0: the file-descriptor limit minus a reserve)")
	fs.DurationVar(&s.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "on SIGINT/SIGTERM, wait this long for calls in progress (0: do not wait); a second signal stops at once")
	fs.DurationVar(&s.drainDelay, "drain-delay", defaultDrainDelay, "on SIGINT/SIGTERM, answer /readyz and grpc.health.v1 with not serving this long before the listener closes")
	s.log.register(fs)
	fs.BoolVar(&s.pprof, "pprof", false, "serve Go runtime profiles at /debug/pprof/ on the admin listener (loopback only)")
	fs.Var(&o.configs, "config", "rate limit configuration `PATH`: a YAML file in the reference server's format, or a directory of them;\nrepeatable. Reloaded on SIGHUP and when a file changes; a file that does not load is refused and the old configuration kept")
	fs.BoolVar(&o.merge, "merge-domains", false, "combine files that configure the same domain (default: refuse them)")
	fs.BoolVar(&o.noWatch, "no-watch", false, "reload only on SIGHUP, not when a file changes")
	fs.StringVar(&o.redis, "redis", "", "share the counters through Redis: a `URL` (redis://host:6379/0, rediss://...),\nor comma-separated host:port addresses of a cluster (or of sentinels, with --redis-master)")
	fs.StringVar(&o.redisMaster, "redis-master", "", "Sentinel: the master `name`; --redis then lists the sentinels")
	fs.BoolVar(&o.redisClust, "redis-cluster", false, "treat a single --redis address as a cluster seed")
	fs.StringVar(&o.redisPass, "redis-password", "", "password for the addresses of --redis (a URL carries its own); prefer SLUICE_REDIS_PASSWORD")
	fs.BoolVar(&o.redisTLS, "redis-tls", false, "TLS to the addresses of --redis (a rediss:// URL implies it)")
	fs.StringVar(&o.prefix, "redis-prefix", ratelimit.DefaultPrefix, "prefix of every Redis key")
	fs.IntVar(&o.instances, "instances", 1, "instances sharing the counters; while Redis is down each admits limit/instances (fail open)")
	fs.StringVar(&o.fail, "fail", "open", "default policy while Redis is slow or down: open (this instance's share) or closed (OVER_LIMIT);\na rule's fail key overrides it")
	fs.StringVar(&o.mode, "mode", "exact", "how gcra rules spend the shared bucket: exact (one Redis round trip per decision) or lease (small batches)")
	fs.StringVar(&o.algorithm, "algorithm", "gcra", "default algorithm: gcra (no window-edge double burst) or fixed_window (the reference server's counts);\na rule's algorithm key overrides it")
	fs.DurationVar(&o.timeout, "redis-timeout", ratelimit.DefaultTimeout, "longest wait for Redis before the fail policy decides")
	fs.IntVar(&o.maxKeys, "max-keys", ratelimit.DefaultMaxKeys, "bound of each rule's key table in this process")
	fs.BoolVar(&o.shadow, "shadow", false, "answer OK to everything while still counting (metrics show what would have been refused)")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "do not ask Envoy to add RateLimit-Policy, RateLimit and Retry-After to responses")
}

// validateFrame checks the listener flags ratelimit offers.
func (o *ratelimitOptions) validateFrame() error {
	s := &o.serve
	if err := errors.Join(checkAddr("addr", s.addr), checkAddr("admin-addr", s.adminAddr)); err != nil {
		return err
	}
	if s.addr == s.adminAddr && !strings.HasSuffix(s.addr, ":0") {
		return fmt.Errorf("--addr and --admin-addr are both %q; the admin listener needs its own port", s.addr)
	}
	if s.maxConns < 0 || s.maxConns > maxMaxConns {
		return fmt.Errorf("--max-conns %d: want 0 (derived from the file-descriptor limit) to %d", s.maxConns, maxMaxConns)
	}
	return errors.Join(checkDuration("shutdown-timeout", s.shutdownTimeout, 0, maxShutdownTimeout),
		checkDuration("drain-delay", s.drainDelay, 0, maxDrainDelay))
}

// redisOptions turns the Redis flags into go-redis options, or nil
// without --redis (internal/redisconf holds the rules).
func (o *ratelimitOptions) redisOptions() (*redis.UniversalOptions, error) {
	return redisconf.UniversalOptions(redisconf.Universal{
		Target: o.redis, Master: o.redisMaster, Cluster: o.redisClust, Password: o.redisPass, TLS: o.redisTLS,
	}, o.timeout)
}

func (o *ratelimitOptions) serviceConfig(logger *slog.Logger) (ratelimit.Config, error) {
	cfg := ratelimit.Config{
		Prefix: o.prefix, Instances: o.instances, Timeout: o.timeout, MaxKeys: o.maxKeys,
		ShadowMode: o.shadow, NoHeaders: o.noHeaders, Logger: logger,
	}
	var err error
	if o.instances < 1 || o.instances > 100_000 {
		return cfg, fmt.Errorf("--instances %d: want 1 to 100000", o.instances)
	}
	if err := checkDuration("redis-timeout", o.timeout, time.Millisecond, time.Minute); err != nil {
		return cfg, err
	}
	if o.maxKeys < 1 || o.maxKeys > 100_000_000 {
		return cfg, fmt.Errorf("--max-keys %d: want 1 to 100000000", o.maxKeys)
	}
	if o.prefix == "" {
		return cfg, errors.New("--redis-prefix must not be empty")
	}
	if cfg.Fail, err = ratelimit.ParseFailPolicy(o.fail); err != nil {
		return cfg, fmt.Errorf("--%v", err)
	}
	if cfg.Algorithm, err = ratelimit.ParseAlgorithm(o.algorithm); err != nil {
		return cfg, fmt.Errorf("--%v", err)
	}
	switch o.mode {
	case "exact":
	case "lease":
		cfg.Spend = redisquota.Lease
	default:
		return cfg, fmt.Errorf("--mode %q: want exact or lease", o.mode)
	}
	return cfg, nil
}

// runRatelimit runs `sluice ratelimit`: Envoy's rate limit service over
// sluice's quotas, with the admin listener of the other servers.
func runRatelimit(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("ratelimit", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice ratelimit --config PATH [flags]\n\n"+
		"Serve Envoy's rate limit service (envoy.service.ratelimit.v3, gRPC) with the reference server's\n"+
		"YAML configuration. Counters live in this process, or in Redis with --redis (shared by a fleet).\n"+
		"Health, metrics and state are on the admin listener; grpc.health.v1 is on the gRPC listener.\n\n"+serverExitStatus)
	var o ratelimitOptions
	o.register(fs)
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	fail := func(code int, err error) int {
		if code == exitUsage {
			return usageError(e, "ratelimit", err)
		}
		printError(e, "ratelimit", err)
		return code
	}
	if fs.NArg() > 0 {
		return fail(exitUsage, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if len(o.configs) == 0 {
		return fail(exitUsage, errors.New("--config PATH is required: a YAML file or a directory of them"))
	}
	if err := o.validateFrame(); err != nil {
		return fail(exitUsage, err)
	}
	logger, err := o.serve.log.logger(e.stderr)
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := o.serve.connConfig().Validate(); err != nil {
		return fail(exitUsage, fmt.Errorf("--max-conns %d: %v", o.serve.maxConns, err))
	}
	cfg, err := o.serviceConfig(logger)
	if err != nil {
		return fail(exitUsage, err)
	}
	ropts, err := o.redisOptions()
	if err != nil {
		return fail(exitUsage, err)
	}
	table, err := ratelimit.Load(o.configs, o.merge)
	if err != nil {
		return fail(exitUsage, err)
	}
	if ropts != nil {
		redisconf.SetLogger(logger)
		client := redis.NewUniversalClient(ropts)
		defer client.Close()
		cfg.Redis = client
	}
	svc, err := ratelimit.New(cfg, table)
	if err != nil {
		return fail(exitUsage, err)
	}

	g := grpc.NewServer(
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 24 * time.Hour, MaxConnectionAgeGrace: time.Hour}),
	)
	pb.RegisterRateLimitServiceServer(g, svc)
	hs := health.NewServer()
	hs.SetServingStatus(pb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)

	o.serve.warn(logger, -1)
	srv, err := server.Listen(ctx, server.Config{
		Addr:            o.serve.addr,
		AdminAddr:       o.serve.adminAddr,
		Main:            g,
		Collectors:      []prometheus.Collector{svc.Collector()},
		StateExtras:     map[string]func() any{"ratelimit": func() any { return svc.State() }},
		Conn:            o.serve.connConfig(),
		ShutdownTimeout: o.serve.serverShutdownTimeout(),
		DrainDelay:      o.serve.drainDelay,
		Logger:          logger,
		Pprof:           o.serve.pprof,
	})
	if err != nil {
		return listenFailed(e, "ratelimit", err, o.serve.listenAddrs()...)
	}

	// Reload on SIGHUP and on file changes, until the server stops.
	wctx, stopWatch := context.WithCancel(context.Background())
	reload := make(chan struct{}, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-hup:
				select {
				case reload <- struct{}{}:
				default:
				}
			case <-wctx.Done():
				return
			}
		}
	}()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if err := svc.Watch(wctx, o.configs, o.merge, !o.noWatch, reload); err != nil {
			logger.Error("cannot watch the configuration files; reloading on SIGHUP only", "err", err)
			_ = svc.Watch(wctx, o.configs, o.merge, false, reload)
		}
	}()
	// grpc.health.v1 says NOT_SERVING as soon as the drain begins, like
	// /readyz.
	go func() {
		select {
		case <-ctx.Done():
			hs.Shutdown()
		case <-wctx.Done():
		}
	}()
	code := serveUntilDone(ctx, e, "ratelimit", srv, logger, nil, nil)
	signal.Stop(hup)
	stopWatch()
	<-watched
	<-watchDone
	return code
}
