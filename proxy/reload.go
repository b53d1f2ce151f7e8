package proxy

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
)

// ErrRestartNeeded is wrapped by a Reload error for a change that the
// running proxy cannot make in place: a route gate's queue, max_wait or
// limit. Such a reload changes nothing.
var ErrRestartNeeded = errors.New("proxy: change needs a restart")

// ReloadSummary says what a Reload changed.
type ReloadSummary struct {
	// Routes is how many routes are in force now.
	Routes int
	// Added and Removed name the routes that are new and gone.
	Added, Removed []string
	// Resized names the route gates whose capacity changed in place, as
	// "name old->new".
	Resized []string
	// Requeued names the route gates whose queue order or classes changed
	// in place.
	Requeued []string
	// NewQuotas names the kept routes whose quota changed and was built
	// anew.
	NewQuotas []string
	// Upstreams is how many upstream instances are in force now, and
	// UpstreamsAdded and UpstreamsRemoved how many came and went.
	Upstreams, UpstreamsAdded, UpstreamsRemoved int
}

// Reload replaces the proxy's routes and, when upstreams is not empty, its
// upstream instances, while it serves: requests already admitted finish
// as they started, later ones see the new rules. Nothing else of the
// Config changes (the upstream gate, retries, breaker, timeouts).
//
// A route is known by its name. A route kept under the same name keeps
// its gate, with the slots it holds and the requests queued in it: a
// changed max_inflight is applied to that gate (admit.Gate.SetCapacity,
// so a shrink admits nobody new until enough held slots are released), a
// changed queue_discipline, priority_header or class_shares to its queue.
// A changed queue, max_wait or limit, or max_inflight under an adaptive
// limit, would need a new gate (two gates would admit twice the
// capacity while the old one's requests finish): Reload refuses it with
// ErrRestartNeeded. A kept route keeps its quota (the clients' buckets)
// unless the quota's settings changed; a changed one starts over, a local
// quota with full buckets, a fleet one from what Redis holds under its
// name. A removed route's gate leaves Gates but is not closed: what it
// admitted finishes. An upstream instance kept keeps its health record.
//
// The rules are checked as New checks them, and an error (wrapping
// ErrInvalidConfig, or ErrRestartNeeded) changes nothing. Reloads are
// serialised; Reload is safe for concurrent use with ServeHTTP and State.
func (p *Proxy) Reload(routes []Route, upstreams []*url.URL) (ReloadSummary, error) {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	var sum ReloadSummary
	if err := checkUpstreamList(upstreams); err != nil {
		return sum, err
	}
	if err := checkRoutes(routes); err != nil {
		return sum, err
	}
	running := p.routes()
	byName := make(map[string]*route, len(running))
	for _, rt := range running {
		byName[rt.Name] = rt
	}
	next := make([]*route, 0, len(routes))
	var apply []func()
	for i, rc := range routes {
		prev := byName[rc.Name]
		keep, acts, err := p.keepFrom(prev, rc, &sum)
		if err != nil {
			return ReloadSummary{}, fmt.Errorf("route %d (%q): %w", i, rc.Name, err)
		}
		rt, err := p.newRoute(rc, keep)
		if err != nil {
			return ReloadSummary{}, err
		}
		if prev == nil {
			sum.Added = append(sum.Added, rc.Name)
		}
		delete(byName, rc.Name)
		next = append(next, rt)
		apply = append(apply, acts...)
	}
	for _, rt := range running {
		if _, gone := byName[rt.Name]; gone {
			sum.Removed = append(sum.Removed, rt.Name)
		}
	}
	// Everything is built and checked: change the running gates, then
	// switch the table.
	for _, f := range apply {
		f()
	}
	p.table.Store(&next)
	if len(upstreams) > 0 {
		sum.UpstreamsAdded, sum.UpstreamsRemoved = p.pool.setMembers(upstreams)
	}
	sum.Routes = len(next)
	sum.Upstreams = len(p.pool.state())
	return sum, nil
}

// checkUpstreamList checks instances as New does; an empty list is valid
// (Reload keeps the running ones).
func checkUpstreamList(urls []*url.URL) error {
	for _, u := range urls {
		if err := CheckUpstream(u); err != nil {
			return fmt.Errorf("%w: upstream %v: %v", ErrInvalidConfig, u, err)
		}
		// The instances of one service share one path prefix: the
		// request is rewritten once, the instance chosen per attempt.
		if u.Path != urls[0].Path {
			return fmt.Errorf("%w: upstream %v: every upstream needs the same path as %v", ErrInvalidConfig, u, urls[0])
		}
	}
	return nil
}

// keepFrom decides what rc keeps of prev, the running route of its name
// (nil: none): the parts for newRoute, and the changes to make to a kept
// gate once the whole reload is known to succeed.
func (p *Proxy) keepFrom(prev *route, rc Route, sum *ReloadSummary) (*route, []func(), error) {
	if prev == nil {
		return nil, nil, nil
	}
	keep := &route{}
	var acts []func()
	if pg := prev.gates; pg != nil && rc.MaxInflight > 0 {
		was := prev.Route
		if rc.Queue != was.Queue || rc.MaxWait != was.MaxWait || rc.Limit != was.Limit || (rc.Limit.Adaptive() && rc.MaxInflight != was.MaxInflight) {
			return nil, nil, fmt.Errorf("%w: its gate's queue, max_wait and limit (and max_inflight under an adaptive limit) are set when the gate is built; restart the proxy to change them",
				ErrRestartNeeded)
		}
		resize := rc.MaxInflight != was.MaxInflight
		requeue := !sameQueueing(rc.Queueing, was.Queueing)
		keep.gates = pg
		if resize || requeue {
			compiled, err := rc.Queueing.compile(rc.Queue)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
			}
			// The same gate (its slots, its queue, its limit), described
			// by the new rules for /state and classified by the new header.
			keep.gates = &gateSet{gate: pg.gate, adaptive: pg.adaptive, queueing: rc.Queueing,
				shares: compiled.Policy.ClassShares, classify: compiled.Classify}
			g, capacity, pol := pg.gate, rc.MaxInflight, compiled.Policy
			if resize {
				sum.Resized = append(sum.Resized, fmt.Sprintf("%s %d->%d", rc.Name, was.MaxInflight, capacity))
				acts = append(acts, func() { _ = g.SetCapacity(capacity) }) // in 1..MaxCapacity: checked
			}
			if requeue {
				sum.Requeued = append(sum.Requeued, rc.Name)
				acts = append(acts, func() {
					_ = g.SetQueueing(pol)
				})
			}
		}
	}
	if q := rc.Quota; q != nil && prev.quota != nil {
		if *q == *prev.Quota {
			keep.quota, keep.fleet = prev.quota, prev.fleet
		} else {
			sum.NewQuotas = append(sum.NewQuotas, rc.Name)
		}
	}
	return keep, acts, nil
}

func sameQueueing(a, b Queueing) bool {
	return a.Discipline == b.Discipline && a.PriorityHeader == b.PriorityHeader && slices.Equal(a.ClassShares, b.ClassShares)
}
