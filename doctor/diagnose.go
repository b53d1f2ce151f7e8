package doctor

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Severity ranks a finding.
type Severity string

// Severities. Only Warn and Critical make `sluice doctor` exit 1.
const (
	Info     Severity = "info"     // worth knowing; not a fault
	Warn     Severity = "warn"     // overload or a symptom that needs a look
	Critical Severity = "critical" // something is broken: a leak, a stall, counters that do not add up
)

// Finding codes, one per row of the diagnosis the package doc lists.
const (
	CodeArrivalsAboveCompletions = "arrivals_above_completions"
	CodeQueueGrowingAtCapacity   = "queue_growing_at_capacity"
	CodeQueueGrowingBelowCap     = "queue_growing_below_capacity"
	CodeOldestWaiterStuck        = "oldest_waiter_stuck"
	CodeStalled                  = "stalled"
	CodeSlowClients              = "slow_clients"
	CodeRefusalsConcentrated     = "refusals_concentrated"
	CodeRetriesAmplifying        = "retries_amplifying"
	CodeLittleMismatch           = "littles_law_mismatch"
	CodeCounterMissing           = "counter_missing"
	CodeCounterReset             = "counter_reset"
	CodeDoubleRelease            = "double_release"
	CodeDraining                 = "draining"
	CodeGoroutinesInGateQueues   = "goroutines_in_gate_queues"
	CodeGoroutinesOnLocks        = "goroutines_on_locks"
)

// Thresholds of the rules. They are deliberately coarse: a finding should
// be obvious in the figures it prints, not a statistical fine point.
const (
	// MinEvents is the fewest events (arrivals, refusals, attempts) in the
	// interval for a rate-based rule to speak.
	MinEvents = 10
	// ArrivalExcess: arrivals above completions means offered/s more
	// than 10 % above completed/s.
	ArrivalExcess = 1.10
	// ConcentratedShare: refusals are concentrated when one gate, kind or
	// class has at least 80 % of them...
	ConcentratedShare = 0.80
	// ...and at least 20 points more than its share of the arrivals.
	ConcentratedExcess = 0.20
	// RetryRatio: retries amplify when attempts per original in the
	// interval reach 2, or grow by a quarter over the ratio before it.
	RetryRatio  = 2.0
	RetryGrowth = 1.25
	// LittleFactor: inflight more than twice what completions account for
	// (plus one slot) does not add up.
	LittleFactor = 2.0
	// OldestMoveShare: the oldest waiter did not move when it aged by at
	// least 90 % of the interval.
	OldestMoveShare = 0.90
	// LockShare: goroutines waiting on locks deserve a finding from 5
	// and 10 % of all goroutines.
	LockMin   = 5
	LockShare = 0.10
)

// Finding is one thing doctor saw, in the diagnosis table's terms: what it
// saw with the figures behind it, what that usually means, and what to
// check next.
type Finding struct {
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	Gate     string   `json:"gate,omitempty"` // empty for findings about the whole process
	Seen     string   `json:"seen"`
	Meaning  string   `json:"meaning"`
	Next     string   `json:"next"`
	// Figures are the numbers behind Seen, by name (rates per second,
	// counts, seconds).
	Figures map[string]float64 `json:"figures"`
}

// GateRates is one gate's activity over the interval.
type GateRates struct {
	Gate      string  `json:"gate"`
	Offered   float64 `json:"offered_per_second"`
	Admitted  float64 `json:"admitted_per_second"`
	Refused   float64 `json:"refused_per_second"`
	Completed float64 `json:"completed_per_second"`
	Inflight  float64 `json:"inflight"`
	Waiting   float64 `json:"waiting"`
	Capacity  float64 `json:"capacity"`
	// HoldMean and WaitMean are the mean slot hold and queue wait over the
	// interval, in seconds; zero without samples.
	HoldMean float64 `json:"hold_mean_seconds"`
	WaitMean float64 `json:"wait_mean_seconds"`
}

// Diagnosis is what Diagnose concluded from two readings.
type Diagnosis struct {
	Interval   float64           `json:"interval_seconds"`
	Gates      []GateRates       `json:"gates"`
	Findings   []Finding         `json:"findings"`
	Goroutines *GoroutineSummary `json:"goroutines,omitempty"`
}

// Worst returns the highest severity among the findings, or "" when there
// are none.
func (d *Diagnosis) Worst() Severity {
	var w Severity
	rank := map[Severity]int{"": 0, Info: 1, Warn: 2, Critical: 3}
	for _, f := range d.Findings {
		if rank[f.Severity] > rank[w] {
			w = f.Severity
		}
	}
	return w
}

// Diagnose compares two readings of the same server, before and after,
// and explains what changed. goroutines may be nil. It never fails: a
// reading that lacks what a rule needs yields a counter_missing finding or
// nothing.
func Diagnose(before, after *Reading, goroutines *GoroutineSummary) *Diagnosis {
	dt := after.At.Sub(before.At).Seconds()
	d := &Diagnosis{Interval: dt, Findings: []Finding{}, Gates: []GateRates{}, Goroutines: goroutines}
	if !(dt > 0) {
		d.Findings = append(d.Findings, Finding{Code: CodeCounterReset, Severity: Critical,
			Seen:    fmt.Sprintf("the second reading is not later than the first (%.3f s apart)", dt),
			Meaning: "rates cannot be computed without time passing",
			Next:    "read again with a positive --interval", Figures: map[string]float64{"interval_seconds": dt}})
		return d
	}
	d.Findings = append(d.Findings, missingFamilies(after)...)
	if after.State != nil && after.State.Draining {
		d.Findings = append(d.Findings, Finding{Code: CodeDraining, Severity: Info,
			Seen:    "the server is draining (shutdown has begun)",
			Meaning: "queued work is refused with reason closed and /healthz answers 503; rates below reflect the drain",
			Next:    "diagnose again after the restart, or look at why it is shutting down", Figures: map[string]float64{}})
	}
	if after.State != nil {
		for _, sg := range after.State.Gates {
			if _, ok := after.Gates[sg.Gate]; !ok && len(after.Families) > 0 {
				d.Findings = append(d.Findings, Finding{Code: CodeCounterMissing, Severity: Critical, Gate: sg.Gate,
					Seen:    fmt.Sprintf("gate %s is in /state (offered %.0f) but not in /metrics", sg.Gate, sg.Offered),
					Meaning: "the gate's metrics are not exported: dashboards and alerts cannot see it",
					Next:    "add the gate to the metrics collector (promsluice.Metrics.Add) or server.Config.Gates",
					Figures: map[string]float64{"state_offered": sg.Offered}})
			}
		}
	}
	writers := clientWriters(goroutines)
	stalledFor := 0.0 // a stalled gate's slots have been held at least this long
	var concentrated []rejGroup
	for _, name := range after.gateNames() {
		a := after.Gates[name]
		b := before.Gates[name]
		if b == nil {
			b = &GateReading{Gate: name}
		}
		if reset(b, a) {
			d.Findings = append(d.Findings, Finding{Code: CodeCounterReset, Severity: Info, Gate: name,
				Seen:    fmt.Sprintf("gate %s: counters went down between the readings (offered %.0f → %.0f)", name, b.Offered, a.Offered),
				Meaning: "the process restarted (or the gate was recreated) between the readings",
				Next:    "read again; if it keeps restarting, look for crashes or a liveness probe that kills it under load",
				Figures: map[string]float64{"offered_before": b.Offered, "offered_after": a.Offered}})
			continue
		}
		g := gateRates(b, a, dt)
		d.Gates = append(d.Gates, g)
		fs := gateFindings(b, a, g, dt, after.Families, writers)
		for _, f := range fs {
			if f.Code == CodeStalled || f.Code == CodeSlowClients {
				stalledFor = dt
			}
		}
		d.Findings = append(d.Findings, fs...)
		concentrated = append(concentrated, rejGroup{gate: name, before: b, after: a})
	}
	d.Findings = append(d.Findings, concentration(concentrated)...)
	d.Findings = append(d.Findings, retryFindings(before, after, dt)...)
	if goroutines != nil {
		d.Goroutines = withLongest(goroutines, after, stalledFor)
		d.Findings = append(d.Findings, goroutineFindings(goroutines)...)
	}
	d.clampFigures()
	rank := map[Severity]int{Critical: 0, Warn: 1, Info: 2}
	sort.SliceStable(d.Findings, func(i, j int) bool {
		return rank[d.Findings[i].Severity] < rank[d.Findings[j].Severity]
	})
	return d
}

// clampFigures replaces non-finite figures (absurd counters over a tiny
// interval) with the largest float, so the diagnosis always encodes as JSON.
func (d *Diagnosis) clampFigures() {
	fix := func(v *float64) {
		switch {
		case math.IsNaN(*v):
			*v = 0
		case math.IsInf(*v, 1):
			*v = math.MaxFloat64
		case math.IsInf(*v, -1):
			*v = -math.MaxFloat64
		}
	}
	for i := range d.Gates {
		g := &d.Gates[i]
		for _, v := range []*float64{&g.Offered, &g.Admitted, &g.Refused, &g.Completed, &g.HoldMean, &g.WaitMean} {
			fix(v)
		}
	}
	for _, f := range d.Findings {
		for k, v := range f.Figures {
			fix(&v)
			f.Figures[k] = v
		}
	}
}

// reset reports whether a counter went backwards.
func reset(b, a *GateReading) bool {
	return a.Offered < b.Offered || a.Admitted < b.Admitted || a.Rejected < b.Rejected ||
		a.Completed < b.Completed || a.HoldCount < b.HoldCount
}

func gateRates(b, a *GateReading, dt float64) GateRates {
	g := GateRates{
		Gate:      a.Gate,
		Offered:   (a.Offered - b.Offered) / dt,
		Admitted:  (a.Admitted - b.Admitted) / dt,
		Refused:   (a.Rejected - b.Rejected) / dt,
		Completed: (a.Completed - b.Completed) / dt,
		Inflight:  a.Inflight, Waiting: a.Waiting, Capacity: a.Capacity,
	}
	if n := a.HoldCount - b.HoldCount; n > 0 {
		g.HoldMean = (a.HoldSum - b.HoldSum) / n
	}
	if n := a.WaitCount - b.WaitCount; n > 0 {
		g.WaitMean = (a.WaitSum - b.WaitSum) / n
	}
	return g
}

// missingFamilies reports admission families that are absent while others
// are present: the counts cannot be reconciled without them.
func missingFamilies(r *Reading) []Finding {
	if !r.Families[MetricOffered] && !r.Families[MetricAdmitted] {
		if len(r.Gates) == 0 {
			return []Finding{{Code: CodeCounterMissing, Severity: Warn,
				Seen:    "no sluice admission metrics at all (" + MetricOffered + " and friends)",
				Meaning: "either this is not a sluice server's admin /metrics, or it has no gates",
				Next:    "point --admin-addr at the admin listener (default 127.0.0.1:9090); check that the gates are exported",
				Figures: map[string]float64{}}}
		}
	}
	var missing []string
	for _, name := range []string{MetricOffered, MetricAdmitted, MetricRejected, MetricCompleted, MetricInflight, MetricWaiting, MetricCapacity} {
		if !r.Families[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Finding{{Code: CodeCounterMissing, Severity: Critical,
		Seen:    "admission metrics present but these are missing: " + strings.Join(missing, ", "),
		Meaning: "offered = admitted + rejected + waiting and admitted = completed + inflight cannot be checked, and the rules that need them are blind",
		Next:    "export every admission family (promsluice.Metrics does); a custom exporter must not drop any",
		Figures: map[string]float64{"missing": float64(len(missing))}}}
}

// writers are the goroutines writing responses to clients that read
// slowly, from a goroutine dump; count is -1 without a dump.
type writers struct {
	count int
	sites string
}

func clientWriters(s *GoroutineSummary) writers {
	if s == nil {
		return writers{count: -1}
	}
	for _, g := range s.Groups {
		if g.Where == WhereClientWrite {
			return writers{count: g.Count, sites: topSites(g)}
		}
	}
	return writers{}
}

// withLongest is s with the longest waits the server's own figures give:
// the gate queue's oldest waiter, and for client writes, at least the
// interval when a gate stalled (its slots were held through it).
func withLongest(s *GoroutineSummary, after *Reading, stalledFor float64) *GoroutineSummary {
	out := *s
	out.Groups = append([]GoroutineGroup(nil), s.Groups...)
	oldest := 0.0
	for _, g := range after.Gates {
		if g.OldestWait != nil {
			oldest = math.Max(oldest, *g.OldestWait)
		}
	}
	if after.State != nil {
		for _, g := range after.State.Gates {
			if g.OldestWait != nil {
				oldest = math.Max(oldest, *g.OldestWait)
			}
		}
	}
	for i := range out.Groups {
		g := &out.Groups[i]
		switch {
		case g.Where == WhereGateQueue && oldest > 0:
			g.LongestSeconds = oldest
		case g.Where == WhereClientWrite && stalledFor > 0:
			g.LongestSeconds, g.LongestAtLeast = stalledFor, true
		}
	}
	return &out
}

func gateFindings(b, a *GateReading, g GateRates, dt float64, families map[string]bool, w writers) []Finding {
	var out []Finding
	// Rules that compare arrivals with completions are blind without the
	// completion counter (counter_missing says so); keep them quiet rather
	// than blame the server for a gap in its export.
	completions := families[MetricCompleted]
	name := a.Gate
	dOffered := a.Offered - b.Offered
	dCompleted := a.Completed - b.Completed
	backlogGrowth := ((a.Waiting + a.Inflight) - (b.Waiting + b.Inflight)) / dt

	// The counts must reconcile in each reading (with a little slack for
	// operations in motion while the families were read one by one).
	if a.Offered > 0 || a.Admitted > 0 {
		slack := math.Max(2, 0.01*a.Offered)
		gap := a.Offered - a.Admitted - a.Rejected - a.Waiting
		gap2 := a.Admitted - a.Completed - a.Inflight
		if math.Abs(gap) > slack || math.Abs(gap2) > slack {
			out = append(out, Finding{Code: CodeCounterMissing, Severity: Critical, Gate: name,
				Seen: fmt.Sprintf("gate %s: offered %.0f ≠ admitted %.0f + rejected %.0f + waiting %.0f (gap %.0f), or admitted ≠ completed %.0f + inflight %.0f (gap %.0f)",
					name, a.Offered, a.Admitted, a.Rejected, a.Waiting, gap, a.Completed, a.Inflight, gap2),
				Meaning: "the counts do not add up: a counter (a reason, outcome or kind) is missing from the export, or something counts twice",
				Next:    "compare /metrics with /state for this gate; check that every reason and outcome label is exported",
				Figures: map[string]float64{"offered": a.Offered, "admitted": a.Admitted, "rejected": a.Rejected, "waiting": a.Waiting,
					"completed": a.Completed, "inflight": a.Inflight, "gap_offered": gap, "gap_admitted": gap2}})
		}
	}

	if completions && dOffered >= MinEvents && g.Offered > g.Completed*ArrivalExcess {
		sev, absorbed := Warn, "the backlog (queued plus in flight) grows by "+num(backlogGrowth)+"/s"
		if backlogGrowth <= 0 {
			sev, absorbed = Info, "refusals absorb the excess: the backlog is not growing"
		}
		out = append(out, Finding{Code: CodeArrivalsAboveCompletions, Severity: sev, Gate: name,
			Seen: fmt.Sprintf("gate %s: %s/s arriving, %s/s completing; %s/s refused; %s",
				name, num(g.Offered), num(g.Completed), num(g.Refused), absorbed),
			Meaning: "arrivals exceed what the gate completes; what is not completed is refused or waits, and moving it to a queue only changes where it waits",
			Next: "if refusals absorb it, check the refusal rate is acceptable to callers; otherwise accept less or complete more " +
				"(hold time now " + secs(g.HoldMean) + "); `sluice plan drain` gives the backlog's drain time",
			Figures: map[string]float64{"offered_per_second": g.Offered, "completed_per_second": g.Completed,
				"refused_per_second": g.Refused, "backlog_growth_per_second": backlogGrowth}})
	}

	atCapacity := a.Capacity > 0 && a.Inflight >= a.Capacity && b.Inflight >= b.Capacity
	if a.Waiting > b.Waiting && atCapacity {
		slower := ""
		if b.HoldCount > 0 && g.HoldMean > 0 {
			before := b.HoldSum / b.HoldCount
			if g.HoldMean > 1.5*before {
				slower = fmt.Sprintf("; the work slowed: hold %s now, %s before", secs(g.HoldMean), secs(before))
			}
		}
		out = append(out, Finding{Code: CodeQueueGrowingAtCapacity, Severity: Warn, Gate: name,
			Seen: fmt.Sprintf("gate %s: queue grew %.0f → %.0f while all %.0f slots were busy%s",
				name, b.Waiting, a.Waiting, a.Capacity, slower),
			Meaning: "every slot is busy and the queue grows: arrivals exceed completions, or the work got slower",
			Next:    "check the service time (" + MetricHold + "), where goroutines wait (doctor --pprof) and the downstream this gate protects",
			Figures: map[string]float64{"waiting_before": b.Waiting, "waiting_after": a.Waiting, "inflight": a.Inflight,
				"capacity": a.Capacity, "hold_mean_seconds": g.HoldMean}})
	}
	if a.Waiting > b.Waiting && a.Capacity > 0 && a.Inflight < a.Capacity && b.Inflight < b.Capacity {
		out = append(out, Finding{Code: CodeQueueGrowingBelowCap, Severity: Warn, Gate: name,
			Seen: fmt.Sprintf("gate %s: queue grew %.0f → %.0f while only %.0f of %.0f slots were busy",
				name, b.Waiting, a.Waiting, a.Inflight, a.Capacity),
			Meaning: "work queues although slots are free: the queue takes everything so the limit is never reached, heavy permits do not fit the free slots, or the capacity was lowered",
			Next:    "check the gate's configuration: capacity, permit weights, queue discipline and any adaptive limit",
			Figures: map[string]float64{"waiting_before": b.Waiting, "waiting_after": a.Waiting, "inflight": a.Inflight, "capacity": a.Capacity}})
	}

	stalled := completions && a.Inflight > 0 && b.Inflight > 0 && dCompleted == 0
	switch {
	case stalled && w.count > 0 && float64(w.count) >= math.Min(a.Inflight, b.Inflight):
		// Every held slot has a goroutine writing a response to a client
		// that does not take it: nothing on the server's side is hung.
		out = append(out, Finding{Code: CodeSlowClients, Severity: Warn, Gate: name,
			Seen: fmt.Sprintf("gate %s: %.0f slots held and nothing completed in %s (waiting %.0f), while %d goroutines write responses to clients that read slowly (%s)",
				name, a.Inflight, secs(dt), a.Waiting, w.count, w.sites),
			Meaning: "slow clients hold the slots: a response that keeps its slot while it is sent (a gated stream of a large file) holds it for as long as " +
				"its client takes to receive it, and slow or stalled readers can hold every slot while other work is refused or queued; nothing is hung on the server's side",
			Next: "raise the gate's capacity for streams, or give them a queue and a wait limit; or ungate streams (sluice serve --gate-streams=false) " +
				"and bound connections instead (--max-conns); a send timeout ends readers that stall",
			Figures: map[string]float64{"inflight": a.Inflight, "waiting": a.Waiting, "completed": dCompleted, "interval_seconds": dt, "client_writes": float64(w.count)}})
	case stalled:
		seen := fmt.Sprintf("gate %s: %.0f slots held and nothing completed in %s (waiting %.0f)", name, a.Inflight, secs(dt), a.Waiting)
		next := "read the goroutine profile (doctor --pprof) for where the holders wait: writes to clients mean slow readers, not a hang; " +
			"check downstream timeouts and that every permit is Done"
		if w.count > 0 {
			seen += fmt.Sprintf("; %d goroutines write responses to clients that read slowly (%s), fewer than the slots held", w.count, w.sites)
		}
		if w.count >= 0 {
			next = "the goroutines below show where the holders wait (writes to clients are slow readers, not a hang); check downstream timeouts and that every permit is Done"
		}
		out = append(out, Finding{Code: CodeStalled, Severity: Critical, Gate: name,
			Seen: seen,
			Meaning: "admitted work holds its slots and none finished: work hung on a downstream, a deadlock, permits never released (a leak), " +
				"or clients that read gated responses slowly",
			Next:    next,
			Figures: map[string]float64{"inflight": a.Inflight, "waiting": a.Waiting, "completed": dCompleted, "interval_seconds": dt}})
	}

	if a.OldestWait != nil && b.OldestWait != nil && a.Waiting > 0 && *a.OldestWait-*b.OldestWait >= OldestMoveShare*dt {
		trend := fmt.Sprintf("the queue went %.0f → %.0f", b.Waiting, a.Waiting)
		out = append(out, Finding{Code: CodeOldestWaiterStuck, Severity: Warn, Gate: name,
			Seen: fmt.Sprintf("gate %s: the oldest waiter aged %s → %s over %s: it did not move while %s",
				name, secs(*b.OldestWait), secs(*a.OldestWait), secs(dt), trend),
			Meaning: "the queue moves but its oldest item does not: a hotspot, priority starvation, or one bad item",
			Next:    "split the waiting work by object, age and refusal reason; if classes are in use, check the lower classes' minimum share",
			Figures: map[string]float64{"oldest_before_seconds": *b.OldestWait, "oldest_after_seconds": *a.OldestWait,
				"waiting_before": b.Waiting, "waiting_after": a.Waiting}})
	}

	// Little's law: mean slots held ≈ completion rate × mean hold (L = λW).
	// The mean comes from the hold histogram, the rate from the completion
	// counter, so a gate that times only a sample of its permits
	// (admit.Config.SampleEvery) is judged fairly.
	if completions && !stalled && a.HoldCount > b.HoldCount && a.Inflight >= 2 && b.Inflight >= 2 {
		explained := g.Completed * g.HoldMean
		held := math.Min(a.Inflight, b.Inflight)
		if held > LittleFactor*explained+1 {
			out = append(out, Finding{Code: CodeLittleMismatch, Severity: Critical, Gate: name,
				Seen: fmt.Sprintf("gate %s: at least %.0f slots held, but completions (%s/s × %s mean hold) account for %s: %s slots held by work that does not complete",
					name, held, num(g.Completed), secs(g.HoldMean), num(explained), num(held-explained)),
				Meaning: "Little's law does not add up: permits taken and never released (a leak), work stuck far longer than the rest (slow clients " +
					"receiving gated responses are one such: see the client writes below, with --pprof), or a completion counter missing",
				Next: "check that every path ends its permit (Done in a defer); read the goroutine profile (doctor --pprof) for the holders",
				Figures: map[string]float64{"inflight_min": held, "explained_by_completions": explained,
					"completed_per_second": g.Completed, "hold_mean_seconds": g.HoldMean}})
		}
	}

	if m := a.Misuse - b.Misuse; m > 0 {
		out = append(out, Finding{Code: CodeDoubleRelease, Severity: Critical, Gate: name,
			Seen:    fmt.Sprintf("gate %s: %.0f permits were ended twice in the interval", name, m),
			Meaning: "a code path calls Done on a permit that was already done; the gate ignores the extra end, but the path has a bug",
			Next:    "find the path that ends its permit twice (a defer plus an explicit Done)",
			Figures: map[string]float64{"misuse": m}})
	}
	return out
}

// rejGroup is one gate's two readings, for the concentration rule.
type rejGroup struct {
	gate          string
	before, after *GateReading
}

type share struct {
	name              string
	rejected, offered float64
	reasons           map[string]float64
}

// concentration finds refusals falling on one gate, or on one kind or
// class within a gate, out of proportion to its share of arrivals.
func concentration(groups []rejGroup) []Finding {
	var out []Finding
	byGate := map[string]*share{}
	var gateOrder []string
	var allRej, allOff float64
	for _, g := range groups {
		s := &share{name: g.gate, reasons: map[string]float64{}}
		s.rejected = g.after.Rejected - g.before.Rejected
		s.offered = g.after.Offered - g.before.Offered
		for k, v := range sliceDelta(g.before, g.after) {
			s.reasons[k.Reason] += v.Rejected
		}
		byGate[g.gate] = s
		gateOrder = append(gateOrder, g.gate)
		allRej += s.rejected
		allOff += s.offered
	}
	active := 0
	for _, s := range byGate {
		if s.offered > 0 {
			active++
		}
	}
	if active >= 2 && allRej >= MinEvents {
		if f, ok := concentrated("gate", "", byGate, gateOrder, allRej, allOff); ok {
			out = append(out, f)
		}
	}
	for _, g := range groups {
		deltas := sliceDelta(g.before, g.after)
		for _, dim := range []string{"kind", "class"} {
			parts := map[string]*share{}
			var order []string
			var rej, off float64
			offSeen := map[[2]string]bool{}
			for k, v := range deltas {
				key := k.Kind
				if dim == "class" {
					key = k.Class
				}
				s := parts[key]
				if s == nil {
					s = &share{name: key, reasons: map[string]float64{}}
					parts[key] = s
					order = append(order, key)
				}
				s.rejected += v.Rejected
				s.reasons[k.Reason] += v.Rejected
				rej += v.Rejected
				// Offered is per kind and class: count it once.
				if ok := offSeen[[2]string{k.Kind, k.Class}]; !ok {
					offSeen[[2]string{k.Kind, k.Class}] = true
					s.offered += v.Offered
					off += v.Offered
				}
			}
			if len(parts) < 2 || rej < MinEvents {
				continue
			}
			if dim == "class" && parts[""] != nil {
				continue // not labelled by class
			}
			sort.Strings(order)
			if f, ok := concentrated(dim, g.gate, parts, order, rej, off); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func concentrated(dim, gate string, parts map[string]*share, order []string, rej, off float64) (Finding, bool) {
	var top *share
	for _, n := range order {
		if s := parts[n]; top == nil || s.rejected > top.rejected {
			top = s
		}
	}
	rs := top.rejected / rej
	os := 0.0
	if off > 0 {
		os = top.offered / off
	}
	if rs < ConcentratedShare || rs-os < ConcentratedExcess {
		return Finding{}, false
	}
	reason, rn := "", 0.0
	for r, v := range top.reasons {
		if v > rn || (v == rn && r < reason) {
			reason, rn = r, v
		}
	}
	where := fmt.Sprintf("gate %s", top.name)
	g := top.name
	if dim != "gate" {
		where = fmt.Sprintf("gate %s, %s %s", gate, dim, top.name)
		g = gate
	}
	return Finding{Code: CodeRefusalsConcentrated, Severity: Warn, Gate: g,
		Seen: fmt.Sprintf("%s took %.0f%% of the refusals (%.0f of %.0f) with %.0f%% of the arrivals; mostly reason %s",
			where, 100*rs, top.rejected, rej, 100*os, reason),
		Meaning: "refusals fall on one " + dim + ": that resource or that kind of work is the bottleneck (a hotspot), or a lower class is shed first by design",
		Next:    "check this " + dim + "'s capacity and hold time; split its refused work by object and reason (" + reason + "); if shedding is by design, confirm the other " + dim + "s got through",
		Figures: map[string]float64{"refused_share": rs, "offered_share": os, "refused": top.rejected, "refused_total": rej}}, true
}

type sliceKey struct{ Kind, Reason, Class string }

// sliceDelta is the change of each slice between two readings.
func sliceDelta(b, a *GateReading) map[sliceKey]Slice {
	prev := map[sliceKey]Slice{}
	for _, s := range b.Slices {
		prev[sliceKey{s.Kind, s.Reason, s.Class}] = s
	}
	out := map[sliceKey]Slice{}
	for _, s := range a.Slices {
		k := sliceKey{s.Kind, s.Reason, s.Class}
		p := prev[k]
		out[k] = Slice{Kind: s.Kind, Reason: s.Reason, Class: s.Class,
			Offered: math.Max(0, s.Offered-p.Offered), Rejected: math.Max(0, s.Rejected-p.Rejected)}
	}
	return out
}

func retryFindings(before, after *Reading, dt float64) []Finding {
	var out []Finding
	keys := make([]string, 0, len(after.Retries))
	for k := range after.Retries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, b := after.Retries[k], before.Retries[k]
		dO, dA := a.Originals-b.Originals, a.Attempts-b.Attempts
		if dA < MinEvents || dO < 0 || dA < 0 {
			continue
		}
		ratio := math.Inf(1)
		if dO > 0 {
			ratio = dA / dO
		}
		prior := 0.0
		if b.Originals > 0 {
			prior = b.Attempts / b.Originals
		}
		rising := prior > 0 && ratio > prior*RetryGrowth && ratio > 1.2
		if ratio < RetryRatio && !rising {
			continue
		}
		label := k
		if label == "" {
			label = "all"
		}
		ratioText := "∞"
		if !math.IsInf(ratio, 0) {
			ratioText = fmt.Sprintf("%.2f", ratio)
		}
		figs := map[string]float64{"originals_per_second": dO / dt, "attempts_per_second": dA / dt, "ratio_before": prior}
		if !math.IsInf(ratio, 0) {
			figs["attempts_per_original"] = ratio
		}
		out = append(out, Finding{Code: CodeRetriesAmplifying, Severity: Warn,
			Seen: fmt.Sprintf("retries {%s}: %s/s originals, %s/s attempts: %s attempts per original (%.2f before)",
				label, num(dO/dt), num(dA/dt), ratioText, prior),
			Meaning: "attempts rise faster than original requests: retries at several layers, or synchronous retries, multiply the load on a struggling service",
			Next:    "retry at one layer only; check backoff with jitter and a retry budget; `sluice plan retry` gives the worst case",
			Figures: figs})
	}
	return out
}

func goroutineFindings(s *GoroutineSummary) []Finding {
	var out []Finding
	for _, g := range s.Groups {
		switch g.Where {
		case WhereGateQueue:
			out = append(out, Finding{Code: CodeGoroutinesInGateQueues, Severity: Info,
				Seen:    fmt.Sprintf("%d of %d goroutines wait in admission gate queues (%s)", g.Count, s.Total, topSites(g)),
				Meaning: "callers queued for a slot: the gate's waiting count, seen from the stacks",
				Next:    "see the gate findings above; a long wait here is the gate's MaxWait or the callers' deadlines",
				Figures: map[string]float64{"goroutines": float64(g.Count), "total": float64(s.Total)}})
		case WhereLock:
			if g.Count >= LockMin && float64(g.Count) >= LockShare*float64(s.Total) {
				out = append(out, Finding{Code: CodeGoroutinesOnLocks, Severity: Warn,
					Seen:    fmt.Sprintf("%d of %d goroutines wait on locks, at %s", g.Count, s.Total, topSites(g)),
					Meaning: "lock contention: work serialises on a mutex, so adding slots adds waiting, not throughput",
					Next:    "read the mutex profile (/debug/pprof/mutex) and find what holds the lock and for how long",
					Figures: map[string]float64{"goroutines": float64(g.Count), "total": float64(s.Total)}})
			}
		}
	}
	return out
}

func topSites(g GoroutineGroup) string {
	var parts []string
	for i, s := range g.Sites {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", s.Function, s.Count))
	}
	return strings.Join(parts, ", ")
}

// num formats a rate or count: one decimal, none when whole.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// secs formats seconds readably.
func secs(v float64) string {
	switch {
	case v == 0:
		return "0 s"
	case v < 0.001:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.1f ms", v*1e3)
	}
	return fmt.Sprintf("%.2f s", v)
}
