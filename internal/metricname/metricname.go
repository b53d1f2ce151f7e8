// Package metricname is the one place sluice spells its Prometheus metric
// names. promsluice, package server and package ratelimit export the
// families under these names; `sluice load --metrics` and `sluice doctor` read them back. A name
// changed here changes on both sides at once, so a reader can never look
// for a family the exporter stopped writing.
//
// The package imports nothing, not even the standard library: load, which
// must stay independent of what it measures, can use it without importing
// any of sluice's public packages.
//
// Each family also carries its kind (counter, gauge or histogram), which is
// what the readers check a scraped family against (see internal/promtext),
// and which promsluice's tests check against a live registry.
package metricname

// Kind is a metric family's Prometheus type.
type Kind uint8

// The kinds sluice exports. The zero Kind is no kind: a Family always has
// one of these.
const (
	Counter Kind = iota + 1
	Gauge
	Histogram
)

// String returns the kind as the exposition format's TYPE line writes it.
func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "unknown"
}

// Family is a metric family's name and kind.
type Family struct {
	Name string
	Kind Kind
}

// Admission gates (promsluice.GateMetrics). Labels in the comments.
const (
	AdmissionOffered   = "sluice_admission_offered_total"   // {gate,kind}
	AdmissionAdmitted  = "sluice_admission_admitted_total"  // {gate,kind}
	AdmissionRejected  = "sluice_admission_rejected_total"  // {gate,kind,reason}
	AdmissionCompleted = "sluice_admission_completed_total" // {gate,kind,outcome}
	AdmissionInflight  = "sluice_admission_inflight"        // {gate}
	AdmissionWaiting   = "sluice_admission_waiting"         // {gate}
	AdmissionCapacity  = "sluice_admission_capacity"        // {gate}
	AdmissionPeakInUse = "sluice_admission_peak_in_use"     // {gate}
	AdmissionMisuse    = "sluice_admission_misuse_total"    // {gate}
	// AdmissionOldestWait is the oldest queued caller's age, in seconds.
	AdmissionOldestWait = "sluice_admission_oldest_wait_seconds" // {gate}
	// AdmissionWait and AdmissionHold are histograms, in seconds.
	AdmissionWait = "sluice_admission_wait_seconds" // {gate,kind}
	AdmissionHold = "sluice_admission_hold_seconds" // {gate,kind}
	// The per-class families appear once a gate sees a class other than
	// the default.
	AdmissionClassAdmitted = "sluice_admission_class_admitted_total" // {gate,class}
	AdmissionClassRejected = "sluice_admission_class_rejected_total" // {gate,class,reason}
	AdmissionClassInUse    = "sluice_admission_class_in_use"         // {gate,class}
	AdmissionClassWaiting  = "sluice_admission_class_waiting"        // {gate,class}
)

// Circuit breakers (promsluice.BreakerMetrics).
const (
	BreakerState       = "sluice_breaker_state"             // {breaker,state}
	BreakerTransitions = "sluice_breaker_transitions_total" // {breaker,from,to}
	BreakerAllowed     = "sluice_breaker_allowed_total"     // {breaker}
	BreakerRejected    = "sluice_breaker_rejected_total"    // {breaker}
)

// Response caches (promsluice.CacheMetrics).
const (
	CacheHits      = "sluice_cache_hits_total"
	CacheMisses    = "sluice_cache_misses_total"
	CacheEvictions = "sluice_cache_evictions_total"
	CacheEntries   = "sluice_cache_entries"
	CacheBytes     = "sluice_cache_bytes"
)

// Connection limits (promsluice.ConnMetrics).
const (
	ConnectionsOpen                = "sluice_connections_open"
	ConnectionsMax                 = "sluice_connections_max"
	ConnectionsRefusing            = "sluice_connections_refusing"
	ConnectionsAccepted            = "sluice_connections_accepted_total"
	ConnectionsRejected            = "sluice_connections_rejected_total" // {reason}
	ConnectionsBusyWriteErrors     = "sluice_connections_busy_write_errors_total"
	ConnectionsClosedIdle          = "sluice_connections_closed_idle_total"
	ConnectionsClosedHeaderTimeout = "sluice_connections_closed_header_timeout_total"
	AcceptErrors                   = "sluice_accept_errors_total" // {kind}
	AcceptBackoffs                 = "sluice_accept_backoffs_total"
)

// Adaptive limits (promsluice.LimitMetrics).
const (
	LimitCapacity   = "sluice_limit_capacity"           // {gate,law}
	LimitLatency    = "sluice_limit_latency_seconds"    // {gate,law}
	LimitBaseline   = "sluice_limit_baseline_seconds"   // {gate,law}
	LimitCeiling    = "sluice_limit_ceiling_seconds"    // {gate}
	LimitTail       = "sluice_limit_tail_seconds"       // {gate}
	LimitQueueWait  = "sluice_limit_queue_wait_seconds" // {gate}
	LimitBudget     = "sluice_limit_budget_seconds"     // {gate}
	LimitOverload   = "sluice_limit_overload"           // {gate}
	LimitEpisode    = "sluice_limit_episode"            // {gate}
	LimitDecisions  = "sluice_limit_decisions_total"    // {gate,decision}
	LimitWindows    = "sluice_limit_windows_total"      // {gate}
	LimitRampActive = "sluice_limit_ramp_active"        // {gate}
	LimitRampLevel  = "sluice_limit_ramp_level"         // {gate}
	LimitRampSteps  = "sluice_limit_ramp_steps"         // {gate}
	LimitRampTarget = "sluice_limit_ramp_target"        // {gate}
)

// Bounded executors (promsluice.PoolMetrics); every family has a pool label.
const (
	PoolQueueWait     = "sluice_pool_queue_wait_seconds" // histogram
	PoolRun           = "sluice_pool_run_seconds"        // histogram
	PoolOffered       = "sluice_pool_offered_total"
	PoolAdmitted      = "sluice_pool_admitted_total"
	PoolRejected      = "sluice_pool_rejected_total"  // {pool,reason}
	PoolCompleted     = "sluice_pool_completed_total" // {pool,outcome}
	PoolDropped       = "sluice_pool_dropped_total"   // {pool,drop}
	PoolCallerRuns    = "sluice_pool_caller_runs_total"
	PoolWorkers       = "sluice_pool_workers"
	PoolWorkersMax    = "sluice_pool_workers_max"
	PoolRunning       = "sluice_pool_running"
	PoolQueued        = "sluice_pool_queued"
	PoolQueueCapacity = "sluice_pool_queue_capacity"
	PoolOldestQueued  = "sluice_pool_oldest_queued_seconds"
)

// Per-key quotas (promsluice.QuotaMetrics); every family has a quota label.
const (
	QuotaAllowed           = "sluice_quota_allowed_total"
	QuotaLimited           = "sluice_quota_limited_total"
	QuotaRejected          = "sluice_quota_rejected_total" // {quota,reason}
	QuotaKeys              = "sluice_quota_keys"
	QuotaMaxKeys           = "sluice_quota_max_keys"
	QuotaEvictions         = "sluice_quota_evictions_total" // {quota,cause}
	QuotaMode              = "sluice_quota_mode"            // {quota,mode}
	QuotaFallbackDecisions = "sluice_quota_fallback_decisions_total"
	QuotaStoreErrors       = "sluice_quota_store_errors_total"
)

// Retry policies (promsluice.RetryMetrics); every family has a policy label.
const (
	RetryAttempts        = "sluice_retry_attempts_total"
	RetryRetries         = "sluice_retry_retries_total"
	RetryBudgetExhausted = "sluice_retry_budget_exhausted_total"
	RetryThrottled       = "sluice_retry_throttled_total"
	RetryRetryAfter      = "sluice_retry_retry_after_total" // {policy,decision}
	RetryDeadlineExpired = "sluice_retry_deadline_expired_total"
	RetryBreakerOpen     = "sluice_retry_breaker_open_total"
	RetryNoRetrySignal   = "sluice_retry_no_retry_signal_total"
)

// The rate limit service (package ratelimit's Service.Collector).
const (
	RatelimitDecisions         = "sluice_ratelimit_decisions_total"          // {domain,code}
	RatelimitDescriptors       = "sluice_ratelimit_descriptors_total"        // {domain,result}
	RatelimitFallbackDecisions = "sluice_ratelimit_fallback_decisions_total" // {domain}
	RatelimitStoreErrors       = "sluice_ratelimit_store_errors_total"       // {domain}
	RatelimitMode              = "sluice_ratelimit_mode"                     // {mode}
	RatelimitRedisSeconds      = "sluice_ratelimit_redis_seconds"            // histogram
	RatelimitUnknownDomain     = "sluice_ratelimit_unknown_domain_total"
	RatelimitInvalid           = "sluice_ratelimit_invalid_requests_total"
	RatelimitReloads           = "sluice_ratelimit_config_reloads_total" // {result}
	RatelimitLastReload        = "sluice_ratelimit_config_last_success_timestamp_seconds"
	RatelimitRules             = "sluice_ratelimit_rules" // {domain}
)

// Connections closed by package server's send and body timeouts.
const (
	ConnectionsClosedSendTimeout = "sluice_connections_closed_send_timeout_total"
	ConnectionsClosedBodyTimeout = "sluice_connections_closed_body_timeout_total"
)

// ProcessCPUSeconds is client_golang's process collector's CPU counter,
// which package server registers and `sluice load` reads to price each
// answered request.
const ProcessCPUSeconds = "process_cpu_seconds_total"

// Promsluice returns every family promsluice's collectors export, in a
// fresh slice.
func Promsluice() []Family {
	c, g, h := Counter, Gauge, Histogram
	return []Family{
		{AdmissionOffered, c}, {AdmissionAdmitted, c}, {AdmissionRejected, c}, {AdmissionCompleted, c},
		{AdmissionInflight, g}, {AdmissionWaiting, g}, {AdmissionCapacity, g}, {AdmissionPeakInUse, g},
		{AdmissionMisuse, c}, {AdmissionOldestWait, g}, {AdmissionWait, h}, {AdmissionHold, h},
		{AdmissionClassAdmitted, c}, {AdmissionClassRejected, c}, {AdmissionClassInUse, g}, {AdmissionClassWaiting, g},

		{BreakerState, g}, {BreakerTransitions, c}, {BreakerAllowed, c}, {BreakerRejected, c},

		{CacheHits, c}, {CacheMisses, c}, {CacheEvictions, c}, {CacheEntries, g}, {CacheBytes, g},

		{ConnectionsOpen, g}, {ConnectionsMax, g}, {ConnectionsRefusing, g}, {ConnectionsAccepted, c},
		{ConnectionsRejected, c}, {ConnectionsBusyWriteErrors, c}, {ConnectionsClosedIdle, c},
		{ConnectionsClosedHeaderTimeout, c}, {AcceptErrors, c}, {AcceptBackoffs, c},

		{LimitCapacity, g}, {LimitLatency, g}, {LimitBaseline, g}, {LimitCeiling, g}, {LimitTail, g},
		{LimitQueueWait, g}, {LimitBudget, g}, {LimitOverload, g}, {LimitEpisode, g}, {LimitDecisions, c},
		{LimitWindows, c}, {LimitRampActive, g}, {LimitRampLevel, g}, {LimitRampSteps, g}, {LimitRampTarget, g},

		{PoolQueueWait, h}, {PoolRun, h}, {PoolOffered, c}, {PoolAdmitted, c}, {PoolRejected, c},
		{PoolCompleted, c}, {PoolDropped, c}, {PoolCallerRuns, c}, {PoolWorkers, g}, {PoolWorkersMax, g},
		{PoolRunning, g}, {PoolQueued, g}, {PoolQueueCapacity, g}, {PoolOldestQueued, g},

		{QuotaAllowed, c}, {QuotaLimited, c}, {QuotaRejected, c}, {QuotaKeys, g}, {QuotaMaxKeys, g},
		{QuotaEvictions, c}, {QuotaMode, g}, {QuotaFallbackDecisions, c}, {QuotaStoreErrors, c},

		{RetryAttempts, c}, {RetryRetries, c}, {RetryBudgetExhausted, c}, {RetryThrottled, c},
		{RetryRetryAfter, c}, {RetryDeadlineExpired, c}, {RetryBreakerOpen, c}, {RetryNoRetrySignal, c},
	}
}

// Server returns the families package server exports beside promsluice's,
// in a fresh slice.
func Server() []Family {
	return []Family{{ConnectionsClosedSendTimeout, Counter}, {ConnectionsClosedBodyTimeout, Counter}}
}

// Ratelimit returns the families package ratelimit's Service exports, in
// a fresh slice.
func Ratelimit() []Family {
	c, g, h := Counter, Gauge, Histogram
	return []Family{
		{RatelimitDecisions, c}, {RatelimitDescriptors, c}, {RatelimitFallbackDecisions, c}, {RatelimitStoreErrors, c},
		{RatelimitMode, g}, {RatelimitRedisSeconds, h}, {RatelimitUnknownDomain, c}, {RatelimitInvalid, c},
		{RatelimitReloads, c}, {RatelimitLastReload, g}, {RatelimitRules, g},
	}
}

// NotExported returns the families sluice's tools read but that no sluice
// collector exports: the process CPU counter (client_golang's). A fresh
// slice.
func NotExported() []Family {
	return []Family{{ProcessCPUSeconds, Counter}}
}

// Families returns the listed families of the given names, kinds and all,
// in order: a reader names what it reads and takes each kind from the
// lists above. A name no list has comes back with the zero Kind, which
// the readers treat as no family at all.
func Families(names ...string) []Family {
	kinds := map[string]Kind{}
	for _, list := range [][]Family{Promsluice(), Server(), Ratelimit(), NotExported()} {
		for _, f := range list {
			kinds[f.Name] = f.Kind
		}
	}
	out := make([]Family, len(names))
	for i, n := range names {
		out[i] = Family{Name: n, Kind: kinds[n]}
	}
	return out
}
