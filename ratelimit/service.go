package ratelimit

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// Defaults used for zero Config fields.
const (
	DefaultPrefix  = "sluice:rls:"
	DefaultTimeout = redisquota.DefaultTimeout
	DefaultMaxKeys = quota.DefaultMaxKeys
	// MaxDescriptors and MaxEntries bound a request: more is refused
	// with INVALID_ARGUMENT rather than decided at any cost.
	MaxDescriptors = 256
	MaxEntries     = 64
	// maxOverrides bounds the limiters made for limits that requests
	// carry themselves (descriptor.limit): one per distinct limit.
	maxOverrides = 1024
)

// Config configures a Service. The zero Config is valid: counters in this
// process, GCRA, fail open, one instance.
type Config struct {
	// Redis, if not nil, holds the counters so that every instance
	// using the same Redis and Prefix shares them (fleet mode). The
	// Service adds a hook to it that times every command for metrics,
	// and never closes it. Nil means counters in this process only.
	Redis redis.UniversalClient
	// Prefix is put before every Redis key. Empty means DefaultPrefix.
	Prefix string
	// Spend is how GCRA rules spend the shared bucket in fleet mode:
	// redisquota.Exact (a round trip per decision) or redisquota.Lease
	// (small batches of tokens spent locally). Fixed-window rules always
	// ask Redis.
	Spend redisquota.Mode
	// Algorithm is the default for rules that do not name one; zero
	// means GCRA.
	Algorithm Algorithm
	// Fail is the default fail policy; zero means FailOpen.
	Fail FailPolicy
	// Instances is how many instances share the counters, for FailOpen's
	// share. Zero means 1; negative is invalid.
	Instances int
	// Timeout bounds each Redis call; past it the fail policy decides.
	// Zero means DefaultTimeout; negative is invalid.
	Timeout time.Duration
	// MaxKeys bounds each rule's key table in this process. Zero means
	// DefaultMaxKeys; negative is invalid.
	MaxKeys int
	// ShadowMode answers OK to every request, whatever the counters say
	// (they still count, and metrics show what would have been refused).
	ShadowMode bool
	// NoHeaders turns off the RateLimit-Policy, RateLimit and Retry-After
	// headers the Service asks Envoy to add to the response.
	NoHeaders bool
	// Logger receives reload and breaker records. Nil means silent.
	Logger *slog.Logger
	// Now is the clock of in-process counters; nil means time.Now.
	Now func() time.Time
}

// Service answers envoy.service.ratelimit.v3.RateLimitService. It is safe
// for concurrent use; SetTable swaps the configuration while requests are
// decided. Register it with pb.RegisterRateLimitServiceServer.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	cfg     Config
	redisOn bool
	hook    *redisHook

	cur atomic.Pointer[loaded]

	mu        sync.Mutex // guards registry, overrides, domains; lock order: mu before a counter's own locks
	registry  map[string]*limiter
	overrides map[string]*limiter
	domains   map[string]*domainStats
	retired   map[string]*quota.Stats // counts of limiters dropped by a reload, by domain

	unknownDomain, invalid atomic.Uint64
	reloads                loadStats
}

// limiter is a rule's counter, kept across reloads while the rule's
// parameters stay the same.
type limiter struct {
	params string
	name   string // the Redis name: a hash of the rule's key
	c      counter
	domain string
}

type loaded struct {
	table    *Table
	limiters map[*Rule]*limiter
	domains  map[string]*domainStats
	at       time.Time
}

// Results of one descriptor, for metrics.
const (
	resultOK = iota
	resultOver
	resultShadow
	resultUnlimited
	resultUnmatched
	numResults
)

var resultNames = [numResults]string{"ok", "over_limit", "shadow", "unlimited", "unmatched"}

type domainStats struct {
	ok, over    atomic.Uint64
	descriptors [numResults]atomic.Uint64
}

type loadStats struct {
	mu        sync.Mutex
	ok, fail  uint64
	lastOK    time.Time
	lastError string
}

// New returns a Service deciding with t, or an error wrapping
// ErrInvalidConfig.
func New(cfg Config, t *Table) (*Service, error) {
	if cfg.Instances < 0 || cfg.Timeout < 0 || cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("%w: Instances, Timeout and MaxKeys must not be negative", ErrInvalidConfig)
	}
	if cfg.Spend > redisquota.Lease || cfg.Algorithm > FixedWindow || cfg.Fail > FailClosed {
		return nil, fmt.Errorf("%w: unknown Spend, Algorithm or Fail", ErrInvalidConfig)
	}
	if t == nil {
		return nil, fmt.Errorf("%w: no table", ErrInvalidConfig)
	}
	cfg.Prefix = cmp(cfg.Prefix, DefaultPrefix)
	cfg.Instances = max(cfg.Instances, 1)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Algorithm == AlgorithmDefault {
		cfg.Algorithm = GCRA
	}
	if cfg.Fail == FailDefault {
		cfg.Fail = FailOpen
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{
		cfg: cfg, redisOn: cfg.Redis != nil,
		registry: map[string]*limiter{}, overrides: map[string]*limiter{},
		domains: map[string]*domainStats{}, retired: map[string]*quota.Stats{},
	}
	if s.redisOn {
		s.hook = newRedisHook()
		cfg.Redis.AddHook(s.hook)
	}
	if err := s.SetTable(t); err != nil {
		return nil, err
	}
	return s, nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// SetTable makes t the configuration. Rules whose domain, path and
// parameters did not change keep their counters. On error (a rule the
// backends cannot build) the previous table stays.
func (s *Service) SetTable(t *Table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &loaded{table: t, limiters: make(map[*Rule]*limiter, len(t.rules)), domains: map[string]*domainStats{}, at: s.cfg.Now()}
	next := make(map[string]*limiter, len(t.rules))
	for _, r := range t.rules {
		if r.Unlimited {
			continue
		}
		alg, fail := s.resolve(r)
		k, p := r.key(), r.params(alg, fail)
		lim := s.registry[k]
		if lim == nil || lim.params != p {
			var err error
			if lim, err = s.build(r, alg, fail, k, p); err != nil {
				s.reloads.failed(err)
				return err
			}
		}
		next[k] = lim
		l.limiters[r] = lim
	}
	for _, d := range t.Domains() {
		ds := s.domains[d]
		if ds == nil {
			ds = new(domainStats)
			s.domains[d] = ds
		}
		l.domains[d] = ds
	}
	for k, old := range s.registry {
		if next[k] != old {
			s.retire(old)
		}
	}
	s.registry = next
	s.cur.Store(l)
	s.reloads.succeeded(l.at)
	if s.cfg.Logger != nil {
		for _, w := range t.Warnings {
			s.cfg.Logger.Warn("rate limit configuration: key ignored", "where", w)
		}
		s.cfg.Logger.Info("rate limit configuration loaded", "files", strings.Join(t.Files, ","),
			"domains", len(t.domains), "rules", len(t.rules))
	}
	return nil
}

// Reject records a configuration that failed to load (the table in use
// stays): it is counted in metrics and reported by /state.
func (s *Service) Reject(err error) {
	s.reloads.failed(err)
	if s.cfg.Logger != nil {
		s.cfg.Logger.Error("rate limit configuration refused; keeping the one in use", "err", err)
	}
}

func (ls *loadStats) failed(err error) {
	ls.mu.Lock()
	ls.fail++
	ls.lastError = err.Error()
	ls.mu.Unlock()
}

func (ls *loadStats) succeeded(at time.Time) {
	ls.mu.Lock()
	ls.ok++
	ls.lastOK = at
	ls.lastError = ""
	ls.mu.Unlock()
}

// retire adds a dropped limiter's counts to its domain's retired sums, so
// counters exported per domain never go backwards (s.mu held).
func (s *Service) retire(l *limiter) {
	st := l.c.stats()
	r := s.retired[l.domain]
	if r == nil {
		r = new(quota.Stats)
		s.retired[l.domain] = r
	}
	r.Allowed += st.Allowed
	r.Limited += st.Limited
	r.RejectedStore += st.RejectedStore
	r.FallbackDecisions += st.FallbackDecisions
	r.StoreErrors += st.StoreErrors
}

func (s *Service) resolve(r *Rule) (Algorithm, FailPolicy) {
	alg, fail := r.Algorithm, r.Fail
	if alg == AlgorithmDefault {
		alg = s.cfg.Algorithm
	}
	if fail == FailDefault {
		fail = s.cfg.Fail
	}
	return alg, fail
}

// build makes the counter of one rule.
func (s *Service) build(r *Rule, alg Algorithm, fail FailPolicy, key, params string) (*limiter, error) {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(params))
	name := "r" + strconv.FormatUint(h.Sum64(), 16)
	lim := &limiter{params: params, name: name, domain: r.Domain}
	unit := r.Unit.Duration()
	if r.RequestsPerUnit == 0 {
		lim.c = &zeroCounter{unit: unit, now: s.cfg.Now}
		return lim, nil
	}
	if alg == FixedWindow {
		if !s.redisOn {
			lim.c = newFixedLocal(uint64(r.RequestsPerUnit), unit, s.cfg.MaxKeys, s.cfg.Now)
			return lim, nil
		}
		br, err := breaker.New(breaker.Config{
			Name: "ratelimit-redis", Window: time.Second, MinCalls: 3, FailureRatio: 0.5,
			OpenFor: time.Second, Probes: 1, Logger: s.cfg.Logger,
		})
		if err != nil {
			return nil, err
		}
		c := &fixedRedis{
			client: s.cfg.Redis, prefix: s.cfg.Prefix + name + ":",
			windowUs: strconv.FormatInt(unit.Microseconds(), 10), timeout: s.cfg.Timeout, br: br,
			judge: newFixedLocal(uint64(r.RequestsPerUnit), unit, 1, s.cfg.Now), fail: fail, inst: s.cfg.Instances,
		}
		if fail == FailOpen {
			c.share = newFixedLocal(uint64(r.RequestsPerUnit)/uint64(s.cfg.Instances), unit, s.cfg.MaxKeys, s.cfg.Now)
		}
		lim.c = c
		return lim, nil
	}
	rate := float64(r.RequestsPerUnit) / unit.Seconds()
	burst := r.Burst
	if burst == 0 {
		burst = int(min(r.RequestsPerUnit, 1_000_000_000))
	}
	gc := &gcraCounter{burst: burst, refill: time.Duration(float64(burst) / rate * float64(time.Second))}
	if !s.redisOn {
		q, err := quota.New(quota.Config{Name: name, Rate: rate, Burst: burst, MaxKeys: s.cfg.MaxKeys})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, r.Path, err)
		}
		gc.lim, gc.read = q, q.Stats
		lim.c = gc
		return lim, nil
	}
	fb := redisquota.FailOpen
	if fail == FailClosed {
		fb = redisquota.FailClosed
	}
	q, err := redisquota.New(redisquota.Config{
		Name: name, Rate: rate, Burst: burst, MaxKeys: s.cfg.MaxKeys, Client: s.cfg.Redis,
		Prefix: s.cfg.Prefix, Mode: s.cfg.Spend, Timeout: s.cfg.Timeout, Fallback: fb,
		Instances: s.cfg.Instances, Logger: s.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, r.Path, err)
	}
	gc.lim, gc.read, gc.state = q, q.Stats, redisquotaFleet(q, s.cfg.Instances)
	lim.c = gc
	return lim, nil
}

// Table returns the configuration in use.
func (s *Service) Table() *Table { return s.cur.Load().table }

// job is one descriptor to decide.
type job struct {
	rule *Rule
	lim  *limiter
	key  string
	hits uint64
	v    verdict
	err  error
}

// ShouldRateLimit decides a request: every descriptor that matches a
// rule is counted, and the overall code is OVER_LIMIT when any of them is
// over its limit (shadow-mode and quota-mode rules excepted).
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if err := checkRequest(req); err != nil {
		s.invalid.Add(1)
		return nil, err
	}
	l := s.cur.Load()
	ds := l.domains[req.Domain]
	if ds == nil {
		// The reference server answers OK for an unknown domain.
		s.unknownDomain.Add(1)
		st := make([]*pb.RateLimitResponse_DescriptorStatus, len(req.Descriptors))
		for i := range st {
			st[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		}
		return &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: st}, nil
	}
	jobs := make([]job, len(req.Descriptors))
	var replacing map[string]bool
	for i, d := range req.Descriptors {
		j := &jobs[i]
		var m Match
		if lo := d.GetLimit(); lo != nil {
			r, lim, err := s.override(req.Domain, lo)
			if err != nil {
				s.invalid.Add(1)
				return nil, err
			}
			m, j.lim = Match{Rule: r}, lim
		} else if mm, ok := l.table.Lookup(req.Domain, entries(d)); ok {
			m, j.lim = mm, l.limiters[mm.Rule]
		}
		j.rule = m.Rule
		if j.rule == nil {
			continue
		}
		for _, name := range j.rule.Replaces {
			if replacing == nil {
				replacing = map[string]bool{}
			}
			replacing[name] = true
		}
		j.hits = hitsOf(req, d)
		if j.lim != nil {
			j.key = counterKey(d, m.shared)
		}
	}
	if replacing != nil {
		for i := range jobs {
			if r := jobs[i].rule; r != nil && r.Name != "" && replacing[r.Name] {
				jobs[i] = job{}
			}
		}
	}
	if err := s.decide(ctx, jobs); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return s.respond(ds, jobs), nil
}

// decide runs the counters: one at a time in this process, at once when
// several descriptors each need a Redis round trip.
func (s *Service) decide(ctx context.Context, jobs []job) error {
	n := 0
	for i := range jobs {
		if jobs[i].lim != nil {
			n++
		}
	}
	if n > 1 && s.redisOn {
		var wg sync.WaitGroup
		for i := range jobs {
			if j := &jobs[i]; j.lim != nil {
				wg.Go(func() { j.v, j.err = j.lim.c.hit(ctx, j.key, j.hits) })
			}
		}
		wg.Wait()
	} else {
		for i := range jobs {
			if j := &jobs[i]; j.lim != nil {
				j.v, j.err = j.lim.c.hit(ctx, j.key, j.hits)
			}
		}
	}
	for i := range jobs {
		if jobs[i].err != nil {
			return jobs[i].err
		}
	}
	return nil
}

func (s *Service) respond(ds *domainStats, jobs []job) *pb.RateLimitResponse {
	resp := &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(jobs))}
	over := false
	var retry time.Duration
	var policy, remaining []string
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.rule == nil:
			resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
			ds.descriptors[resultUnmatched].Add(1)
			continue
		case j.rule.Unlimited:
			resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			ds.descriptors[resultUnlimited].Add(1)
			continue
		}
		limit := &pb.RateLimitResponse_RateLimit{
			Name: j.rule.Name, RequestsPerUnit: j.rule.RequestsPerUnit,
			Unit: pb.RateLimitResponse_RateLimit_Unit(j.rule.Unit),
		}
		st := &pb.RateLimitResponse_DescriptorStatus{
			Code: pb.RateLimitResponse_OK, CurrentLimit: limit,
			LimitRemaining:     uint32(min(j.v.remaining, math.MaxUint32)),
			DurationUntilReset: durationpb.New(roundUpSecond(j.v.reset)),
		}
		result := resultOK
		if j.v.over {
			st.LimitRemaining = 0
			switch {
			case j.rule.ShadowMode:
				result = resultShadow
			case j.rule.QuotaMode:
				// Reported, not enforced; the reference server leaves
				// the reset out of such a status.
				st.DurationUntilReset = nil
				result = resultShadow
			default:
				st.Code = pb.RateLimitResponse_OVER_LIMIT
				over = true
				retry = max(retry, j.v.retry)
				result = resultOver
			}
		}
		ds.descriptors[result].Add(1)
		resp.Statuses[i] = st
		if !s.cfg.NoHeaders {
			p, r := headerMembers(j.rule, st)
			policy, remaining = append(policy, p), append(remaining, r)
		}
	}
	if over && !s.cfg.ShadowMode {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		ds.over.Add(1)
	} else {
		resp.OverallCode = pb.RateLimitResponse_OK
		ds.ok.Add(1)
	}
	if len(policy) > 0 {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: "RateLimit-Policy", Value: strings.Join(policy, ", ")},
			{Key: "RateLimit", Value: strings.Join(remaining, ", ")},
		}
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
				&corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(max(1, ceilSeconds(retry)), 10)})
		}
	}
	return resp
}

// headerMembers are a rule's members of the RateLimit-Policy and RateLimit
// headers (IETF httpapi rate-limit headers draft): the limit per window
// of the rule's unit, and what is left with the seconds until it resets.
func headerMembers(r *Rule, st *pb.RateLimitResponse_DescriptorStatus) (policy, remaining string) {
	name := sfString(cmp(r.Name, r.Path))
	policy = name + ";q=" + strconv.FormatUint(uint64(r.RequestsPerUnit), 10) + ";w=" + strconv.FormatInt(r.Unit.Seconds(), 10)
	t := int64(0)
	if d := st.GetDurationUntilReset(); d != nil {
		t = d.GetSeconds()
	}
	remaining = name + ";r=" + strconv.FormatUint(uint64(st.LimitRemaining), 10) + ";t=" + strconv.FormatInt(t, 10)
	return policy, remaining
}

// sfString quotes s as a structured-field string: printable ASCII only,
// '"' and '\' escaped; anything else becomes '_'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// roundUpSecond rounds a reset up to whole seconds, as the reference
// server reports it.
func roundUpSecond(d time.Duration) time.Duration {
	return time.Duration(ceilSeconds(d)) * time.Second
}

func checkRequest(req *pb.RateLimitRequest) error {
	switch {
	case req.GetDomain() == "":
		return status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.Descriptors) > MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d", len(req.Descriptors), MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		if d == nil {
			return status.Errorf(codes.InvalidArgument, "descriptor %d is empty", i)
		}
		if len(d.Entries) > MaxEntries {
			return status.Errorf(codes.InvalidArgument, "descriptor %d has %d entries: at most %d", i, len(d.Entries), MaxEntries)
		}
	}
	return nil
}

func entries(d *rlv3.RateLimitDescriptor) []Entry {
	es := make([]Entry, len(d.Entries))
	for i, e := range d.Entries {
		es[i] = Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	return es
}

// hitsOf is a descriptor's hits: its own hits_addend when set (zero
// included: a check), else the request's, at least 1.
func hitsOf(req *pb.RateLimitRequest, d *rlv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return uint64(max(1, req.GetHitsAddend()))
}

// counterKey encodes a descriptor's entries into the key its rule counts
// under, each length-prefixed so that no two descriptors share a key by
// accident; shared[i], when set, stands for entry i's value.
func counterKey(d *rlv3.RateLimitDescriptor, shared []string) string {
	var b strings.Builder
	for i, e := range d.Entries {
		v := e.GetValue()
		if i < len(shared) && shared[i] != "" {
			v = shared[i]
		}
		b.WriteString(strconv.Itoa(len(e.GetKey())))
		b.WriteByte(':')
		b.WriteString(e.GetKey())
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// override returns the rule and limiter for a limit a descriptor carries
// itself: one limiter per distinct limit, so their number stays bounded.
func (s *Service) override(domain string, lo *rlv3.RateLimitDescriptor_RateLimitOverride) (*Rule, *limiter, error) {
	u := Unit(lo.GetUnit())
	if u.Seconds() == 0 {
		return nil, nil, status.Errorf(codes.InvalidArgument, "descriptor limit: unit %v is not one of SECOND to YEAR", lo.GetUnit())
	}
	r := &Rule{Domain: domain, Path: domain + ".(request)", RequestsPerUnit: lo.GetRequestsPerUnit(), Unit: u}
	alg, fail := s.resolve(r)
	k, p := "override\x00"+domain+"\x00"+r.params(alg, fail), r.params(alg, fail)
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := s.overrides[k]
	if lim == nil {
		if len(s.overrides) >= maxOverrides {
			return nil, nil, status.Errorf(codes.ResourceExhausted, "more than %d distinct limits carried by requests", maxOverrides)
		}
		var err error
		if lim, err = s.build(r, alg, fail, k, p); err != nil {
			return nil, nil, status.Error(codes.InvalidArgument, err.Error())
		}
		s.overrides[k] = lim
	}
	return r, lim, nil
}
