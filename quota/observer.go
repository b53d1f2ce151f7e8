package quota

import (
	"time"

	"github.com/sluicehq/sluice/admit"
)

// Modes a quota decides in, as Stats.Mode reports them.
const (
	ModeLocal    = "local"    // a local Quota: this process's buckets only
	ModeFleet    = "fleet"    // a fleet quota deciding with its shared store
	ModeFallback = "fallback" // a fleet quota whose store is unreachable, deciding by its fallback
)

// Stats is a quota's counters, for metrics and /state. Counters only grow.
type Stats struct {
	Quota    string `json:"quota"`
	Mode     string `json:"mode"`
	WhenFull string `json:"when_full"`
	// Allowed and Limited count decisions: admitted, and rejected with
	// reason rate.
	Allowed uint64 `json:"allowed"`
	Limited uint64 `json:"limited"`
	// RejectedFull counts new keys rejected because the table was full
	// (RefuseNew); RejectedStore counts rejections because a fleet store was
	// unreachable and its fallback is to fail closed.
	RejectedFull  uint64 `json:"rejected_full"`
	RejectedStore uint64 `json:"rejected_store"`
	// Keys is the key table's size now, MaxKeys its bound.
	Keys    int `json:"keys"`
	MaxKeys int `json:"max_keys"`
	// EvictedIdle and EvictedLRU count keys dropped from the table for
	// idleness and to make room.
	EvictedIdle uint64 `json:"evicted_idle"`
	EvictedLRU  uint64 `json:"evicted_lru"`
	// Fleet quotas only: decisions made by the fallback, store calls that
	// failed or timed out, and the store breaker's state ("closed",
	// "open", "half_open").
	FallbackDecisions uint64 `json:"fallback_decisions,omitempty"`
	StoreErrors       uint64 `json:"store_errors,omitempty"`
	Breaker           string `json:"breaker,omitempty"`
}

// Evicted says why a key left the table.
type Evicted uint8

// Eviction causes.
const (
	NotEvicted  Evicted = iota
	EvictedIdle         // unused for IdleTimeout
	EvictedLRU          // least recently used of a full table
)

// Event is one decision or one eviction.
type Event struct {
	Quota   string
	Allowed bool
	// Reason is why a decision was refused (admit.ReasonRate, or
	// ReasonFull for a new key refused by a full table); ReasonNone when
	// allowed and for evictions.
	Reason     admit.Reason
	Cost       int
	RetryAfter time.Duration
	// Evicted is set, and the other fields zero, for an eviction.
	Evicted Evicted
}

// Observer receives one event per decision and per eviction, synchronously
// on the deciding goroutine (evictions with a shard's lock held: do not
// call back into the quota). Observers must be safe for concurrent use and
// cheap. Keys are never passed, so labels stay bounded.
type Observer interface {
	ObserveQuota(Event)
}
