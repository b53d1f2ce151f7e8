package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/load/render"
)

// runLoad drives open- or closed-loop load at one level and writes a report.
func runLoad(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice load [--url] URL (--rate R | --concurrency C) [flags]")
		fmt.Fprintln(e.stderr, "Every flag can also be set as SLUICE_<FLAG> (upper case, - as _).")
		printFlags(fs)
	}
	rf := addRunFlags(fs)
	rate := fs.Float64("rate", 0, "open loop: arrivals per second on a fixed timetable")
	rampTo := fs.Float64("ramp-to", 0, "open loop: ramp the rate linearly from --rate to this over each window")
	stepRates := fs.String("steps", "", "open loop: stepped ramp, comma-separated rates held for equal parts of each window")
	concurrency := fs.Int("concurrency", 0, "closed loop: this many workers, each sending after the previous answer")
	duration := fs.Duration("duration", 10*time.Second, "length of each window")
	windows := fs.Int("windows", 1, "number of windows, each judged on its own, with a drain between them")
	if code, ok := parseArgs(fs, e, rf, args); !ok {
		return code
	}
	set := setFlags(fs)
	v := loadValues{rate: *rate, rampTo: *rampTo, steps: *stepRates, concurrency: *concurrency, duration: *duration, windows: *windows}
	cases, code := rf.profileCases(e, "load")
	if code >= 0 {
		return code
	}
	if rf.out != "" {
		// Refused before anything runs, whatever the number of cases: a
		// folder is not a report file.
		if err := load.CheckReportPath(rf.out); err != nil {
			return usageError(e, "load", fmt.Errorf("--out: %v", err))
		}
	}
	command := append([]string{"sluice", "load"}, args...)
	if len(cases) <= 1 {
		var prof *load.ProfileRef
		if len(cases) == 1 {
			prof = cases[0]
		}
		return runLoadCase(ctx, e, *rf, v, set, prof, rf.out, command)
	}
	// A profile of several cases and no --case: every case in order, each
	// judged alone in a report of its own.
	worst := exitOK
	for _, prof := range cases {
		out := caseReportName(rf.out, prof.Case)
		fmt.Fprintf(e.stdout, "== case %s\n", prof.Case)
		code := runLoadCase(ctx, e, *rf, v, set, prof, out, command)
		switch {
		case code == exitUsage || code == exitInternal:
			return code
		case code == exitFail:
			worst = exitFail
		case code == exitInvalid && worst == exitOK:
			worst = exitInvalid
		}
		if ctx.Err() != nil {
			break
		}
	}
	return worst
}

// loadValues are the load-shape flags of `sluice load`.
type loadValues struct {
	rate, rampTo float64
	steps        string
	concurrency  int
	duration     time.Duration
	windows      int
}

// caseReportName is the report file of one case of a multi-case run:
// NAME.json becomes NAME.CASE.json.
func caseReportName(out, caseName string) string {
	if out == "" {
		out = load.DefaultReportName(time.Now())
	}
	base := strings.TrimSuffix(out, ".json")
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, caseName)
	return base + "." + safe + ".json"
}

// runLoadCase runs one load (judged against prof's case, if any) and
// writes its report to out.
func runLoadCase(ctx context.Context, e env, rf runFlags, v loadValues, set map[string]bool, prof *load.ProfileRef, out string, command []string) int {
	rf.out = out
	var cs *load.Case
	if prof != nil {
		c, err := prof.Profile.Case(prof.Case)
		if err != nil {
			return inputError(e, "load", err)
		}
		cs = &c
	}
	rate, rampTo, stepRates, concurrency, duration, windows := &v.rate, &v.rampTo, &v.steps, &v.concurrency, &v.duration, &v.windows
	if cs != nil { // the case supplies defaults that flags override
		ls := load.LoadSettings{Rate: *rate, Concurrency: *concurrency, Workers: rf.workers, Windows: *windows, Duration: *duration, P99Budget: rf.p99Budget}
		cs.ApplyTo(&ls, func(field string) bool { return set[loadFlagNames[field]] })
		*rate, *concurrency, rf.workers, *windows, *duration, rf.p99Budget = ls.Rate, ls.Concurrency, ls.Workers, ls.Windows, ls.Duration, ls.P99Budget
	}
	usageErr := func(format string, a ...any) int {
		return usageError(e, "load", fmt.Errorf(format, a...))
	}
	if *duration <= 0 {
		return usageErr("--duration must be > 0")
	}
	if *windows < 1 {
		return usageErr("--windows must be >= 1")
	}
	cfg, err := rf.config()
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.Windows, cfg.Duration = *windows, *duration
	switch {
	case *concurrency < 0:
		return usageErr("--concurrency must be > 0")
	case *concurrency > 0 && (set["rate"] || *stepRates != "" || *rampTo != 0):
		return usageErr("--concurrency (closed loop) and --rate/--steps/--ramp-to (open loop) are exclusive")
	case *concurrency > 0 && (set["arrivals"] || set["seed"]):
		return usageErr("--arrivals and --seed shape an open loop's timetable; a closed loop (--concurrency) has none")
	case *concurrency > 0:
		cfg.Concurrency = *concurrency
		cfg.Arrivals, cfg.Seed = "", 0
	case *stepRates != "":
		rates, err := parseFloats(*stepRates)
		if err != nil {
			return usageErr("--steps: %v", err)
		}
		if cfg.Shape, err = load.Stepped(rates, *duration); err != nil {
			return usageErr("%s", flagError(err, loadFlagNames))
		}
	case !(*rate > 0):
		if !set["rate"] {
			return usageErr("give --rate R (open loop) or --concurrency C (closed loop)")
		}
		return usageErr("--rate must be > 0, got %s", figure(*rate))
	case *rampTo != 0:
		if !(*rampTo > 0) {
			return usageErr("--ramp-to must be > 0")
		}
		if cfg.Shape, err = load.Ramp(*rate, *rampTo, *duration); err != nil {
			return usageErr("%s", flagError(err, loadFlagNames))
		}
	default:
		if cfg.Shape, err = load.Constant(*rate, *duration); err != nil {
			return usageErr("%s", flagError(err, loadFlagNames))
		}
	}
	// Every size is checked against its bound, by the driver's own rules,
	// before anything runs.
	if err := load.CheckSteps([]load.Config{cfg}); err != nil {
		return usageErr("%s", flagError(err, loadFlagNames))
	}
	return rf.run(ctx, e, "load", command, prof, []load.Config{cfg})
}

// loadFlagNames are the flags of `sluice load` by the name of the setting
// package load gives in its errors (load.FieldError) and in
// load.LoadSettings.
var loadFlagNames = map[string]string{
	"Rate": "--rate", "RampTo": "--ramp-to", "Steps": "--steps", "Segments": "--steps", "Concurrency": "--concurrency",
	"Duration": "--duration", "Shape": "--duration", "Windows": "--windows", "Windows×Duration": "--duration × --windows",
	"Workers": "--workers", "QueueDepth": "--queue-depth", "P99Budget": "--p99-budget", "MaxLag": "--max-lag",
	"MaxCPU": "--max-cpu", "Timeout": "--timeout", "DrainTimeout": "--drain-timeout", "Arrivals": "--arrivals",
	"Seed": "--seed", "Pick": "--pick", "Body": "--body-file",
}

// sweepFlagNames are the same for `sluice sweep`, whose ladder and step
// length have flags of their own.
var sweepFlagNames = func() map[string]string {
	m := map[string]string{}
	for k, v := range loadFlagNames {
		m[k] = v
	}
	m["Rate"], m["Concurrency"], m["Duration"], m["Shape"] = "--rates", "--concurrencies", "--step-duration", "--step-duration"
	m["Windows×Duration"] = "--step-duration × --windows"
	return m
}()

// flagError writes err as a usage message: a load.FieldError with its
// setting named by its flag, anything else as it is.
func flagError(err error, names map[string]string) string {
	var fe *load.FieldError
	if errors.As(err, &fe) {
		if name, ok := names[fe.Field]; ok {
			return fe.For(name)
		}
	}
	return err.Error()
}

// runFlags are the flags load and sweep share.
type runFlags struct {
	urls         listFlag
	headers      listFlag
	targetsFile  string
	pick         string
	method       string
	body         string
	bodyFile     string
	workers      int
	queueDepth   int
	p99Budget    time.Duration
	maxLag       time.Duration
	maxCPU       float64
	timeout      time.Duration
	drainTimeout time.Duration
	http2        bool
	insecure     bool
	noKeepAlive  bool
	metrics      string
	arrivals     string
	seed         uint64
	profile      string
	caseName     string
	out          string
	live         liveFlag
}

func addRunFlags(fs *flag.FlagSet) *runFlags {
	rf := &runFlags{}
	fs.Var(&rf.urls, "url", "target URL (repeatable; several are taken in turn)")
	fs.Var(&rf.headers, "header", `request header "Name: value" (repeatable)`)
	fs.StringVar(&rf.targetsFile, "targets", "", "file of targets: JSON array or lines of '[METHOD] URL [weight=N]'")
	fs.StringVar(&rf.pick, "pick", "round-robin", "how to choose among targets: round-robin or weighted")
	fs.StringVar(&rf.method, "method", "GET", "request method")
	fs.StringVar(&rf.body, "body", "", "request body")
	fs.StringVar(&rf.bodyFile, "body-file", "", "read the request body from this file")
	fs.IntVar(&rf.workers, "workers", 64, "open loop: fixed worker pool size")
	fs.IntVar(&rf.queueDepth, "queue-depth", 0, "open loop: arrival queue bound (0: max(workers, rate × p99-budget))")
	fs.DurationVar(&rf.p99Budget, "p99-budget", 500*time.Millisecond, "response-time p99 budget (sizes the queue; tells driver drops from server slowness)")
	fs.DurationVar(&rf.maxLag, "max-lag", 10*time.Millisecond, "schedule-lag p99 above which a window is driver-limited")
	fs.Float64Var(&rf.maxCPU, "max-cpu", 0.95, "driver CPU use (fraction of GOMAXPROCS) at which a window is driver-limited; above 1 never")
	fs.DurationVar(&rf.timeout, "timeout", 10*time.Second, "connect and response-header timeout per request")
	fs.DurationVar(&rf.drainTimeout, "drain-timeout", 0, "longest wait for a window's last requests (0: timeout + 5s)")
	fs.BoolVar(&rf.http2, "http2", false, "speak HTTP/2 only (h2c for http:// URLs)")
	fs.BoolVar(&rf.insecure, "insecure", false, "accept any TLS certificate (a self-signed test bench)")
	fs.BoolVar(&rf.noKeepAlive, "no-keepalive", false, "open a new connection for every request")
	fs.StringVar(&rf.metrics, "metrics", "", "Prometheus text endpoint of the server, scraped before and after each window")
	fs.StringVar(&rf.arrivals, "arrivals", "uniform", "open loop: how arrivals are spread: uniform (the fixed timetable) or poisson (exponential gaps at the same rate)")
	fs.Uint64Var(&rf.seed, "seed", 0, "with --arrivals poisson: seed of the arrival times, recorded in the report (0: a random one)")
	fs.StringVar(&rf.profile, "profile", "", "profile JSON: judge the run against a case (PASS, FAIL, INVALID)")
	fs.StringVar(&rf.caseName, "case", "", "profile case to use (needed when the profile has several)")
	fs.StringVar(&rf.out, "out", "", "report file (default: load-report-<UTC time>.json in the current folder)")
	fs.Var(&rf.live, "live", "live progress line on stderr each second: auto (when a terminal), on or off (or true, false)")
	return rf
}

// liveFlag is --live: "auto" (the zero value: on when stderr is a
// terminal) or a boolean (on/off, or anything strconv.ParseBool takes).
// Anything else is refused when the flag is parsed.
type liveFlag struct {
	set, value bool
}

func (l *liveFlag) String() string {
	switch {
	case l == nil || !l.set:
		return "auto"
	case l.value:
		return "on"
	}
	return "off"
}

func (l *liveFlag) Set(v string) error {
	switch v {
	case "auto":
		*l = liveFlag{}
		return nil
	case "on":
		*l = liveFlag{set: true, value: true}
		return nil
	case "off":
		*l = liveFlag{set: true}
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("--live takes auto, on, off, true or false, not %q", v)
	}
	*l = liveFlag{set: true, value: b}
	return nil
}

// on says whether to print the live line, given whether stderr is a terminal.
func (l liveFlag) on(terminal bool) bool {
	if !l.set {
		return terminal
	}
	return l.value
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// parseArgs parses flags (with their SLUICE_* twins, see flags.go), with
// flags and positional arguments in any order, as hey, oha and wrk allow:
// each positional argument is a target URL, added to --url. ok == false
// means stop with code.
func parseArgs(fs *flag.FlagSet, e env, rf *runFlags, args []string) (code int, ok bool) {
	var positional []string
	rest := args
	for {
		if err := parseLine(fs, rest); err != nil {
			return parseExit(reportParseError(fs, err)), false
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			positional = append(positional, left...) // after --, everything is an argument
			break
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}
	if err := parseFlags(fs, e, nil); err != nil { // deprecated names and the environment twins
		return parseExit(err), false
	}
	for _, a := range positional {
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") {
			return usageError(e, fs.Name(), fmt.Errorf("unexpected argument %q (a positional argument is a target URL, http:// or https://)", a)), false
		}
		rf.urls = append(rf.urls, a)
	}
	return 0, true
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		if !(v > 0) {
			return nil, fmt.Errorf("%s must be > 0", figure(v))
		}
		out = append(out, v)
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		if v <= 0 {
			return nil, fmt.Errorf("%d must be > 0", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// profileCases reads --profile and returns the cases to run: the one named
// by --case, the profile's only case, or (no --case, several cases) all of
// them in order. No profile: nil. code >= 0 means stop with that code.
func (rf *runFlags) profileCases(e env, cmd string) ([]*load.ProfileRef, int) {
	if rf.profile == "" || rf.caseName != "" {
		ref, _, code := rf.loadProfile(e, cmd)
		if code >= 0 || ref == nil {
			return nil, code
		}
		return []*load.ProfileRef{ref}, -1
	}
	p, err := readProfileRef(rf.profile)
	if err != nil {
		return nil, inputError(e, cmd, err)
	}
	var refs []*load.ProfileRef
	for _, c := range p.Profile.Cases {
		ref := *p
		ref.Case = c.Name
		refs = append(refs, &ref)
	}
	return refs, -1
}

// loadProfile reads --profile; code >= 0 means stop with that exit code.
func (rf *runFlags) loadProfile(e env, cmd string) (*load.ProfileRef, *load.Case, int) {
	if rf.profile == "" {
		if rf.caseName != "" {
			return nil, nil, usageError(e, cmd, errors.New("--case needs --profile"))
		}
		return nil, nil, -1
	}
	ref, c, err := readProfile(rf.profile, rf.caseName)
	if err != nil {
		return nil, nil, inputError(e, cmd, err)
	}
	return ref, c, -1
}

func readProfile(path, caseName string) (*load.ProfileRef, *load.Case, error) {
	ref, err := readProfileRef(path)
	if err != nil {
		return nil, nil, err
	}
	c, err := ref.Profile.Case(caseName)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	ref.Case = c.Name
	return ref, &c, nil
}

// readProfileRef reads --profile, with the path in its errors.
func readProfileRef(path string) (*load.ProfileRef, error) {
	ref, err := load.ReadProfile(path)
	if err != nil && !strings.Contains(err.Error(), path) {
		err = fmt.Errorf("profile %s: %v", path, err)
	}
	return ref, err
}

// config builds the request side of a step from the shared flags.
func (rf *runFlags) config() (load.Config, error) {
	var cfg load.Config
	if rf.workers < 1 {
		return cfg, fmt.Errorf("--workers must be >= 1")
	}
	if rf.queueDepth < 0 {
		return cfg, fmt.Errorf("--queue-depth must be >= 0")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--p99-budget", rf.p99Budget}, {"--timeout", rf.timeout}, {"--max-lag", rf.maxLag}} {
		if d.v <= 0 {
			return cfg, fmt.Errorf("%s must be > 0, got %v", d.flag, d.v)
		}
	}
	if rf.drainTimeout < 0 {
		return cfg, fmt.Errorf("--drain-timeout must be >= 0 (0: --timeout + 5s), got %v", rf.drainTimeout)
	}
	if !(rf.maxCPU > 0) || math.IsInf(rf.maxCPU, 0) {
		return cfg, fmt.Errorf("--max-cpu must be > 0 and finite")
	}
	def := load.Target{Method: rf.method, Header: http.Header{}}
	for _, h := range rf.headers {
		k, v, err := load.ParseHeader(h)
		if err != nil {
			return cfg, err
		}
		def.Header.Add(k, v)
	}
	if rf.body != "" && rf.bodyFile != "" {
		return cfg, fmt.Errorf("--body and --body-file are exclusive")
	}
	if rf.body != "" {
		def.Body = []byte(rf.body)
	}
	if rf.bodyFile != "" {
		b, err := load.ReadInput(rf.bodyFile, load.MaxBodyBytes)
		if err != nil {
			return cfg, fmt.Errorf("--body-file: %v", err)
		}
		def.Body = b
	}
	if rf.targetsFile != "" {
		b, err := load.ReadInput(rf.targetsFile, load.MaxTargetsFileBytes)
		if err != nil {
			return cfg, fmt.Errorf("--targets: %v", err)
		}
		ts, err := load.ParseTargets(b, def)
		if err != nil {
			return cfg, fmt.Errorf("%s: %v", rf.targetsFile, err)
		}
		cfg.Targets = ts
	}
	for _, u := range rf.urls {
		t := def
		t.URL = u
		t, err := load.CheckTarget(t)
		if err != nil {
			return cfg, err
		}
		cfg.Targets = append(cfg.Targets, t)
	}
	if len(cfg.Targets) == 0 {
		return cfg, fmt.Errorf("no target: give --url URL or --targets FILE")
	}
	if rf.metrics != "" {
		if _, err := load.CheckTarget(load.Target{URL: rf.metrics}); err != nil {
			return cfg, fmt.Errorf("--metrics: %v", err)
		}
	}
	switch load.Arrivals(rf.arrivals) {
	case load.Uniform, load.Poisson:
		cfg.Arrivals = load.Arrivals(rf.arrivals)
	default:
		return cfg, fmt.Errorf("--arrivals must be uniform or poisson, not %q", rf.arrivals)
	}
	if rf.seed > load.MaxSeed {
		return cfg, fmt.Errorf("--seed %d is over the bound: at most %d", rf.seed, uint64(load.MaxSeed))
	}
	cfg.Seed = rf.seed
	cfg.Pick = load.Pick(rf.pick)
	if cfg.Pick != load.RoundRobin && cfg.Pick != load.Weighted {
		return cfg, fmt.Errorf("--pick must be round-robin or weighted")
	}
	cfg.Workers, cfg.QueueDepth, cfg.P99Budget = rf.workers, rf.queueDepth, rf.p99Budget
	cfg.MaxLag, cfg.MaxCPU, cfg.Timeout, cfg.DrainTimeout = rf.maxLag, rf.maxCPU, rf.timeout, rf.drainTimeout
	cfg.HTTP2, cfg.DisableKeepAlives, cfg.MetricsURL = rf.http2, rf.noKeepAlive, rf.metrics
	cfg.Insecure = rf.insecure
	return cfg, nil
}

// run checks the targets are reachable, drives the steps, writes the report
// and returns the exit code of the verdict.
func (rf *runFlags) run(ctx context.Context, e env, kind string, command []string, prof *load.ProfileRef, steps []load.Config) int {
	out := rf.out
	if out == "" {
		out = load.DefaultReportName(time.Now())
	}
	if err := load.CheckReportPath(out); err != nil {
		return usageError(e, kind, fmt.Errorf("--out: %v", err))
	}
	if err := preflight(ctx, steps[0].Targets, rf.metrics, min(rf.timeout, 5*time.Second)); err != nil {
		return inputError(e, kind, err)
	}
	if rf.live.on(isTerminal(e.stderr)) {
		for i := range steps {
			steps[i].Live = func(p load.Progress) { fmt.Fprintln(e.stderr, render.ProgressLine(p)) }
		}
	}
	meta := load.Meta{Tool: toolInfo(), BinarySHA256: binarySHA256(), Command: command, Profile: prof, SourceFiles: sourceFiles()}
	r, err := load.Run(ctx, kind, meta, steps)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice %s: %v\n", kind, err)
		if errors.Is(err, load.ErrConfig) || errors.Is(err, load.ErrBadShape) || errors.Is(err, load.ErrBadTarget) {
			return exitUsage
		}
		return exitInternal
	}
	if err := load.WriteReport(out, r); err != nil {
		fmt.Fprintf(e.stderr, "sluice %s: writing the report: %v\n", kind, err)
		return exitInternal
	}
	if st, err := os.Stat(out); err == nil && st.Size() > load.MaxReportBytes {
		fmt.Fprintf(e.stderr, "sluice %s: warning: the report is %d MiB, over the %d MiB that check, report, merge and plan read; fewer windows or steps keep it readable\n",
			kind, st.Size()>>20, load.MaxReportBytes>>20)
	}
	if kind == "sweep" {
		render.CliffTable(e.stdout, r)
	} else {
		render.Text(e.stdout, r)
	}
	fmt.Fprintf(e.stdout, "report: %s\n", out)
	if r.Interrupted {
		fmt.Fprintf(e.stderr, "sluice %s: interrupted; the report holds what was measured\n", kind)
	}
	if r.Aborted != "" {
		fmt.Fprintf(e.stderr, "sluice %s: aborted: %s\n", kind, r.Aborted)
	}
	return verdictExit(r.Verdict) // an aborted run FAILs, profile or not
}

func verdictExit(v load.Verdict) int {
	switch v.Status {
	case load.StatusFail:
		return exitFail
	case load.StatusInvalid:
		return exitInvalid
	}
	return exitOK
}

// preflight dials every target (and the metrics endpoint) once, so an
// unreachable server is a usage error before any report exists.
func preflight(ctx context.Context, ts []load.Target, metrics string, timeout time.Duration) error {
	seen := map[string]bool{}
	urls := []string{}
	for _, t := range ts {
		urls = append(urls, t.URL)
	}
	if metrics != "" {
		urls = append(urls, metrics)
	}
	d := net.Dialer{Timeout: timeout}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return err
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		addr := net.JoinHostPort(u.Hostname(), port)
		if seen[addr] {
			continue
		}
		seen[addr] = true
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("cannot reach %s (%s): %v", s, addr, errors.Unwrap(err))
		}
		c.Close()
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func toolInfo() load.Tool {
	b := readBuildInfo()
	return load.Tool{Module: b.Module, Version: b.Version, Revision: b.Revision, Time: b.Time, Dirty: b.Dirty, Go: b.Go}
}

// binarySHA256 hashes the running executable, so a report names exactly
// what produced it.
func binarySHA256() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
