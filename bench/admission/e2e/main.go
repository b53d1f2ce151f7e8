// Command e2e drives an in-process backend of known capacity (N slots,
// each request holding one for a fixed service time) open-loop at
// multiples of that capacity, through no gate, a fixed sluice gate, an
// adaptive sluice gate and failsafe-go's adaptive limiter, and prints
// goodput (answers within the client's deadline, as a share of capacity)
// and the p99 latency of admitted requests. A second table runs the
// priority scenario: at 5× (and 10×) with a share of critical traffic,
// what each class got of what it offered. A third (-tables step) makes the
// backend 2× slower for a while and then well again, at a fixed offered
// load, sampling each gate's limit, goodput and refusals every 100 ms: how
// long the limit takes to settle, how much it swings once settled, how
// fast goodput returns and whether the recovery refuses more than the
// steady state did.
//
// The backend is what a thread-pool server is: requests that find every
// slot taken wait in its own unbounded queue, and it finishes work whose
// client has already given up. That is why "no gate" collapses: its
// queue grows until every answer is late.
//
//	go run ./admission/e2e -slots 8 -service 10ms -deadline 100ms -duration 3s
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
)

type backend struct {
	slots   chan struct{}
	service atomic.Int64  // ns per request; the step table changes it mid-run
	stop    chan struct{} // closed at the end of a run: abandon the backlog
}

func newBackend(slots int, service time.Duration) *backend {
	b := &backend{slots: make(chan struct{}, slots), stop: make(chan struct{})}
	b.service.Store(int64(service))
	return b
}

// call serves one request: wait for a slot (however long), hold it for
// the service time. It reports false if the run ended first.
func (b *backend) call() bool {
	select {
	case b.slots <- struct{}{}:
	case <-b.stop:
		return false
	}
	time.Sleep(time.Duration(b.service.Load()))
	<-b.slots
	return true
}

type sample struct {
	class    admit.Class
	admitted bool
	ok       bool // answered in time
	latency  time.Duration
}

// A policy admits one request around the backend call; ok reports an
// answer (admitted and served), ctx carries the client's deadline.
type policy func(ctx context.Context, class admit.Class, b *backend) (admitted, ok bool)

func none(ctx context.Context, _ admit.Class, b *backend) (bool, bool) {
	return true, b.call()
}

func gated(g *admit.Gate) policy {
	return func(ctx context.Context, class admit.Class, b *backend) (bool, bool) {
		p, err := g.AcquireFor(ctx, admit.Request{Class: class})
		if err != nil {
			return false, false
		}
		ok := b.call()
		if ok {
			p.Done(admit.OutcomeOK)
		} else {
			p.Done(admit.OutcomeDropped)
		}
		return true, ok
	}
}

func failsafe(l adaptivelimiter.AdaptiveLimiter[any], maxWait time.Duration) policy {
	return func(ctx context.Context, _ admit.Class, b *backend) (bool, bool) {
		p, err := l.AcquirePermitWithMaxWait(ctx, maxWait)
		if err != nil {
			return false, false
		}
		ok := b.call()
		if ok {
			p.Record()
		} else {
			p.Drop()
		}
		return true, ok
	}
}

type run struct {
	slots            int
	service, timeout time.Duration
	duration, warmup time.Duration
}

func (r run) capacity() float64 { return float64(r.slots) / r.service.Seconds() }

// drive offers load× capacity for the run's duration, a critical share
// of it critical and the rest sheddable (all critical when critical is 1),
// and returns the samples of requests that arrived after the warm-up.
func (r run) drive(load, critical float64, pol policy) []sample {
	return r.driveWith(load, critical, pol, nil, nil)
}

// counters are what a run has seen so far, read by the step table's
// sampler every tick: answers in time, late answers, refusals.
type counters struct {
	good, late, refused atomic.Int64
}

// driveWith is drive with a service-time schedule (nil: the run's service
// time throughout), applied on every tick of the arrival clock, and
// counters updated as requests end (nil: none).
func (r run) driveWith(load, critical float64, pol policy, schedule func(elapsed time.Duration) time.Duration, c *counters) []sample {
	b := newBackend(r.slots, r.service)
	rate := load * r.capacity()
	var (
		mu      sync.Mutex
		samples []sample
		wg      sync.WaitGroup
		n       atomic.Int64
	)
	start := time.Now()
	end := start.Add(r.duration)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
	for now := range tick.C {
		if now.After(end) {
			break
		}
		if schedule != nil {
			b.service.Store(int64(schedule(now.Sub(start))))
		}
		due := int(rate * now.Sub(start).Seconds())
		for ; sent < due; sent++ {
			class := admit.ClassSheddable
			// Spread evenly: request n is critical when the running count
			// of critical requests, n × share, steps up.
			if math.Floor(float64(sent+1)*critical) > math.Floor(float64(sent)*critical) {
				class = admit.ClassCritical
			}
			measured := now.Sub(start) >= r.warmup
			wg.Add(1)
			n.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
				admitted, ok := pol(ctx, class, b)
				cancel()
				lat := time.Since(t0)
				if c != nil {
					switch {
					case !admitted:
						c.refused.Add(1)
					case ok && lat <= r.timeout:
						c.good.Add(1)
					default:
						c.late.Add(1)
					}
				}
				if measured {
					mu.Lock()
					samples = append(samples, sample{class: class, admitted: admitted, ok: ok && lat <= r.timeout, latency: lat})
					mu.Unlock()
				}
			}()
		}
	}
	// Requests still waiting in the backend after the offered window are
	// late anyway; give answers in flight a deadline's time, then abandon
	// the backlog.
	time.Sleep(r.timeout)
	close(b.stop)
	wg.Wait()
	return samples
}

type row struct {
	goodput  float64 // share of capacity answered in time
	admitted float64 // share of offered that was admitted
	p99      time.Duration
}

func (r run) summarize(s []sample) row {
	var good int
	var lats []time.Duration
	var admitted int
	for _, x := range s {
		if x.ok {
			good++
		}
		if x.admitted {
			admitted++
			lats = append(lats, x.latency)
		}
	}
	window := (r.duration - r.warmup).Seconds()
	out := row{goodput: float64(good) / window / r.capacity()}
	if len(s) > 0 {
		out.admitted = float64(admitted) / float64(len(s))
	}
	if len(lats) > 0 {
		slices.Sort(lats)
		out.p99 = lats[min(len(lats)-1, len(lats)*99/100)]
	}
	return out
}

func main() {
	slots := flag.Int("slots", 8, "backend slots")
	service := flag.Duration("service", 10*time.Millisecond, "backend service time per request")
	timeout := flag.Duration("deadline", 100*time.Millisecond, "client deadline (an answer later than this does not count)")
	duration := flag.Duration("duration", 3*time.Second, "offered-load window per cell")
	warmup := flag.Duration("warmup", time.Second, "part of the window not measured (adaptive limits converge)")
	rounds := flag.Int("rounds", 1, "rounds per cell; the median is printed")
	slo := flag.Duration("slo", 0, "SLO of the adaptive gate's limit (0: half the deadline)")
	lawName := flag.String("law", "gradient2", "law of the adaptive gate: aimd, vegas or gradient2")
	criticals := flag.String("critical", "0.3,0.15", "shares of critical traffic in the priority tables at 5x, comma-separated")
	criticals10 := flag.String("critical10", "", "shares of critical traffic in the priority tables at 10x, comma-separated (none by default)")
	tables := flag.String("tables", "load,priority", "tables to print: load, priority, step")
	stepAt := flag.Duration("step-at", 2*time.Second, "step table: when the backend slows down")
	stepSlow := flag.Duration("step-for", 4*time.Second, "step table: how long it stays slow")
	stepAfter := flag.Duration("step-after", 3*time.Second, "step table: how long the run goes on after the backend recovers")
	stepFactor := flag.Float64("step-factor", 2, "step table: service time multiplier while slow")
	stepLoads := flag.String("step-loads", "2,1", "step table: offered loads (multiples of the normal capacity), comma-separated")
	stepPolicies := flag.String("step-policies", "fixed gate,adaptive gate,failsafe adaptive", "step table: policies, comma-separated")
	loadPolicies := flag.String("load-policies", "", "load table: policies, comma-separated (empty: all)")
	loads := flag.String("loads", "2,5,10", "load table: offered loads, comma-separated")
	series := flag.Bool("series", false, "step table: print each policy's time series (first round)")
	flag.Parse()
	r := run{slots: *slots, service: *service, timeout: *timeout, duration: *duration, warmup: *warmup}
	fmt.Printf("backend: %d slots x %v = %.0f req/s; client deadline %v; %v per cell (%v warm-up); %d round(s), median\n",
		r.slots, r.service, r.capacity(), r.timeout, r.duration, r.warmup, *rounds)

	maxWait := r.timeout / 4
	if *slo == 0 {
		*slo = r.timeout / 2
	}
	if _, err := limit.ParseLaw(*lawName); err != nil {
		check(err)
	}
	policies := []namedPolicy{
		{"no gate", func() instance { return instance{pol: none} }},
		{"fixed gate", func() instance {
			g := mustGate(admit.Config{Name: "fixed", Capacity: int64(r.slots), MaxWaiters: 2 * r.slots, MaxWait: maxWait})
			return instance{pol: gated(g), limit: g.Capacity}
		}},
		{"adaptive gate", func() instance {
			g, a := adaptiveGate(r, *lawName, *slo, limit.QueueWaitFor(*slo))
			return instance{pol: gated(g), limit: g.Capacity, adaptive: a}
		}},
		{"failsafe adaptive", func() instance {
			l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 200, 20).WithQueueing(2, 3).Build()
			return instance{pol: failsafe(l, maxWait), limit: func() int64 { return int64(l.Limit()) }}
		}},
	}
	fmt.Printf("gates: queue %d, max wait %v; adaptive: %s, SLO %v, limits 1..200 from 20\n\n", 2*r.slots, maxWait, *lawName, *slo)
	if strings.Contains(*tables, "load") {
		pols := policies
		if *loadPolicies != "" {
			pols = nil
			for _, p := range policies {
				if slices.Contains(strings.Split(*loadPolicies, ","), p.name) {
					pols = append(pols, p)
				}
			}
		}
		loadTable(r, maxWait, pols, *rounds, *loads)
	}
	if strings.Contains(*tables, "step") {
		var loads []float64
		for f := range strings.SplitSeq(*stepLoads, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v <= 0 {
				check(fmt.Errorf("-step-loads %q: want positive multiples", f))
			}
			loads = append(loads, v)
		}
		if *stepFactor <= 0 || *stepAt <= r.warmup || *stepSlow < 2*time.Second || *stepAfter < 2*time.Second {
			check(fmt.Errorf("step table: want -step-factor > 0, -step-at after -warmup, -step-for and -step-after of 2s or more"))
		}
		var pols []namedPolicy
		for _, p := range policies {
			if slices.Contains(strings.Split(*stepPolicies, ","), p.name) {
				pols = append(pols, p)
			}
		}
		stepTable(r, stepSpec{at: *stepAt, slow: *stepSlow, after: *stepAfter, factor: *stepFactor, tick: 100 * time.Millisecond}, loads, pols, *rounds, *series)
	}
	if strings.Contains(*tables, "priority") {
		for f := range strings.SplitSeq(*criticals10, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			c, err := strconv.ParseFloat(f, 64)
			if err != nil || c < 0 || c > 1 {
				check(fmt.Errorf("-critical10 %q: want fractions in [0, 1]", f))
			}
			priorityTable(r, maxWait, 10, c, *rounds)
		}
		for f := range strings.SplitSeq(*criticals, ",") {
			c, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || c < 0 || c > 1 {
				check(fmt.Errorf("-critical %q: want fractions in [0, 1]", f))
			}
			priorityTable(r, maxWait, 5, c, *rounds)
		}
	}
}

type namedPolicy struct {
	name string
	make func() instance
}

// instance is one policy's state for one run: how it admits, and (for
// gates) how to read its current limit.
type instance struct {
	pol      policy
	limit    func() int64 // nil: no limit (no gate)
	adaptive *limit.Adaptive
}

// adaptiveGate is the adaptive gate as `sluice serve --limit LAW --slo SLO
// --queue 2×slots --max-inflight 20 --limit-min 1 --limit-max 200` builds
// it: the limit's Config carries only what those flags set, everything
// else is the limit package's defaults, and the queue's wait is serve's
// default with an SLO (limit.QueueWaitFor: a quarter of it).
func adaptiveGate(r run, law string, slo, maxWait time.Duration) (*admit.Gate, *limit.Adaptive) {
	l, err := limit.ParseLaw(law)
	check(err)
	g, a, err := limit.NewGate(admit.Config{Name: "adaptive", Capacity: 20, MaxWaiters: 2 * r.slots, MaxWait: maxWait},
		&limit.Config{Law: l, Min: 1, Max: 200, SLO: slo})
	check(err)
	return g, a
}

func loadTable(r run, maxWait time.Duration, policies []namedPolicy, rounds int, loadList string) {
	fmt.Println("| offered | policy | goodput (of capacity) | admitted (of offered) | admitted p99 (each round) |")
	fmt.Println("|---|---|---|---|---|")
	for f := range strings.SplitSeq(loadList, ",") {
		load, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || load <= 0 {
			check(fmt.Errorf("-loads %q: want positive multiples", f))
		}
		// Rounds interleave the policies, so a noisy moment of a shared
		// machine hits them alike rather than one policy's every round.
		rows := make([][]row, len(policies))
		for range rounds {
			for i, p := range policies {
				rows[i] = append(rows[i], r.summarize(r.drive(load, 1, p.make().pol)))
			}
		}
		for i, p := range policies {
			rows := rows[i]
			// Each column's own median, and every round's p99.
			var good, adm, p99 []float64
			var each []string
			for _, x := range rows {
				good, adm, p99 = append(good, x.goodput), append(adm, x.admitted), append(p99, float64(x.p99))
				each = append(each, fmtMs(x.p99))
			}
			fmt.Printf("| %.0fx | %s | %.1f%% | %.1f%% | %s (%s) |\n", load, p.name, 100*medianF(good), 100*medianF(adm),
				fmtMs(time.Duration(medianF(p99))), strings.Join(each, " "))
		}
	}
}

func priorityTable(r run, maxWait time.Duration, load, critical float64, rounds int) {
	fmt.Printf("\npriorities at %.0fx, %g%% critical, the rest sheddable; %d round(s), each shown\n\n", load, 100*critical, rounds)
	fmt.Println("| gate | critical offered (of capacity) | critical goodput (of its offered), per round | sheddable goodput (of its offered), per round | sheddable goodput (of capacity), per round | sheddable refused: shed (mean per round) |")
	fmt.Println("|---|---|---|---|---|---|")
	prio := []struct {
		name string
		cfg  admit.Config
	}{
		{"fixed, FIFO, no classes", admit.Config{Name: "nocls", Capacity: int64(r.slots), MaxWaiters: 4 * r.slots, MaxWait: maxWait}},
		{"fixed, classes", admit.Config{Name: "cls", Capacity: int64(r.slots), MaxWaiters: 4 * r.slots, MaxWait: maxWait, Queueing: admit.Queueing{ClassAging: -1}}},
		{"fixed, classes, sheddable share 0.1", admit.Config{
			Name:       "share",
			Capacity:   int64(r.slots),
			MaxWaiters: 4 * r.slots,
			MaxWait:    maxWait,
			Queueing:   admit.Queueing{ClassAging: -1, ClassShares: admit.ClassShares{admit.ClassSheddable: 0.1}},
		}},
	}
	for _, p := range prio {
		var crit, shed, shedCap []string
		var critOffered float64
		var sheds uint64
		for range rounds {
			cfg := p.cfg
			classes := cfg.Name != "nocls"
			g := mustGate(cfg)
			pol := gated(g)
			if !classes {
				inner := pol
				pol = func(ctx context.Context, _ admit.Class, b *backend) (bool, bool) {
					return inner(ctx, admit.ClassCritical, b)
				}
			}
			s := r.drive(load, critical, pol)
			var off, good [admit.NumClasses]int
			for _, x := range s {
				off[x.class]++
				if x.ok {
					good[x.class]++
				}
			}
			share := func(c admit.Class) string {
				if off[c] == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f", 100*float64(good[c])/float64(off[c]))
			}
			window := (r.duration - r.warmup).Seconds()
			critOffered = float64(off[admit.ClassCritical]) / window / r.capacity()
			crit, shed = append(crit, share(admit.ClassCritical)), append(shed, share(admit.ClassSheddable))
			shedCap = append(shedCap, fmt.Sprintf("%.1f", 100*float64(good[admit.ClassSheddable])/window/r.capacity()))
			sheds += g.Stats().Classes[admit.ClassSheddable].Rejected[admit.ReasonShed]
		}
		fmt.Printf("| %s | %.0f%% | %s%% | %s%% | %s%% | %d |\n", p.name, 100*critOffered,
			strings.Join(crit, " "), strings.Join(shed, " "), strings.Join(shedCap, " "), sheds/uint64(rounds))
	}
}

func fmtMs(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func mustGate(cfg admit.Config) *admit.Gate {
	g, err := admit.New(cfg)
	check(err)
	return g
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
}

// stepSpec is the step table's scenario: the backend's service time is
// multiplied by factor from at to at+slow, then restored; the run lasts
// until at+slow+after.
type stepSpec struct {
	at, slow, after time.Duration
	factor          float64
	tick            time.Duration
}

// point is one tick of a step run: the policy's limit and what ended in
// the tick (answers in time, refusals, late answers), as rates per second.
type point struct {
	t                   time.Duration
	service             time.Duration
	limit               int64
	why                 string // the adaptive limit's last decision, for -series
	good, refused, late float64
}

// stepSummary condenses one step run.
type stepSummary struct {
	before, final              float64       // limit: median before the change, median over the last second of the slow period
	settle                     time.Duration // after the change, until the limit stays within ±20% of final (-1: never)
	bandLo, bandHi             float64       // after settling, the limit's extremes relative to final
	recover                    time.Duration // after the restore, until goodput is back to 90% of full for 3 ticks (-1: never)
	refusedSteady              float64       // refusals per second before the change (after warm-up)
	refusedRecovery            float64       // refusals per second in the 2 s after the restore
	burstSteady, burstRecovery float64       // the highest refusal rate of one tick in the same periods
	goodSlow                   float64       // goodput during the settled slow period, of its capacity
}

func (r run) stepRun(load float64, spec stepSpec, inst instance) ([]point, stepSummary) {
	run := r
	run.duration = spec.at + spec.slow + spec.after
	slow := time.Duration(float64(r.service) * spec.factor)
	schedule := func(el time.Duration) time.Duration {
		if el >= spec.at && el < spec.at+spec.slow {
			return slow
		}
		return r.service
	}
	var c counters
	var pts []point
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(spec.tick)
		defer t.Stop()
		start := time.Now()
		var lastGood, lastRef, lastLate int64
		per := spec.tick.Seconds()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				el := now.Sub(start)
				if el > run.duration {
					continue
				}
				g, rf, lt := c.good.Load(), c.refused.Load(), c.late.Load()
				p := point{t: el.Round(spec.tick), service: schedule(el), good: float64(g-lastGood) / per,
					refused: float64(rf-lastRef) / per, late: float64(lt-lastLate) / per}
				if inst.limit != nil {
					p.limit = inst.limit()
				}
				if inst.adaptive != nil {
					st := inst.adaptive.State()
					p.why = fmt.Sprintf("%s/%s lat=%v base=%v ceil=%v", st.Decision, st.Why, st.Latency.Round(100*time.Microsecond), st.Baseline.Round(100*time.Microsecond), st.Ceiling)
				}
				pts = append(pts, p)
				lastGood, lastRef, lastLate = g, rf, lt
			}
		}
	}()
	run.driveWith(load, 1, inst.pol, schedule, &c)
	close(done)
	<-sampled
	return pts, summarizeStep(r, load, spec, pts)
}

func summarizeStep(r run, load float64, spec stepSpec, pts []point) stepSummary {
	var s stepSummary
	restore := spec.at + spec.slow
	var before, last []float64
	var steadyRef, recRef []float64
	for _, p := range pts {
		switch {
		case p.t >= r.warmup && p.t < spec.at:
			before = append(before, float64(p.limit))
			steadyRef = append(steadyRef, p.refused)
		case p.t >= restore-time.Second && p.t < restore:
			last = append(last, float64(p.limit))
		case p.t >= restore && p.t < restore+2*time.Second:
			recRef = append(recRef, p.refused)
		}
	}
	s.before, s.final = medianF(before), medianF(last)
	s.refusedSteady, s.burstSteady = meanF(steadyRef), slices.Max(append(steadyRef, 0))
	s.refusedRecovery, s.burstRecovery = meanF(recRef), slices.Max(append(recRef, 0))
	// Settle: the first tick after the change from which every tick up to
	// the restore is within ±20% of final.
	s.settle = -1
	var slowPts []point
	for _, p := range pts {
		if p.t > spec.at && p.t < restore {
			slowPts = append(slowPts, p)
		}
	}
	for i := len(slowPts) - 1; i >= 0; i-- {
		v := float64(slowPts[i].limit)
		if s.final > 0 && (v < 0.8*s.final || v > 1.2*s.final) {
			break
		}
		s.settle = slowPts[i].t - spec.at
	}
	if s.settle >= 0 && s.final > 0 {
		s.bandLo, s.bandHi = math.Inf(1), math.Inf(-1)
		var good []float64
		for _, p := range slowPts {
			if p.t-spec.at >= s.settle {
				s.bandLo = math.Min(s.bandLo, float64(p.limit)/s.final-1)
				s.bandHi = math.Max(s.bandHi, float64(p.limit)/s.final-1)
				good = append(good, p.good)
			}
		}
		s.goodSlow = meanF(good) / (r.capacity() / spec.factor)
	}
	// Recovery: full goodput is the offered load, up to the capacity.
	full := math.Min(load, 1) * r.capacity()
	s.recover = -1
	var after []point
	for _, p := range pts {
		if p.t > restore {
			after = append(after, p)
		}
	}
	for i := 0; i+2 < len(after); i++ {
		if after[i].good >= 0.9*full && after[i+1].good >= 0.9*full && after[i+2].good >= 0.9*full {
			s.recover = after[i].t - restore
			break
		}
	}
	return s
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func meanF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func stepTable(r run, spec stepSpec, loads []float64, policies []namedPolicy, rounds int, series bool) {
	fmt.Printf("\nstep: service %v -> %v at %v for %v, then back; %v after; sampled every %v\n\n",
		r.service, time.Duration(float64(r.service)*spec.factor), spec.at, spec.slow, spec.after, spec.tick)
	fmt.Println("| offered | policy | limit before | limit settled at | settled after | band after settling | goodput while slow (of its capacity) | back to 90% goodput after | refusals/s steady (worst tick) | refusals/s 2 s after restore (worst tick) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	type kept struct {
		name string
		load float64
		pts  []point
	}
	var traces []kept
	for _, load := range loads {
		for _, p := range policies {
			var sums []stepSummary
			var runs [][]point
			for range rounds {
				pts, s := r.stepRun(load, spec, p.make())
				sums = append(sums, s)
				runs = append(runs, pts)
			}
			m := func(f func(stepSummary) float64) float64 {
				var v []float64
				for _, s := range sums {
					v = append(v, f(s))
				}
				return medianF(v)
			}
			dur := func(f func(stepSummary) time.Duration) string {
				var v []float64
				for _, s := range sums {
					d := f(s)
					if d < 0 {
						d = time.Hour // never: sorts last
					}
					v = append(v, float64(d))
				}
				all := make([]string, len(v))
				for i, x := range v {
					all[i] = fmtDur(time.Duration(x))
				}
				return fmt.Sprintf("%s (%s)", fmtDur(time.Duration(medianF(v))), strings.Join(all, " "))
			}
			fmt.Printf("| %.0fx | %s | %.0f | %.0f | %s | %+.0f%%..%+.0f%% | %.0f%% | %s | %.0f (%.0f) | %.0f (%.0f) |\n",
				load, p.name, m(func(s stepSummary) float64 { return s.before }), m(func(s stepSummary) float64 { return s.final }),
				dur(func(s stepSummary) time.Duration { return s.settle }),
				100*m(func(s stepSummary) float64 { return s.bandLo }), 100*m(func(s stepSummary) float64 { return s.bandHi }),
				100*m(func(s stepSummary) float64 { return s.goodSlow }),
				dur(func(s stepSummary) time.Duration { return s.recover }),
				m(func(s stepSummary) float64 { return s.refusedSteady }), m(func(s stepSummary) float64 { return s.burstSteady }),
				m(func(s stepSummary) float64 { return s.refusedRecovery }), m(func(s stepSummary) float64 { return s.burstRecovery }))
			traces = append(traces, kept{p.name, load, runs[0]})
		}
	}
	if !series {
		return
	}
	for _, tr := range traces {
		fmt.Printf("\nseries, %s at %.0fx (first round): t, service, limit, good/s, refused/s, late/s\n", tr.name, tr.load)
		for _, p := range tr.pts {
			fmt.Printf("%5.1f %5v %4d %6.0f %6.0f %6.0f %s\n", p.t.Seconds(), p.service, p.limit, p.good, p.refused, p.late, p.why)
		}
	}
}

func fmtDur(d time.Duration) string {
	if d >= time.Hour {
		return "never"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
