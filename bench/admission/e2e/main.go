// Command e2e drives an in-process backend of known capacity (N slots,
// each request holding one for a fixed service time) open-loop at
// multiples of that capacity, through no gate, a fixed sluice gate, an
// adaptive sluice gate and failsafe-go's adaptive limiter, and prints
// goodput (answers within the client's deadline, as a share of capacity)
// and the p99 latency of admitted requests. A second table runs the
// priority scenario: at 5× with a share of critical traffic, what each
// class got of what it offered.
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
	service time.Duration
	stop    chan struct{} // closed at the end of a run: abandon the backlog
}

// call serves one request: wait for a slot (however long), hold it for
// the service time. It reports false if the run ended first.
func (b *backend) call() bool {
	select {
	case b.slots <- struct{}{}:
	case <-b.stop:
		return false
	}
	time.Sleep(b.service)
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
	b := &backend{slots: make(chan struct{}, r.slots), service: r.service, stop: make(chan struct{})}
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
		due := int(rate * now.Sub(start).Seconds())
		for ; sent < due; sent++ {
			class := admit.ClassSheddable
			if float64(sent%100) < critical*100 {
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
	criticals := flag.String("critical", "0.3,0.15", "shares of critical traffic in the priority tables, comma-separated")
	tables := flag.String("tables", "load,priority", "tables to print: load, priority")
	flag.Parse()
	r := run{slots: *slots, service: *service, timeout: *timeout, duration: *duration, warmup: *warmup}
	fmt.Printf("backend: %d slots x %v = %.0f req/s; client deadline %v; %v per cell (%v warm-up); %d round(s), median\n",
		r.slots, r.service, r.capacity(), r.timeout, r.duration, r.warmup, *rounds)

	maxWait := r.timeout / 4
	if *slo == 0 {
		*slo = r.timeout / 2
	}
	law, err := limit.ParseLaw(*lawName)
	check(err)
	policies := []namedPolicy{
		{"no gate", func() policy { return none }},
		{"fixed gate", func() policy {
			return gated(mustGate(admit.Config{Name: "fixed", Capacity: int64(r.slots), MaxWaiters: 2 * r.slots, MaxWait: maxWait}))
		}},
		{"adaptive gate", func() policy {
			a, err := limit.New(limit.Config{Law: law, Min: 1, Max: 200, Initial: 20, SLO: *slo})
			check(err)
			g := mustGate(admit.Config{Name: "adaptive", Capacity: 20, MaxWaiters: 2 * r.slots, MaxWait: maxWait, Observer: a})
			check(a.Attach(g))
			return gated(g)
		}},
		{"failsafe adaptive", func() policy {
			l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 200, 20).WithQueueing(2, 3).Build()
			return failsafe(l, maxWait)
		}},
	}
	fmt.Printf("gates: queue %d, max wait %v; adaptive: %s, SLO %v, limits 1..200 from 20\n\n", 2*r.slots, maxWait, *lawName, *slo)
	if strings.Contains(*tables, "load") {
		loadTable(r, maxWait, policies, *rounds)
	}
	if strings.Contains(*tables, "priority") {
		for f := range strings.SplitSeq(*criticals, ",") {
			c, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || c < 0 || c > 1 {
				check(fmt.Errorf("-critical %q: want fractions in [0, 1]", f))
			}
			priorityTable(r, maxWait, c)
		}
	}
}

type namedPolicy struct {
	name string
	make func() policy
}

func loadTable(r run, maxWait time.Duration, policies []namedPolicy, rounds int) {
	fmt.Println("| offered | policy | goodput (of capacity) | admitted (of offered) | admitted p99 |")
	fmt.Println("|---|---|---|---|---|")
	for _, load := range []float64{2, 5, 10} {
		for _, p := range policies {
			var rows []row
			for range rounds {
				rows = append(rows, r.summarize(r.drive(load, 1, p.make())))
			}
			m := median(rows)
			fmt.Printf("| %.0fx | %s | %.1f%% | %.1f%% | %v |\n", load, p.name, 100*m.goodput, 100*m.admitted, m.p99.Round(100*time.Microsecond))
		}
	}
}

func priorityTable(r run, maxWait time.Duration, critical float64) {
	fmt.Printf("\npriorities at 5x, %.0f%% critical, the rest sheddable\n\n", 100*critical)
	fmt.Println("| gate | critical offered (of capacity) | critical goodput (of its offered) | sheddable goodput (of its offered) | sheddable refused: shed |")
	fmt.Println("|---|---|---|---|---|")
	prio := []struct {
		name string
		cfg  admit.Config
	}{
		{"fixed, FIFO, no classes", admit.Config{Name: "nocls", Capacity: int64(r.slots), MaxWaiters: 4 * r.slots, MaxWait: maxWait}},
		{"fixed, classes", admit.Config{Name: "cls", Capacity: int64(r.slots), MaxWaiters: 4 * r.slots, MaxWait: maxWait, ClassAging: -1}},
		{"fixed, classes, sheddable share 0.1", admit.Config{Name: "share", Capacity: int64(r.slots), MaxWaiters: 4 * r.slots, MaxWait: maxWait, ClassAging: -1,
			ClassShares: admit.ClassShares{admit.ClassSheddable: 0.1}}},
	}
	for _, p := range prio {
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
		s := r.drive(5, critical, pol)
		var off, good [admit.NumClasses]int
		for _, x := range s {
			off[x.class]++
			if x.ok {
				good[x.class]++
			}
		}
		st := g.Stats()
		share := func(c admit.Class) float64 {
			if off[c] == 0 {
				return 0
			}
			return 100 * float64(good[c]) / float64(off[c])
		}
		window := (r.duration - r.warmup).Seconds()
		fmt.Printf("| %s | %.0f%% | %.1f%% | %.1f%% | %d |\n", p.name, 100*float64(off[admit.ClassCritical])/window/r.capacity(),
			share(admit.ClassCritical), share(admit.ClassSheddable), st.Classes[admit.ClassSheddable].Rejected[admit.ReasonShed])
	}
}

func median(rows []row) row {
	slices.SortFunc(rows, func(a, b row) int {
		switch {
		case a.goodput < b.goodput:
			return -1
		case a.goodput > b.goodput:
			return 1
		}
		return 0
	})
	return rows[len(rows)/2]
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
