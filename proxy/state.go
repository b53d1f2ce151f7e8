package proxy

import (
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/redisquota"
)

// State is the proxy's part of the admin /state: each route's rule, gate,
// limit and quota usage; the upstream gate, breaker and instances; and the
// refusals made outside gates.
type State struct {
	Upstream  GateState       `json:"upstream_gate"`
	Breaker   *BreakerState   `json:"breaker,omitempty"`
	Upstreams []UpstreamState `json:"upstreams"`
	Routes    []RouteState    `json:"routes"`
	Refusals  []Refusal       `json:"refusals"`
	Stale     *StaleState     `json:"stale,omitempty"`
	// Tunnels is set when a route allows upgrades.
	Tunnels *TunnelState `json:"tunnels,omitempty"`
}

// GateState is one gate's occupancy, its queue (discipline, age, classes)
// and, when adaptive, its limit.
type GateState struct {
	Name     string `json:"name"`
	Capacity int64  `json:"capacity"`
	Inflight int64  `json:"inflight"`
	Waiting  int64  `json:"waiting"`
	Admitted uint64 `json:"admitted"`
	Rejected uint64 `json:"rejected"`
	// Discipline is the queue's order: fifo, lifo or codel.
	Discipline string `json:"discipline"`
	// QueueAgeSeconds is how long the oldest request still queued has
	// waited (0: nobody queued); one that keeps growing is a queue that
	// does not move.
	QueueAgeSeconds float64 `json:"queue_age_seconds"`
	// PriorityHeader and Classes are set when the gate orders its queue
	// by class: the header read, and each class's share and counts.
	PriorityHeader string       `json:"priority_header,omitempty"`
	Classes        []ClassState `json:"classes,omitempty"`
	Limit          *limit.State `json:"limit,omitempty"`
}

// ClassState is one priority class of a gate, highest class first.
type ClassState struct {
	Class string `json:"class"`
	// Share is the guaranteed minimum share of the gate (0: none).
	Share    float64 `json:"share,omitempty"`
	Admitted uint64  `json:"admitted"`
	// Shed counts refusals with reason shed (lower classes refused to
	// make room for higher ones); Rejected counts every reason.
	Shed     uint64 `json:"shed"`
	Rejected uint64 `json:"rejected"`
	InUse    int64  `json:"in_use"`
	Waiting  int64  `json:"waiting"`
}

// BreakerState is the upstream breaker's state and counters.
type BreakerState struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	Allowed     uint64 `json:"allowed"`
	Rejected    uint64 `json:"rejected"`
	WindowCalls int    `json:"window_calls"`
	WindowFails int    `json:"window_failures"`
}

// RouteState is one route: its rule, its gate (nil without one) and its
// quota's usage (nil without one).
type RouteState struct {
	Name    string       `json:"name"`
	Host    string       `json:"host,omitempty"`
	Path    string       `json:"path,omitempty"`
	Methods []string     `json:"methods,omitempty"`
	Cost    int          `json:"cost"`
	Gate    *GateState   `json:"gate,omitempty"`
	Quota   *quota.Stats `json:"quota,omitempty"`
	// QuotaScope is local or fleet; Fleet is a fleet quota's state
	// (store health, mode, clock skew).
	QuotaScope string            `json:"quota_scope,omitempty"`
	Fleet      *redisquota.State `json:"fleet,omitempty"`
}

// StaleState is the stale-if-error store's size.
type StaleState struct {
	Entries int `json:"entries"`
}

func gateState(gs *gateSet) GateState {
	s := gs.gate.Stats()
	st := GateState{
		Name: gs.gate.Name(), Capacity: s.Capacity, Inflight: s.InUse, Waiting: s.Waiting,
		Admitted: s.Admitted, Rejected: s.Rejected.Total(),
		Discipline: gs.gate.Discipline().String(), QueueAgeSeconds: s.OldestWait.Seconds(),
		PriorityHeader: gs.queueing.PriorityHeader,
	}
	if st.PriorityHeader != "" {
		for _, name := range admit.Classes() {
			c, _ := admit.ParseClass(name)
			cs := &s.Classes[c]
			st.Classes = append(st.Classes, ClassState{Class: name, Share: gs.shares[c], Admitted: cs.Admitted,
				Shed: cs.Rejected[admit.ReasonShed], Rejected: cs.Rejected.Total(), InUse: cs.InUse, Waiting: cs.Waiting})
		}
	}
	if gs.adaptive != nil {
		ls := gs.adaptive.State()
		st.Limit = &ls
	}
	return st
}

// State returns a snapshot for /state. Safe for concurrent use.
func (p *Proxy) State() State {
	st := State{Upstream: gateState(p.upstream), Upstreams: p.pool.state(), Refusals: p.Refusals()}
	if b := p.breaker; b != nil {
		bs := b.Stats()
		st.Breaker = &BreakerState{Name: b.Name(), State: bs.State.String(), Allowed: bs.Allowed, Rejected: bs.Rejected,
			WindowCalls: bs.WindowCalls, WindowFails: bs.WindowFailures}
	}
	for _, rt := range p.routes() {
		rs := RouteState{Name: rt.Name, Host: rt.Host, Path: rt.PathPrefix, Methods: rt.Methods, Cost: rt.Cost}
		if rt.gates != nil {
			g := gateState(rt.gates)
			rs.Gate = &g
		}
		if rt.quota != nil {
			qs := rt.quota.Stats()
			rs.Quota, rs.QuotaScope = &qs, ScopeLocal
		}
		if rt.fleet != nil {
			fs := rt.fleet.State()
			rs.Fleet, rs.QuotaScope = &fs, ScopeFleet
		}
		st.Routes = append(st.Routes, rs)
	}
	if p.stale != nil {
		st.Stale = &StaleState{Entries: p.stale.cache.Len()}
	}
	if p.tunnels != nil {
		st.Tunnels = p.tunnels.state()
	}
	return st
}
