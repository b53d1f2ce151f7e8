package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/plan"
)

// planCalculation is one calculation of `sluice plan`.
type planCalculation struct {
	name, summary string
	run           func(env, []string) int
}

// planCalculations lists the calculations `sluice plan` offers: its usage
// and its dispatch both read this one table.
func planCalculations() []planCalculation {
	return []planCalculation{
		{"little", "Little's law: solve L = λW (or Lq = λq·Wq) for the missing figure, or check three", planLittle},
		{"drain", "backlog drain: net drain rate and ideal drain time, from flags or a load report", planDrain},
		{"queue", "queue sizing: starting capacity from target wait × safe rate, and its memory", planQueue},
		{"wait", "waiting time (M/M/c): P(wait), mean and p99 wait for c slots, and the slots a p99 target needs", planWait},
		{"retry", "retry amplification: attempts per layer ^ layers, and what a retry budget leaves", planRetry},
		{"fleet", "fleet totals: per-instance pool × instances against the shared resource", planFleet},
	}
}

func planUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice plan <calculation> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Capacity arithmetic for overload. Every calculation prints a table, or JSON with --json.")
	fmt.Fprintln(w, "Exit status: 0 computed; 1 computed, and the plan does not hold (the figures do not add")
	fmt.Fprintln(w, "up, the backlog never drains, the queue grows without bound or misses its wait target, the")
	fmt.Fprintln(w, "fleet exceeds the shared limit); 2 bad input.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "calculations:")
	for _, c := range planCalculations() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sluice plan <calculation> --help' for its flags.")
}

// runPlan runs `sluice plan`.
func runPlan(_ context.Context, e env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		planUsage(e.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var names []string
	for _, c := range planCalculations() {
		if c.name == args[0] {
			return c.run(e, args[1:])
		}
		names = append(names, c.name)
	}
	fmt.Fprintf(e.stderr, "sluice plan: unknown calculation %q (want %s)\n", args[0], strings.Join(names, ", "))
	fmt.Fprint(e.stderr, helpHint("plan"))
	return exitUsage
}

// secondsValue is a flag holding seconds, written as a Go duration (200ms)
// or a plain number of seconds (0.2).
type secondsValue struct{ v *float64 }

func (s secondsValue) String() string {
	if s.v == nil || *s.v == 0 {
		return ""
	}
	return strconv.FormatFloat(*s.v, 'g', -1, 64) + "s"
}

func (s secondsValue) Set(v string) error {
	if d, err := time.ParseDuration(v); err == nil {
		*s.v = d.Seconds()
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return fmt.Errorf("want a duration (200ms, 1.5s) or seconds (0.2)")
	}
	*s.v = f
	return nil
}

// bytesValue is a flag holding a byte size with an optional unit.
type bytesValue struct{ v *float64 }

func (b bytesValue) String() string {
	if b.v == nil || *b.v == 0 {
		return ""
	}
	return strconv.FormatFloat(*b.v, 'f', -1, 64)
}

func (b bytesValue) Set(v string) error {
	n, err := parseByteSize(v)
	if err != nil {
		return err
	}
	*b.v = float64(n)
	return nil
}

// planFlags starts a calculation's flag set with the shared --json flag.
func planFlags(e env, name, synopsis string) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("plan "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice plan "+name+" [flags]\n\n"+synopsis)
	return fs, fs.Bool("json", false, "print the result as JSON")
}

// planParse parses the flags and refuses stray arguments.
func planParse(fs *flag.FlagSet, e env, args []string) (int, bool) {
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err), false
	}
	if fs.NArg() > 0 {
		return usageError(e, fs.Name(), fmt.Errorf("unexpected argument %q", fs.Arg(0))), false
	}
	return 0, true
}

// planFail reports a refused input: exit 2 with the reason, the figure
// named by its flag.
func planFail(e env, fs *flag.FlagSet, err error) int {
	var ie *plan.InputError
	if errors.As(err, &ie) && fs.Lookup(ie.Field) != nil {
		err = errors.New("--" + ie.Error())
	}
	return usageError(e, fs.Name(), err)
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// num formats a figure for the table: integers without a fraction,
// others with up to 4 significant decimals.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func table(w io.Writer, rows [][2]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	_ = tw.Flush()
}

func planLittle(e env, args []string) int {
	fs, asJSON := planFlags(e, "little",
		"Little's law for one scope, with long-run averages: L = λW for the whole system (queued plus\n"+
			"working), Lq = λq·Wq for the queue alone. Give two figures to solve the third, or three to\n"+
			"check that they add up. Queue figures and whole-system figures are never mixed.")
	var in plan.Little
	fs.Float64Var(&in.Rate, "rate", 0, "λ: average arrivals per second into the scope")
	fs.Float64Var(&in.InSystem, "in-system", 0, "L: average items in the system, queued plus working (a sluice gate: the mean of sluice_admission_inflight, with --waiting)")
	fs.Float64Var(&in.Waiting, "waiting", 0, "added to --in-system: the mean of the gate's sluice_admission_waiting, when --in-system is its inflight gauge (which leaves the queue out)")
	fs.Float64Var(&in.Queued, "queued", 0, "Lq: average items waiting, not yet started")
	fs.Var(secondsValue{&in.TotalTime}, "total-time", "W: average time from arrival to completion (200ms or 0.2)")
	fs.Var(secondsValue{&in.QueueTime}, "queue-time", "Wq: average time from arrival to start of work (50ms or 0.05)")
	fs.StringVar(&in.Statistic, "stat", "mean", "what the figures are; only mean is meaningful (p99, max are refused)")
	reportPath := fs.String("report", "", "take --rate and --total-time from this `sluice load` JSON report (requests answered, their mean request time)")
	step := fs.Int("step", 0, "with --report: the step to read, from 1 (0: the last)")
	window := fs.Int("window", 0, "with --report: the window to read, from 1 (0: all windows of the step)")
	if code, ok := planParse(fs, e, args); !ok {
		return code
	}
	if *reportPath != "" {
		rep, err := load.ReadReport(*reportPath)
		if err != nil {
			return planFail(e, fs, err)
		}
		rate, total, err := littleFromReport(rep, *step, *window)
		if err != nil {
			return planFail(e, fs, fmt.Errorf("%s: %w", *reportPath, err))
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rate"] {
			in.Rate = rate
		}
		if !set["total-time"] && !set["queue-time"] {
			in.TotalTime = total
		}
	} else if *step != 0 || *window != 0 {
		return planFail(e, fs, errors.New("--step and --window need --report"))
	}
	r, err := in.Solve()
	if err != nil {
		return planFail(e, fs, err)
	}
	if *asJSON {
		writeJSON(e.stdout, r)
	} else {
		count, tm, rate := "L (in system)", "W (total time)", "λ (arrivals)"
		if r.Scope == plan.ScopeQueue {
			count, tm, rate = "Lq (queued)", "Wq (queue time)", "λq (arrivals that queue)"
		}
		mark := func(what string) string {
			if r.Solved == what {
				return " ← solved"
			}
			return ""
		}
		rows := [][2]string{
			{"scope", string(r.Scope)},
			{rate, num(r.Rate) + " /s" + mark("rate")},
			{tm, num(r.Time) + " s" + mark("time")},
			{count, num(r.Count) + mark("count")},
		}
		if in.Waiting > 0 {
			rows[3][1] += " (in-system " + num(in.InSystem) + " + waiting " + num(in.Waiting) + ")"
		}
		if r.Solved == "check" {
			verdict := "adds up"
			switch {
			case r.AddsUp:
			case r.Ratio < 1 && *reportPath != "" && in.Waiting == 0:
				verdict = "does NOT add up: the server counts fewer than the driver had in its hands. If --in-system is the gate's inflight gauge, " +
					"add its waiting gauge (--waiting): inflight counts slots held and leaves the queue out. The driver's time also covers the network " +
					"and the work before the gate"
			case r.Ratio < 1:
				verdict = "does NOT add up: fewer items than the traffic needs: a count or a rate is wrong, or the figures come from different scopes"
			default:
				verdict = "does NOT add up: a counter is missing, the scopes differ, or work holds slots without completing (a leak)"
			}
			rows = append(rows, [2]string{"count / (λ × time)", num(r.Ratio) + " — " + verdict})
		}
		table(e.stdout, rows)
	}
	if !r.AddsUp {
		return exitFail
	}
	return exitOK
}

// planReportFlags names the selection flags of plan's --report in the
// errors of load.Report.Totals.
var planReportFlags = map[string]string{"Step": "--step", "Window": "--window"}

// reportTotals reads a saved report's chosen windows (load.Report.Totals)
// with the selection flags named in its errors.
func reportTotals(r *load.Report, step, window int) (load.Totals, error) {
	t, err := r.Totals(step, window)
	if err != nil {
		return t, errors.New(flagError(err, planReportFlags))
	}
	return t, nil
}

// littleFromReport reads Little's law figures as the driver saw them: the
// rate of requests that got an HTTP answer and their mean request time
// (sent to done), over the chosen windows. Their product is the mean number
// of requests the server had in hand.
func littleFromReport(r *load.Report, step, window int) (rate, totalTime float64, err error) {
	t, err := reportTotals(r, step, window)
	if err != nil {
		return 0, 0, err
	}
	if t.Answered == 0 {
		return 0, 0, fmt.Errorf("step %d: no request got an answer, so there is no request time", t.Step)
	}
	return float64(t.Answered) / t.Seconds, t.MeanRequestTime, nil
}

// drainFromReport turns a saved load report into drain rates: per second
// over the chosen windows, offered is every scheduled arrival, refused the
// answers that turned work away (HTTP refusals plus the driver's own drops,
// which never reached the server), completed the ok answers.
func drainFromReport(r *load.Report, step, window int) (plan.Drain, error) {
	t, err := reportTotals(r, step, window)
	if err != nil {
		return plan.Drain{}, err
	}
	return plan.Drain{
		Offered:   float64(t.Scheduled) / t.Seconds,
		Refused:   float64(t.Refused+t.Dropped) / t.Seconds,
		Completed: float64(t.OK) / t.Seconds,
	}, nil
}

func planDrain(e env, args []string) int {
	fs, asJSON := planFlags(e, "drain",
		"Backlog drain: net drain = completed − accepted, where accepted = offered − refused (+ requeued\n"+
			"retries). Ideal drain time = backlog / net drain, for steady rates and items of similar cost.\n"+
			"Rates come from flags, or from a saved `sluice load` report (--report); flags given win.")
	var in plan.Drain
	fs.Float64Var(&in.Backlog, "backlog", 0, "items already waiting")
	fs.Float64Var(&in.Offered, "offered", 0, "attempts arriving per second, retries included")
	fs.Float64Var(&in.Refused, "refused", 0, "attempts per second turned away at the door")
	fs.Float64Var(&in.Completed, "completed", 0, "items per second the work completes and can keep completing")
	fs.Float64Var(&in.Requeued, "requeued", 0, "retries per second that re-enter the backlog and are not in --offered")
	reportPath := fs.String("report", "", "take offered, refused and completed rates from this `sluice load` JSON report")
	step := fs.Int("step", 0, "with --report: the step to read, from 1 (0: the last)")
	window := fs.Int("window", 0, "with --report: the window to read, from 1 (0: all windows of the step)")
	if code, ok := planParse(fs, e, args); !ok {
		return code
	}
	if *reportPath != "" {
		rep, err := load.ReadReport(*reportPath)
		if err != nil {
			return planFail(e, fs, err)
		}
		from, err := drainFromReport(rep, *step, *window)
		if err != nil {
			return planFail(e, fs, fmt.Errorf("%s: %w", *reportPath, err))
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["offered"] {
			in.Offered = from.Offered
		}
		if !set["refused"] {
			in.Refused = from.Refused
		}
		if !set["completed"] {
			in.Completed = from.Completed
		}
	} else if *step != 0 || *window != 0 {
		return planFail(e, fs, errors.New("--step and --window need --report"))
	}
	r, err := in.Solve()
	if err != nil {
		return planFail(e, fs, err)
	}
	if *asJSON {
		out := struct {
			plan.DrainResult
			Seconds *float64 `json:"drain_seconds"` // null when it never drains
		}{DrainResult: r}
		if !r.Never {
			out.Seconds = &r.Seconds
		}
		writeJSON(e.stdout, out)
	} else {
		when := num(r.Seconds) + " s"
		switch {
		case r.Never && r.NetDrain == 0:
			when = "never: accepted work uses every completion"
		case r.Never:
			when = fmt.Sprintf("never: the backlog grows by %s a second", num(-r.NetDrain))
		case r.Backlog == 0:
			when = "0 s (no backlog)"
		default:
			when += " (" + time.Duration(r.Seconds*float64(time.Second)).Round(time.Second).String() + ")"
		}
		table(e.stdout, [][2]string{
			{"backlog", num(r.Backlog)},
			{"offered", num(r.Offered) + " /s"},
			{"refused", num(r.Refused) + " /s"},
			{"accepted", num(r.Accepted) + " /s"},
			{"completed", num(r.Completed) + " /s"},
			{"net drain", num(r.NetDrain) + " /s"},
			{"ideal drain time", when},
		})
	}
	if r.Never {
		return exitFail
	}
	return exitOK
}

func planQueue(e env, args []string) int {
	fs, asJSON := planFlags(e, "queue",
		"Queue sizing: a starting capacity of target wait × safe service rate (rounded up), and the\n"+
			"memory a full queue holds. A candidate to try against bursts and slow items, not an answer.")
	var in plan.QueueSize
	fs.Var(secondsValue{&in.TargetWait}, "target-wait", "how long an item may usefully wait (200ms or 0.2; required)")
	fs.Float64Var(&in.SafeRate, "safe-rate", 0, "items per second the work completes and can sustain (required)")
	fs.Var(bytesValue{&in.ItemBytes}, "item-bytes", "memory each queued item holds: objects plus request body (64KiB)")
	if code, ok := planParse(fs, e, args); !ok {
		return code
	}
	r, err := in.Solve()
	if err != nil {
		return planFail(e, fs, err)
	}
	if *asJSON {
		writeJSON(e.stdout, r)
		return exitOK
	}
	rows := [][2]string{
		{"target wait", num(in.TargetWait) + " s"},
		{"safe rate", num(in.SafeRate) + " /s"},
		{"queue capacity", strconv.FormatInt(r.Capacity, 10) + " items (a starting point: try it under bursts and slow items)"},
	}
	if in.ItemBytes > 0 {
		rows = append(rows, [2]string{"memory when full", humanBytes(r.Bytes)})
	}
	table(e.stdout, rows)
	return exitOK
}

func planWait(e env, args []string) int {
	fs, asJSON := planFlags(e, "wait",
		"Waiting time in front of c slots, by M/M/c theory (Erlang C): arrivals at random (Poisson), service\n"+
			"times of one mean with an exponential spread, one FIFO queue. Gives the probability of waiting, the\n"+
			"mean and p99 wait and time in system, and with --target-p99-wait the fewest slots that meet it.\n"+
			"Service times with less spread wait less than this; bursts and slow items wait more.")
	var in plan.Wait
	fs.Int64Var(&in.Slots, "slots", 0, "c: slots serving the queue (required unless --target-p99-wait is given)")
	fs.Var(secondsValue{&in.ServiceTime}, "service-time", "mean time an item holds its slot (10ms or 0.01; required)")
	fs.Float64Var(&in.Rate, "rate", 0, "λ: arrivals per second (required)")
	fs.Var(secondsValue{&in.TargetP99Wait}, "target-p99-wait", "the longest acceptable p99 wait: also say how many slots meet it (50ms or 0.05)")
	if code, ok := planParse(fs, e, args); !ok {
		return code
	}
	r, err := in.Solve()
	if err != nil {
		return planFail(e, fs, err)
	}
	holds := r.Stable && (in.TargetP99Wait == 0 || r.MeetsTarget)
	if *asJSON {
		writeJSON(e.stdout, r)
	} else {
		ms := func(s float64) string { return num(s*1000) + " ms" }
		slots := strconv.FormatInt(r.Slots, 10)
		if in.Slots == 0 {
			slots += " (the fewest that meet the target)"
		}
		rows := [][2]string{
			{"slots (c)", slots},
			{"service time (mean)", ms(in.ServiceTime) + " (" + num(1/in.ServiceTime) + " /s a slot)"},
			{"arrivals (λ)", num(in.Rate) + " /s"},
			{"offered load (λ × service)", num(r.Load) + " slots busy on average"},
			{"utilization", num(100*r.Utilization) + " %"},
		}
		if !r.Stable {
			rows = append(rows, [2]string{"steady state", "NONE: the work arriving needs " + num(r.Load) + " slots and " + strconv.FormatInt(r.Slots, 10) +
				" serve it, so the queue grows without bound; add slots, shorten the service or refuse the excess"})
		} else {
			rows = append(rows,
				[2]string{"P(wait) (Erlang C)", num(r.PWait)},
				[2]string{"mean wait", ms(r.MeanWait)},
				[2]string{"p99 wait", ms(r.P99Wait)},
				[2]string{"mean time in system", ms(r.MeanInSystem) + " (wait + service: a load driver's response time)"},
				[2]string{"p99 time in system", ms(r.P99InSystem)})
		}
		if in.TargetP99Wait > 0 {
			verdict := "meets it"
			if !r.MeetsTarget {
				verdict = "does NOT meet it"
			}
			rows = append(rows, [2]string{"slots for p99 wait ≤ " + ms(in.TargetP99Wait), strconv.FormatInt(r.NeededSlots, 10) + "; " + strconv.FormatInt(r.Slots, 10) + " " + verdict})
		}
		table(e.stdout, rows)
	}
	if !holds {
		return exitFail
	}
	return exitOK
}

func humanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return strconv.FormatFloat(b, 'f', 2, 64) + " " + units[i]
}

func planRetry(e env, args []string) int {
	fs, asJSON := planFlags(e, "retry",
		"Retry amplification: when every attempt fails, each layer that retries multiplies the load on the\n"+
			"layer below, so the bottom sees attempts^layers per original request. A retry budget (retries at\n"+
			"most ratio × originals) caps each layer at 1 + ratio.")
	var in plan.Retry
	fs.IntVar(&in.Attempts, "attempts", 0, "most attempts per layer, the first included (required)")
	fs.IntVar(&in.Layers, "layers", 1, "layers that retry, one above the other")
	fs.Float64Var(&in.Budget, "budget", 0, "retry budget ratio, e.g. 0.1 for retries ≤ 10% of originals (0: none)")
	fs.Float64Var(&in.Rate, "rate", 0, "original requests per second at the top (optional)")
	if code, ok := planParse(fs, e, args); !ok {
		return code
	}
	r, err := in.Solve()
	if err != nil {
		return planFail(e, fs, err)
	}
	if *asJSON {
		writeJSON(e.stdout, r)
		return exitOK
	}
	layers := make([]string, len(r.PerLayer))
	for i, v := range r.PerLayer {
		layers[i] = num(v)
	}
	rows := [][2]string{
		{"attempts per layer", strconv.Itoa(in.Attempts)},
		{"layers", strconv.Itoa(in.Layers)},
		{"worst case per layer", strings.Join(layers, " → ")},
		{"worst case at the bottom", num(r.WorstCase) + " attempts per original request"},
	}
	if in.Budget > 0 {
		rows = append(rows, [2]string{"with a " + num(in.Budget*100) + "% retry budget", num(r.WithBudget) + " attempts per original request"})
	}
	if in.Rate > 0 {
		rows = append(rows, [2]string{"bottom load", num(r.BottomRate) + " /s from " + num(in.Rate) + " /s originals"})
		if in.Budget > 0 {
			rows = append(rows, [2]string{"bottom load with budget", num(r.BottomRateWithBudget) + " /s"})
		}
	}
	table(e.stdout, rows)
	return exitOK
}

func planFleet(e env, args []string) int {
	fs, asJSON := planFlags(e, "fleet",
		"Fleet totals: every instance holds its own pool, so the shared resource sees per-instance ×\n"+
			"instances. Adding instances to a saturated database adds contention, not capacity.")
	var in plan.Fleet
	fs.Int64Var(&in.PerInstance, "per-instance", 0, "pool size on each instance, e.g. database connections (required)")
	fs.Int64Var(&in.Instances, "instances", 0, "instances running (required)")
	fs.Int64Var(&in.Shared, "shared", 0, "the shared resource's own limit, e.g. max_connections (0: unknown)")
	if code, ok := planParse(fs, e, args); !ok {
		return code
	}
	r, err := in.Solve()
	if err != nil {
		return planFail(e, fs, err)
	}
	if *asJSON {
		writeJSON(e.stdout, r)
	} else {
		rows := [][2]string{
			{"fleet total", fmt.Sprintf("%d × %d = %d", in.PerInstance, in.Instances, r.Total)},
		}
		if in.Shared > 0 {
			verdict := fmt.Sprintf("%d (fits, %d spare)", in.Shared, in.Shared-r.Total)
			if r.Over {
				verdict = fmt.Sprintf("%d (OVER by %d)", in.Shared, r.Excess)
			}
			rows = append(rows,
				[2]string{"shared limit", verdict},
				[2]string{"instances that fit", fmt.Sprintf("%d at %d each", r.MaxInstances, in.PerInstance)},
				[2]string{"pool per instance that fits", fmt.Sprintf("%d at %d instances", r.FairPerInstance, in.Instances)})
		}
		table(e.stdout, rows)
	}
	if r.Over {
		return exitFail
	}
	return exitOK
}
