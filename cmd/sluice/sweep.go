package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/load"
)

// defaultLadder is the cliff test's ladder of concurrencies: a gate that
// counts requests instead of the scarce resource refuses past 16.
const defaultLadder = "16,24,32,48,64,100,200"

// runSweep runs a ladder of concurrencies (closed loop) or rates (open loop),
// a fixed time per step, prints the cliff table and writes the report.
func runSweep(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice sweep [--url] URL [--concurrencies 16,24,...|--rates R1,R2,...] [flags]")
		printFlags(fs)
	}
	rf := addRunFlags(fs)
	concs := fs.String("concurrencies", defaultLadder, "closed-loop ladder of concurrencies")
	rates := fs.String("rates", "", "open-loop ladder of rates (replaces --concurrencies)")
	stepDur := fs.Duration("step-duration", 5*time.Second, "length of each window of each step")
	windows := fs.Int("windows", 1, "windows per step")
	if code, ok := parseArgs(fs, e, rf, args); !ok {
		return code
	}
	set := setFlags(fs)
	usageErr := func(format string, a ...any) int {
		return usageError(e, "sweep", fmt.Errorf(format, a...))
	}
	prof, _, code := rf.loadProfile(e, "sweep")
	if code >= 0 {
		return code
	}
	if *stepDur <= 0 {
		return usageErr("--step-duration must be > 0")
	}
	if *windows < 1 {
		return usageErr("--windows must be >= 1")
	}
	if *rates != "" && set["concurrencies"] {
		return usageErr("--rates and --concurrencies are exclusive")
	}
	base, err := rf.config()
	if err != nil {
		return usageErr("%v", err)
	}
	base.Windows, base.Duration = *windows, *stepDur
	var steps []load.Config
	if *rates != "" {
		rs, err := parseFloats(*rates)
		if err != nil {
			return usageErr("--rates: %v", err)
		}
		if len(rs) > load.MaxSegments {
			return usageErr("--rates has %d rungs, over the bound: at most %d", len(rs), load.MaxSegments)
		}
		for i, r := range rs {
			c := base
			if c.Shape, err = load.Constant(r, *stepDur); err != nil {
				return usageErr("%s", flagError(err, sweepFlagNames))
			}
			if c.Seed > 0 {
				// Each rung its own arrivals, all named by the one seed.
				if c.Seed = base.Seed + uint64(i); c.Seed > load.MaxSeed {
					c.Seed -= load.MaxSeed
				}
			}
			steps = append(steps, c)
		}
	} else {
		if set["arrivals"] || set["seed"] {
			return usageErr("--arrivals and --seed shape an open loop's timetable (--rates); a ladder of concurrencies has none")
		}
		base.Arrivals, base.Seed = "", 0
		cs, err := parseInts(*concs)
		if err != nil {
			return usageErr("--concurrencies: %v", err)
		}
		if len(cs) > load.MaxSegments {
			return usageErr("--concurrencies has %d rungs, over the bound: at most %d", len(cs), load.MaxSegments)
		}
		for _, n := range cs {
			c := base
			c.Concurrency = n
			steps = append(steps, c)
		}
	}
	if err := load.CheckSteps(steps); err != nil {
		return usageErr("%s", flagError(err, sweepFlagNames))
	}
	return rf.run(ctx, e, "sweep", append([]string{"sluice", "sweep"}, args...), prof, steps)
}
