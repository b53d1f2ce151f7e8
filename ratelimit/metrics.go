package ratelimit

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/quota"
)

// Metric names the Service exports (see Collector). They are spelled,
// with their kinds, where every sluice family is: internal/metricname.
const (
	MetricDecisions         = metricname.RatelimitDecisions
	MetricDescriptors       = metricname.RatelimitDescriptors
	MetricFallbackDecisions = metricname.RatelimitFallbackDecisions
	MetricStoreErrors       = metricname.RatelimitStoreErrors
	MetricMode              = metricname.RatelimitMode
	MetricRedisSeconds      = metricname.RatelimitRedisSeconds
	MetricUnknownDomain     = metricname.RatelimitUnknownDomain
	MetricInvalid           = metricname.RatelimitInvalid
	MetricReloads           = metricname.RatelimitReloads
	MetricLastReload        = metricname.RatelimitLastReload
	MetricRules             = metricname.RatelimitRules
)

// redisSecondsBuckets spans a loopback round trip (tens of microseconds)
// to the default timeout and beyond.
var redisSecondsBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}

// redisHook times every Redis command and pipeline the Service's counters
// send.
type redisHook struct {
	hist prometheus.Histogram
}

func newRedisHook() *redisHook {
	return &redisHook{hist: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricRedisSeconds,
		Help:    "Time of each Redis command or pipeline the rate-limit counters sent, failures and timeouts included.",
		Buckets: redisSecondsBuckets,
	})}
}

func (h *redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.hist.Observe(time.Since(start).Seconds())
		return err
	}
}

func (h *redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.hist.Observe(time.Since(start).Seconds())
		return err
	}
}

var _ redis.Hook = (*redisHook)(nil)

// Collector exports the Service's counters. Labels are bounded: the
// domain (only configured domains; requests for others are counted
// without a label), the response code and the descriptor's result. Never
// a descriptor's key or value.
//
//	sluice_ratelimit_decisions_total{domain,code}           responses: code ok or over_limit
//	sluice_ratelimit_descriptors_total{domain,result}       descriptors: ok, over_limit, shadow
//	                                                        (over but not enforced), unlimited, unmatched
//	sluice_ratelimit_fallback_decisions_total{domain}       descriptor decisions made without Redis
//	sluice_ratelimit_store_errors_total{domain}             Redis calls that failed or timed out
//	sluice_ratelimit_mode{mode}                             1 for local, fleet or fallback
//	sluice_ratelimit_redis_seconds                          histogram of every Redis round trip
//	sluice_ratelimit_unknown_domain_total                   requests for a domain not configured
//	sluice_ratelimit_invalid_requests_total                 requests refused with INVALID_ARGUMENT
//	sluice_ratelimit_config_reloads_total{result}           ok or error
//	sluice_ratelimit_config_last_success_timestamp_seconds  when the configuration in use was loaded
//	sluice_ratelimit_rules{domain}                          rules configured
func (s *Service) Collector() prometheus.Collector { return (*collector)(s) }

type collector Service

var (
	descDecisions   = prometheus.NewDesc(MetricDecisions, "Rate-limit responses by domain and overall code.", []string{"domain", "code"}, nil)
	descDescriptors = prometheus.NewDesc(MetricDescriptors, "Rate-limit descriptors decided, by domain and result.", []string{"domain", "result"}, nil)
	descFallback    = prometheus.NewDesc(MetricFallbackDecisions, "Descriptor decisions made by the fail policy while Redis was unreachable.", []string{"domain"}, nil)
	descStoreErrors = prometheus.NewDesc(MetricStoreErrors, "Redis calls of the rate-limit counters that failed or timed out.", []string{"domain"}, nil)
	descMode        = prometheus.NewDesc(MetricMode, "1 for the mode the counters decide in: local, fleet, or fallback (some rule is deciding without Redis).", []string{"mode"}, nil)
	descUnknown     = prometheus.NewDesc(MetricUnknownDomain, "Rate-limit requests for a domain that is not configured (answered OK).", nil, nil)
	descInvalid     = prometheus.NewDesc(MetricInvalid, "Rate-limit requests refused as invalid.", nil, nil)
	descReloads     = prometheus.NewDesc(MetricReloads, "Configuration loads by result.", []string{"result"}, nil)
	descLastReload  = prometheus.NewDesc(MetricLastReload, "Unix time the configuration in use was loaded.", nil, nil)
	descRules       = prometheus.NewDesc(MetricRules, "Rules in the configuration in use, by domain.", []string{"domain"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDecisions, descDescriptors, descFallback, descStoreErrors, descMode, descUnknown, descInvalid, descReloads, descLastReload, descRules} {
		ch <- d
	}
	if c.hook != nil {
		c.hook.hist.Describe(ch)
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := (*Service)(c)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	l := s.cur.Load()
	sums := s.domainSums(l)
	names := make([]string, 0, len(sums))
	for d := range sums {
		names = append(names, d)
	}
	slices.Sort(names)
	s.mu.Lock()
	domains := make(map[string]*domainStats, len(s.domains))
	for d, ds := range s.domains {
		domains[d] = ds
	}
	s.mu.Unlock()
	for d, ds := range domains {
		counter(descDecisions, ds.ok.Load(), d, "ok")
		counter(descDecisions, ds.over.Load(), d, "over_limit")
		for r := range numResults {
			counter(descDescriptors, ds.descriptors[r].Load(), d, resultNames[r])
		}
	}
	mode := quota.ModeLocal
	if s.redisOn {
		mode = quota.ModeFleet
	}
	for _, d := range names {
		st := sums[d]
		counter(descFallback, st.FallbackDecisions, d)
		counter(descStoreErrors, st.StoreErrors, d)
		if st.Mode == quota.ModeFallback {
			mode = quota.ModeFallback
		}
	}
	for _, m := range []string{quota.ModeLocal, quota.ModeFleet, quota.ModeFallback} {
		v := 0.0
		if m == mode {
			v = 1
		}
		gauge(descMode, v, m)
	}
	counter(descUnknown, s.unknownDomain.Load())
	counter(descInvalid, s.invalid.Load())
	s.reloads.mu.Lock()
	ok, fail, last := s.reloads.ok, s.reloads.fail, s.reloads.lastOK
	s.reloads.mu.Unlock()
	counter(descReloads, ok, "ok")
	counter(descReloads, fail, "error")
	gauge(descLastReload, float64(last.UnixNano())/1e9)
	rules := map[string]int{}
	for _, r := range l.table.rules {
		rules[r.Domain]++
	}
	for _, d := range l.table.Domains() {
		gauge(descRules, float64(rules[d]), d)
	}
	if s.hook != nil {
		s.hook.hist.Collect(ch)
	}
}

// domainSums adds up the counters of every rule, per domain, with the
// counts of rules a reload dropped. Mode is fallback when any rule of the
// domain is deciding without Redis.
func (s *Service) domainSums(l *loaded) map[string]*quota.Stats {
	sums := map[string]*quota.Stats{}
	get := func(d string) *quota.Stats {
		st := sums[d]
		if st == nil {
			st = new(quota.Stats)
			sums[d] = st
		}
		return st
	}
	add := func(lim *limiter) {
		st, sum := lim.c.stats(), get(lim.domain)
		sum.Allowed += st.Allowed
		sum.Limited += st.Limited
		sum.RejectedStore += st.RejectedStore
		sum.FallbackDecisions += st.FallbackDecisions
		sum.StoreErrors += st.StoreErrors
		if st.Mode == quota.ModeFallback {
			sum.Mode = quota.ModeFallback
		}
	}
	seen := map[*limiter]bool{}
	for _, lim := range l.limiters {
		if !seen[lim] {
			seen[lim] = true
			add(lim)
		}
	}
	s.mu.Lock()
	overrides := make([]*limiter, 0, len(s.overrides))
	for _, lim := range s.overrides {
		overrides = append(overrides, lim)
	}
	for d, r := range s.retired {
		sum := get(d)
		sum.Allowed += r.Allowed
		sum.Limited += r.Limited
		sum.RejectedStore += r.RejectedStore
		sum.FallbackDecisions += r.FallbackDecisions
		sum.StoreErrors += r.StoreErrors
	}
	s.mu.Unlock()
	for _, lim := range overrides {
		add(lim)
	}
	return sums
}
