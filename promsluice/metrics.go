package promsluice

import (
	"fmt"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/pool"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/retry"
)

// Add exports each part from the next scrape on: the one call that meters
// what a service built, beside the gates NewGate builds. A part is one of
//
//   - *admit.Gate: a gate built elsewhere. Its counters and gauges are
//     exported; its wait and hold histograms only if it was built with m
//     as its Observer (NewGate does both). Another gate of the same name
//     is an error: their series would clash.
//   - *limit.Adaptive: the adaptive limit's state, sluice_limit_*.
//   - a quota: a *quota.Quota, a fleet quota (*redisquota.Quota), or
//     anything else with their Stats() quota.Stats method, or that method
//     itself (a func() quota.Stats); or a func() []quota.Stats, a set of
//     quotas read at each scrape, for a set that changes while the process
//     runs (a proxy's route quotas across reloads; it must never return
//     two quotas of one name). Its counters are sluice_quota_*, and
//     its rejections are counted in sluice_admission_rejected_total under
//     the quota's name as well (reason rate for the 429s, full for a full
//     key table, breaker_open for a fleet quota failing closed), so that
//     `sluice load --metrics` attributes them like a gate's. A quota that
//     also has a Breaker() *breaker.Breaker method (a fleet quota's store
//     breaker) has that breaker exported with the others, but not its
//     refusals: while it is open the quota decides by its fallback.
//   - *breaker.Breaker, or a *breaker.Group (every breaker it has at each
//     scrape): sluice_breaker_*, and the breaker's rejections counted in
//     sluice_admission_rejected_total{gate=<breaker name>,reason=
//     "breaker_open"}, the gate and reason its refusal carries. Every
//     call it refused counts, retry attempts it stopped included.
//   - *retry.Policy: its events, sluice_retry_* (the retry budget's
//     exhaustion among them).
//   - *pool.Pool: sluice_pool_*; its histograms only if m is its
//     pool.Config.Observer.
//
// Adding the same part twice is a no-op. Anything else is an error naming
// its type, and nothing is added. Add is safe for concurrent use, with
// scrapes too.
func (m *Metrics) Add(parts ...any) error {
	for _, p := range parts {
		if err := check(p); err != nil {
			return err
		}
	}
	for _, p := range parts {
		if err := m.add(p); err != nil {
			return err
		}
	}
	return nil
}

// Remove stops exporting each part, from the next scrape on: a gate
// (*admit.Gate) or an adaptive limit (*limit.Adaptive) retired while the
// process runs, such as a proxy's route gates after a reload. A gate's
// counters, gauges and histograms go; a limit's state goes. A removed
// part may be added again. Removing a part m does not export is a no-op;
// any other kind of part is an error naming its type, and nothing is
// removed. Safe for concurrent use, with Add and scrapes too.
func (m *Metrics) Remove(parts ...any) error {
	for _, p := range parts {
		switch v := p.(type) {
		case *admit.Gate, *limit.Adaptive:
			if isNil(v) {
				return fmt.Errorf("promsluice: Remove of a nil %T", p)
			}
		default:
			return fmt.Errorf("promsluice: Remove of a %T: want a gate or an adaptive limit", p)
		}
	}
	for _, p := range parts {
		switch v := p.(type) {
		case *admit.Gate:
			m.removeGate(v)
		case *limit.Adaptive:
			m.limits.remove(v)
			m.mu.Lock()
			delete(m.added, p)
			m.mu.Unlock()
		}
	}
	return nil
}

// A quotaPart is a quota as Add takes it.
type quotaPart interface{ Stats() quota.Stats }

// A storeBreakerPart is a quota with a breaker in front of its store.
type storeBreakerPart interface{ Breaker() *breaker.Breaker }

// check reports whether Add takes p.
func check(p any) error {
	switch v := p.(type) {
	case *admit.Gate, *limit.Adaptive, *breaker.Breaker, *breaker.Group, *retry.Policy, *pool.Pool:
		if isNil(v) {
			return fmt.Errorf("promsluice: Add of a nil %T", p)
		}
	case func() quota.Stats:
		if v == nil {
			return fmt.Errorf("promsluice: Add of a nil %T", p)
		}
	case func() []quota.Stats:
		if v == nil {
			return fmt.Errorf("promsluice: Add of a nil %T", p)
		}
	case quotaPart:
		if isNil(v) {
			return fmt.Errorf("promsluice: Add of a nil %T", p)
		}
	default:
		return fmt.Errorf("promsluice: Add of a %T: want a gate, an adaptive limit, a quota, a breaker or breaker group, a retry policy or a pool", p)
	}
	return nil
}

// isNil reports whether p, a pointer in an interface, is nil.
func isNil(p any) bool {
	switch v := p.(type) {
	case *admit.Gate:
		return v == nil
	case *limit.Adaptive:
		return v == nil
	case *breaker.Breaker:
		return v == nil
	case *breaker.Group:
		return v == nil
	case *retry.Policy:
		return v == nil
	case *pool.Pool:
		return v == nil
	case *quota.Quota:
		return v == nil
	}
	return p == nil
}

// seen records p as added and reports whether it was before. Only
// comparable parts (pointers) are recorded; a func() quota.Stats is
// added each time.
func (m *Metrics) seen(p any) bool {
	switch p.(type) {
	case func() quota.Stats, func() []quota.Stats:
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.added[p] {
		return true
	}
	m.added[p] = true
	return false
}

func (m *Metrics) add(p any) error {
	if g, ok := p.(*admit.Gate); ok {
		return m.addGate(g) // addGate checks for clashes itself
	}
	if m.seen(p) {
		return nil
	}
	switch v := p.(type) {
	case *limit.Adaptive:
		m.limits.add(v)
	case *breaker.Breaker:
		m.breakers.add(v)
		m.addRefusals(func() []Refusal { return breakerRefusals(v) })
	case *breaker.Group:
		m.breakers.addGroup(v)
		m.addRefusals(func() []Refusal {
			var out []Refusal
			for _, b := range groupBreakers(v) {
				out = append(out, breakerRefusals(b)...)
			}
			return out
		})
	case *retry.Policy:
		m.retries.add(v)
	case *pool.Pool:
		m.pools.add(v)
	case func() quota.Stats:
		m.addQuota(func() []quota.Stats { return []quota.Stats{v()} })
	case func() []quota.Stats:
		m.addQuota(v)
	case quotaPart:
		m.addQuota(func() []quota.Stats { return []quota.Stats{v.Stats()} })
		if sb, ok := v.(storeBreakerPart); ok {
			if b := sb.Breaker(); b != nil {
				m.breakers.add(b)
			}
		}
	}
	return nil
}

// addQuota exports quotas' counters and their rejections.
func (m *Metrics) addQuota(read func() []quota.Stats) {
	m.quotas.add(read)
	m.addRefusals(quotaRefusals(read))
}

// breakerRefusals is b's refusals as Refusals: reason breaker_open under
// b's name, the gate and reason of the refusal b returns.
func breakerRefusals(b *breaker.Breaker) []Refusal {
	return []Refusal{{Gate: b.Name(), Reason: admit.ReasonBreakerOpen.String(), Count: b.Stats().Rejected}}
}

// ObserveSubmit implements pool.Observer: submissions are counted from
// the pools' Stats, so it does nothing.
func (m *Metrics) ObserveSubmit(pool.SubmitEvent) {}

// ObserveDone implements pool.Observer: it records how long a task
// waited in the queue and ran. A nil *Metrics observes nothing.
func (m *Metrics) ObserveDone(e pool.DoneEvent) {
	if m != nil {
		m.pools.ObserveDone(e)
	}
}
