package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/static"
)

// Variant names one of the servers the demo compares.
type Variant string

// The variants, in the order the demo runs them.
const (
	// NoGate admits every request: a gate so wide it never refuses.
	NoGate Variant = "no-gate"
	// RequestScope takes the slot for every request before the cache is
	// looked up (static.ScopeRequest): the historical bug.
	RequestScope Variant = "request-scope"
	// DiskScope takes the slot right before a disk read (static.ScopeDisk)
	// with a fixed number of slots: the fix.
	DiskScope Variant = "disk-scope"
	// Adaptive is DiskScope whose number of slots is moved by package
	// limit from the hold times it observes.
	Adaptive Variant = "adaptive"
)

// Variants returns every variant, in the demo's order.
func Variants() []Variant { return []Variant{NoGate, RequestScope, DiskScope, Adaptive} }

// ParseVariant parses a variant's name.
func ParseVariant(s string) (Variant, error) {
	for _, v := range Variants() {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("%w: unknown variant %q (want no-gate, request-scope, disk-scope or adaptive)", ErrInvalidConfig, s)
}

// Describe says in a few words what the variant is.
func (v Variant) Describe() string {
	switch v {
	case NoGate:
		return "no gate: every request admitted"
	case RequestScope:
		return "fixed gate, slot taken per request before the cache lookup (the bug)"
	case DiskScope:
		return "fixed gate, slot taken only for the disk read (the fix)"
	case Adaptive:
		return "disk-scoped gate whose slots package limit moves"
	}
	return string(v)
}

// Defaults applied to zero Config fields.
const (
	DefaultStepDuration  = 2 * time.Second
	DefaultWorkLimit     = static.DefaultWorkLimit
	DefaultCapacityProbe = time.Second
	DefaultLaw           = "vegas"
)

// DefaultMultipliers are the steps of the overload, as multiples of the
// measured capacity.
func DefaultMultipliers() []float64 { return []float64{1, 2, 5, 10} }

// MaxMultiplier bounds a step: far enough past any capacity the demo's
// disk has to show what overload does, near enough that one process can
// drive it.
const MaxMultiplier = 100

// MaxStepDuration bounds Config.StepDuration: the demo is meant to be
// short.
const MaxStepDuration = time.Minute

// ErrInvalidConfig is wrapped by every error Run returns for a bad Config.
var ErrInvalidConfig = errors.New("demo: invalid config")

// ErrNoCapacity is returned when the capacity probe completed no request:
// the machine is too busy, or something is broken.
var ErrNoCapacity = errors.New("demo: the capacity probe completed no request")

// Config configures Run. The zero Config is the demo as `sluice demo`
// runs it: the four variants, steps of 1×, 2×, 5× and 10× the measured
// capacity, 2 s each, a 16-slot gate, a disk of 4 channels at 40 ms a
// read, and a Vegas adaptive limit.
type Config struct {
	// StepDuration is how long each step of the overload lasts. Zero
	// means DefaultStepDuration; negative or over MaxStepDuration is an
	// error.
	StepDuration time.Duration
	// Multipliers are the steps, as multiples of the measured capacity.
	// Nil means DefaultMultipliers; each must be in (0, MaxMultiplier].
	Multipliers []float64
	// Variants to run, in order. Nil means Variants(); duplicates are an
	// error.
	Variants []Variant
	// Disk models the slow disk (see Disk).
	Disk Disk
	// WorkLimit is the fixed gates' number of slots, and the adaptive
	// gate's starting point. Zero means DefaultWorkLimit; negative is an
	// error.
	WorkLimit int64
	// Law names the adaptive variant's law (limit.ParseLaw): aimd, vegas
	// or gradient2. Empty means DefaultLaw.
	Law string
	// SLO is the adaptive limit's latency ceiling on disk hold times.
	// Zero means ten disk service times; negative is an error.
	SLO time.Duration
	// CapacityProbe is how long capacity is measured. Zero means
	// DefaultCapacityProbe; negative is an error.
	CapacityProbe time.Duration
	// Capacity, when positive, skips the probe and uses this many
	// uncached requests per second as 1×. Zero means measure it;
	// negative is an error.
	Capacity float64
	// Progress, if not nil, is called when capacity measuring starts and
	// then whenever one of the two drivers reports (each about once a
	// second), from the drivers' goroutines, never two calls at once.
	Progress func(Progress)
	// Logger receives the servers' and the adaptive limit's records. Nil
	// is silent.
	Logger *slog.Logger
}

// Progress is the live view of a running demo.
type Progress struct {
	// Stage is "capacity" while capacity is measured, else "load".
	Stage    string
	Variant  Variant
	Index    int // of the variant, from 0
	Variants int
	// Step is the index of the step the elapsed time falls in; Multiplier
	// its multiple of capacity.
	Step       int
	Multiplier float64
	Elapsed    time.Duration
	// Cached and Uncached are the two drivers' running windows.
	Cached, Uncached load.Progress
}

type settings struct {
	step      time.Duration
	mults     []float64
	variants  []Variant
	disk      Disk
	workLimit int64
	law       string
	slo       time.Duration
	probe     time.Duration
	capacity  float64
}

func (c Config) resolve() (settings, error) {
	s := settings{
		step: c.StepDuration, mults: c.Multipliers, variants: c.Variants, disk: c.Disk.withDefaults(),
		workLimit: c.WorkLimit, law: c.Law, slo: c.SLO, probe: c.CapacityProbe, capacity: c.Capacity,
	}
	bad := func(format string, args ...any) (settings, error) {
		return settings{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case s.step == 0:
		s.step = DefaultStepDuration
	case s.step < 0 || s.step > MaxStepDuration:
		return bad("step duration %v: want more than 0 and at most %v", s.step, MaxStepDuration)
	}
	if s.mults == nil {
		s.mults = DefaultMultipliers()
	}
	if len(s.mults) == 0 {
		return bad("no steps")
	}
	for _, m := range s.mults {
		if !(m > 0 && m <= MaxMultiplier) {
			return bad("step %v× of capacity: want more than 0 and at most %d", m, MaxMultiplier)
		}
	}
	if s.variants == nil {
		s.variants = Variants()
	}
	if len(s.variants) == 0 {
		return bad("no variants")
	}
	seen := map[Variant]bool{}
	for _, v := range s.variants {
		if _, err := ParseVariant(string(v)); err != nil {
			return settings{}, err
		}
		if seen[v] {
			return bad("variant %s given twice", v)
		}
		seen[v] = true
	}
	if s.disk.Channels < 0 || s.disk.Service < 0 {
		return bad("disk channels %d, service %v: want 0 or more", s.disk.Channels, s.disk.Service)
	}
	if s.disk.Channels > 1024 {
		return bad("disk channels %d: at most 1024", s.disk.Channels)
	}
	switch {
	case s.workLimit == 0:
		s.workLimit = DefaultWorkLimit
	case s.workLimit < 0 || s.workLimit > admit.MaxCapacity:
		return bad("work limit %d: want 1..%d", s.workLimit, admit.MaxCapacity)
	}
	if s.law == "" {
		s.law = DefaultLaw
	}
	if _, err := limit.ParseLaw(s.law); err != nil {
		return bad("%v", err)
	}
	switch {
	case s.slo == 0:
		s.slo = 10 * s.disk.Service
	case s.slo < 0:
		return bad("SLO %v: want 0 or more", s.slo)
	}
	switch {
	case s.probe == 0:
		s.probe = DefaultCapacityProbe
	case s.probe < 0 || s.probe > MaxStepDuration:
		return bad("capacity probe %v: want more than 0 and at most %v", s.probe, MaxStepDuration)
	}
	if s.capacity < 0 || math.IsNaN(s.capacity) || math.IsInf(s.capacity, 0) {
		return bad("capacity %v: want 0 (measure it) or more", s.capacity)
	}
	return s, nil
}

// Result is what a demo run measured.
type Result struct {
	// Capacity is the uncached requests per second the disk completed in
	// the probe (or Config.Capacity): the 1× of every step.
	Capacity float64
	// Measured says Capacity came from the probe.
	Measured bool
	// Settings the run used.
	StepDuration time.Duration
	Multipliers  []float64
	Disk         Disk
	WorkLimit    int64
	Law          string
	SLO          time.Duration
	Started      time.Time
	Elapsed      time.Duration
	Runs         []VariantResult
}

// VariantResult is one variant under the stepped overload.
type VariantResult struct {
	Variant Variant
	Steps   []Step
	// Cached and Uncached are the two drivers' full reports.
	Cached, Uncached *load.Report
	// Gate is the disk gate's counters after the run.
	Gate admit.Stats
	// BooksClosed says the gate's counters add up after the run: every
	// admitted request completed, nothing in flight or waiting.
	BooksClosed bool
	// DiskReads is how many reads the slow disk did.
	DiskReads int64
	// Limit samples the adaptive gate's capacity (its slots) every 50 ms
	// over the run (Adaptive only).
	Limit []LimitSample
	// DriverLimited says a driver could not keep its timetable in this
	// run (the machine was too busy): its figures understate the load.
	DriverLimited bool
}

// LimitSample is the adaptive limit at an offset from the run's start.
type LimitSample struct {
	At    time.Duration
	Limit int64
}

// Step is one step of one variant.
type Step struct {
	Multiplier         float64
	Cached, Uncached   Class
	OfferedPerSecond   float64 // both classes together
	GoodputPerSecond   float64 // ok answers of both classes per second
	RefusedPercent     float64 // of both classes' scheduled requests
	DurationSeconds    float64
	CachedShareOfTotal float64 // of the offered requests
}

// DriverWorkers and DriverQueue size each of the demo's two drivers: at
// most DriverWorkers requests of a kind in flight and DriverQueue waiting
// in the driver; an arrival that finds both full is dropped (lost).
const (
	DriverWorkers = 64
	DriverQueue   = 64
)

// Ceiling is the longest an answered request can have waited when a
// driver is full: DriverWorkers + DriverQueue requests ahead of it at a
// disk that completes Capacity a second, plus its own read. When a step
// drops requests, its p99 sits near this ceiling because the driver
// allows no more, not because the server is that fast (Class.P99Capped).
func (res *Result) Ceiling() time.Duration { return ceiling(res.Capacity, res.Disk.Service) }

func ceiling(capacity float64, service time.Duration) time.Duration {
	if !(capacity > 0) {
		return 0
	}
	return time.Duration(float64(DriverWorkers+DriverQueue)/capacity*float64(time.Second)) + service
}

// Class is one kind of work in one step.
type Class struct {
	Offered float64 // scheduled requests per second
	// Goodput is ok answers per second.
	Goodput float64
	// Scheduled, OK, Refused, Dropped (by the driver: never sent) and
	// Errors count requests.
	Scheduled, OK, Refused, Dropped, Errors int64
	// RefusedPercent is Refused over Scheduled, in percent.
	RefusedPercent float64
	// P99 is the 99th percentile response time of ok answers, from their
	// scheduled time (milliseconds); NaN when none was ok.
	P99 float64
	// P99Capped says the p99 sits at the driver's ceiling (uncached work
	// only): the driver dropped requests in this step, its workers and
	// queue full, while the requests it did send waited at least half of
	// Result.Ceiling, the most it allows. P99 is then a floor for what
	// clients would see, set by the driver, not a measure of the server.
	// (Drops while answers were quick, a machine too busy for the driver,
	// do not cap anything.)
	P99Capped bool
}

// Run measures capacity, then runs the stepped overload against each
// variant in turn, and returns what it measured. It starts and stops every
// server itself, on 127.0.0.1 listeners with ports the system picks; when
// it returns, nothing it started is still running. A canceled ctx stops
// the run with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	res := &Result{
		StepDuration: s.step, Multipliers: s.mults, Disk: s.disk, WorkLimit: s.workLimit,
		Law: s.law, SLO: s.slo, Started: time.Now().UTC(), Capacity: s.capacity,
	}
	start := time.Now()
	if res.Capacity == 0 {
		if cfg.Progress != nil {
			cfg.Progress(Progress{Stage: "capacity", Variants: len(s.variants)})
		}
		c, err := measureCapacity(ctx, s, cfg.Logger)
		if err != nil {
			return nil, err
		}
		res.Capacity, res.Measured = c, true
	}
	for i, v := range s.variants {
		r, err := runVariant(ctx, s, cfg, res.Capacity, v, i)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, *r)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// instance is one variant's server, running.
type instance struct {
	handler  *static.Handler
	disk     *slowDisk
	site     *site
	adaptive *limit.Adaptive
	srv      *server.Server
	url      string
	stop     func() error
}

// startInstance builds the variant's static handler over a fresh slow
// disk, mounts it on the server frame (main and admin listeners on
// 127.0.0.1, ports picked by the system) and serves it.
func startInstance(ctx context.Context, s settings, v Variant, logger *slog.Logger) (*instance, error) {
	in := &instance{site: newSite()}
	in.disk = newSlowDisk(in.site.files, s.disk)
	cfg := static.Config{
		FS:                in.disk,
		WorkLimit:         s.workLimit,
		MaxCachedFileSize: maxCachedFileSize,
		Revalidate:        time.Hour, // the files never change; no stat on the hot path
		Logger:            logger,
	}
	switch v {
	case NoGate:
		cfg.WorkLimit = admit.MaxCapacity
	case RequestScope:
		cfg.Scope = static.ScopeRequest
	case DiskScope:
		cfg.Scope = static.ScopeDisk
	case Adaptive:
		law, err := limit.ParseLaw(s.law)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		cfg.Limit = &limit.Config{Law: law, Min: 1, Max: 4 * s.workLimit, SLO: s.slo, Logger: logger}
	}
	h, err := static.New(cfg)
	if err != nil {
		return nil, err
	}
	in.handler, in.adaptive = h, h.Limit()
	var lc net.ListenConfig
	mainLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	adminLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		mainLn.Close()
		h.Close()
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	srv, err := server.Listen(ctx, server.Config{
		Listener: mainLn, AdminListener: adminLn, Handler: h, Gates: []*admit.Gate{h.Gate()},
		ShutdownTimeout: 5 * time.Second, Logger: logger,
	})
	if err != nil {
		mainLn.Close()
		adminLn.Close()
		h.Close()
		return nil, err
	}
	in.srv = srv
	in.url = "http://" + srv.Addr().String()
	srvCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(srvCtx) }()
	in.stop = func() error {
		cancel()
		err := <-done
		h.Close()
		return err
	}
	// Warm the cache: one disk read per hot file, before any load.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, p := range in.site.hot {
		resp, err := client.Get(in.url + p)
		if err != nil {
			in.stop()
			return nil, fmt.Errorf("demo: warming the cache: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			in.stop()
			return nil, fmt.Errorf("demo: warming the cache: %s: %s", p, resp.Status)
		}
	}
	return in, nil
}

func targets(base string, paths []string) []load.Target {
	ts := make([]load.Target, len(paths))
	for i, p := range paths {
		ts[i] = load.Target{URL: base + p}
	}
	return ts
}

// measureCapacity runs a closed loop of uncached requests, four per disk
// channel, against an ungated server, and returns the ok answers per
// second: what the disk can complete.
func measureCapacity(ctx context.Context, s settings, logger *slog.Logger) (float64, error) {
	in, err := startInstance(ctx, s, NoGate, logger)
	if err != nil {
		return 0, err
	}
	st, end, err := load.RunStep(ctx, load.Config{
		Targets:     targets(in.url, in.site.cold),
		Concurrency: 4 * s.disk.Channels,
		Duration:    s.probe,
		Label:       "capacity",
	})
	if serr := in.stop(); err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil || end == load.EndInterrupted {
		return 0, context.Cause(ctx)
	}
	if len(st.Windows) == 0 || st.Windows[0].Counts.OK == 0 {
		return 0, ErrNoCapacity
	}
	w := st.Windows[0]
	// Over the time the window really took: a closed loop's last requests
	// end after its scheduled length.
	return float64(w.Counts.OK) / math.Max(w.ElapsedS, w.DurationS), nil
}

// runVariant runs the stepped overload against one variant: two open-loop
// drivers at once, one for cached and one for uncached work, each at the
// step's multiple of capacity.
func runVariant(ctx context.Context, s settings, cfg Config, capacity float64, v Variant, index int) (*VariantResult, error) {
	in, err := startInstance(ctx, s, v, cfg.Logger)
	if err != nil {
		return nil, err
	}
	rates := make([]float64, len(s.mults))
	for i, m := range s.mults {
		rates[i] = m * capacity
	}
	total := s.step * time.Duration(len(rates))
	shape, err := load.Stepped(rates, total)
	if err != nil {
		in.stop()
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}

	var mu sync.Mutex
	var last [2]load.Progress
	runStart := time.Now()
	live := func(class int) func(load.Progress) {
		if cfg.Progress == nil {
			return nil
		}
		return func(p load.Progress) {
			mu.Lock()
			defer mu.Unlock()
			last[class] = p
			el := time.Since(runStart)
			step := min(int(el/s.step), len(s.mults)-1)
			cfg.Progress(Progress{Stage: "load", Variant: v, Index: index, Variants: len(s.variants),
				Step: step, Multiplier: s.mults[step], Elapsed: el, Cached: last[0], Uncached: last[1]})
		}
	}
	// Workers: enough that cached work is never short of them; for
	// uncached work, the pool and its queue bound what piles up at an
	// ungated disk (and so how long the last step takes to drain).
	driver := func(paths []string, class int, label string) load.Config {
		return load.Config{
			Targets: targets(in.url, paths), Shape: shape, Workers: DriverWorkers, QueueDepth: DriverQueue,
			MaxLag: 50 * time.Millisecond, Label: label, Live: live(class),
		}
	}
	var sampler sync.WaitGroup
	samplerDone := make(chan struct{})
	var samples []LimitSample
	if in.adaptive != nil {
		sampler.Go(func() {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				// The gate's capacity, not the limiter's opinion: what
				// admission actually used.
				samples = append(samples, LimitSample{At: time.Since(runStart), Limit: in.handler.Gate().Capacity()})
				select {
				case <-samplerDone:
					return
				case <-t.C:
				}
			}
		})
	}
	var wg sync.WaitGroup
	var cached, uncached *load.Report
	var cerr, uerr error
	wg.Go(func() {
		cached, cerr = load.Run(ctx, "load", load.Meta{}, []load.Config{driver(in.site.hot, 0, string(v)+" cached")})
	})
	wg.Go(func() {
		uncached, uerr = load.Run(ctx, "load", load.Meta{}, []load.Config{driver(in.site.cold, 1, string(v)+" uncached")})
	})
	wg.Wait()
	close(samplerDone)
	sampler.Wait()
	serr := in.stop()
	if err := errors.Join(cerr, uerr); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if serr != nil {
		return nil, fmt.Errorf("demo: %s server: %w", v, serr)
	}
	r := &VariantResult{Variant: v, Cached: cached, Uncached: uncached, Gate: in.handler.Gate().Stats(), DiskReads: in.disk.Reads(), Limit: samples}
	g := r.Gate
	r.BooksClosed = g.Offered == g.Admitted+g.Rejected.Total() && g.Admitted == g.Completed.Total() && g.Inflight == 0 && g.Waiting == 0
	for _, rep := range []*load.Report{cached, uncached} {
		if rep.Aborted != "" || rep.Interrupted || len(rep.Steps) != 1 || len(rep.Steps[0].Windows) != 1 {
			return nil, fmt.Errorf("demo: %s: the driver did not finish its window (%s)", v, rep.Aborted)
		}
		if rep.Steps[0].Windows[0].Driver.Limited {
			r.DriverLimited = true
		}
	}
	cw, uw := cached.Steps[0].Windows[0], uncached.Steps[0].Windows[0]
	cp, up := phasesOf(cw), phasesOf(uw)
	if len(cp) != len(s.mults) || len(up) != len(s.mults) {
		return nil, fmt.Errorf("demo: %s: %d and %d steps reported, want %d", v, len(cp), len(up), len(s.mults))
	}
	for i, m := range s.mults {
		st := Step{Multiplier: m, Cached: classOf(cp[i], 0), Uncached: classOf(up[i], ceiling(capacity, s.disk.Service)), DurationSeconds: cp[i].EndS - cp[i].StartS}
		st.OfferedPerSecond = st.Cached.Offered + st.Uncached.Offered
		st.GoodputPerSecond = st.Cached.Goodput + st.Uncached.Goodput
		if n := st.Cached.Scheduled + st.Uncached.Scheduled; n > 0 {
			st.RefusedPercent = 100 * float64(st.Cached.Refused+st.Uncached.Refused) / float64(n)
			st.CachedShareOfTotal = float64(st.Cached.Scheduled) / float64(n)
		}
		r.Steps = append(r.Steps, st)
	}
	return r, nil
}

// phasesOf returns a window's steps; a window of one step has no phases
// of its own and is its only step.
func phasesOf(w load.Window) []load.Phase {
	if len(w.Phases) > 0 {
		return w.Phases
	}
	return []load.Phase{{
		StartS: 0, EndS: w.DurationS, RateFrom: w.Rates.Offered, RateTo: w.Rates.Offered,
		Counts: load.PhaseCounts{
			Scheduled: w.Counts.Scheduled, Sent: w.Counts.Sent, Dropped: w.Counts.Dropped, OK: w.Counts.OK,
			Refused: w.Counts.Refused, Errors: w.Counts.HTTPError + w.Counts.TransportError + w.Counts.Unfinished,
		},
		Rates: w.Rates, ResponseTime: w.Latency.ResponseTime, OKResponseTime: w.Latency.OKResponseTime,
	}}
}

// classOf summarises one step of one class; ceiling is the driver's
// ceiling for it (zero: none, as for cached work).
func classOf(p load.Phase, ceiling time.Duration) Class {
	c := p.Counts
	d := p.EndS - p.StartS
	out := Class{
		Scheduled: c.Scheduled, OK: c.OK, Refused: c.Refused, Dropped: c.Dropped, Errors: c.Errors,
		P99: math.NaN(),
	}
	if d > 0 {
		out.Offered = float64(c.Scheduled) / d
		out.Goodput = float64(c.OK) / d
	}
	if c.Scheduled > 0 {
		out.RefusedPercent = 100 * float64(c.Refused) / float64(c.Scheduled)
	}
	if p.OKResponseTime.Count > 0 {
		out.P99 = p.OKResponseTime.P99
		out.P99Capped = c.Dropped > 0 && ceiling > 0 && out.P99 >= float64(ceiling)/1e6/2
	}
	return out
}
