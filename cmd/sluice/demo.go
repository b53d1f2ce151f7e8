package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/limit"
)

// demoOptions are the parsed `sluice demo` flags.
type demoOptions struct {
	out  string // empty: a new temporary folder
	step time.Duration
	law  string
	live liveFlag
}

// parseDemoFlags parses the flags of `sluice demo`. It returns ok false
// with the exit code when the command should stop here (--help, or a
// usage error already explained on stderr). It touches no file.
func parseDemoFlags(e env, args []string) (o demoOptions, code int, ok bool) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice demo [flags]\n\n"+
		"Start a static-file server in this process (hot files in its cache, cold files on a slow disk),\n"+
		"measure how many uncached requests a second its disk completes, then offer 1×, 2×, 5× and 10× that,\n"+
		"cached and uncached work together, to four variants: no gate, a gate taken per request (the bug),\n"+
		"a gate taken per disk read (the fix), and an adaptive disk gate. Prints the comparison, says what\n"+
		"it shows, and writes an HTML report. Takes under a minute; needs nothing installed.\n\n"+
		"Exit status: 0 done; 2 bad flags or an --out that cannot be used; 3 interrupted; 4 the demo itself failed.")
	fs.StringVar(&o.out, "out", "", "folder for the HTML report and the drivers' JSON reports, created if missing (default: a new temporary folder)")
	fs.DurationVar(&o.step, "step-duration", demo.DefaultStepDuration, "length of each step of the overload")
	fs.StringVar(&o.law, "limit", demo.DefaultLaw, "the adaptive gate's limit: aimd, vegas or gradient2")
	fs.Var(&o.live, "live", "live progress line on stderr: auto (when a terminal), on or off")
	deprecate(fs, "step", "step-duration")
	deprecate(fs, "law", "limit")
	if err := parseFlags(fs, e, args); err != nil {
		return o, parseExit(err), false
	}
	if fs.NArg() > 0 {
		return o, usageError(e, "demo", fmt.Errorf("unexpected argument %q", fs.Arg(0))), false
	}
	if o.step <= 0 || o.step > demo.MaxStepDuration {
		return o, usageError(e, "demo", fmt.Errorf("--step-duration %v: want more than 0 and at most %v", o.step, demo.MaxStepDuration)), false
	}
	if _, err := limit.ParseLaw(o.law); err != nil {
		return o, usageError(e, "demo", fmt.Errorf("--limit %q: want aimd, vegas or gradient2", o.law)), false
	}
	return o, exitOK, true
}

// runDemo runs `sluice demo`: the whole idea in one command. It measures
// an in-process server's capacity, overloads four variants of it the same
// way, prints the comparison and writes an HTML report.
func runDemo(ctx context.Context, e env, args []string) (code int) {
	o, code, ok := parseDemoFlags(e, args)
	if !ok {
		return code
	}
	dir := o.out
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-demo-")
		if err != nil {
			fmt.Fprintf(e.stderr, "sluice demo: %v\n", err)
			return exitInternal
		}
		dir = d
		written := false
		defer func() {
			if !written {
				os.Remove(dir) // empty: nothing is written before the run succeeds
			}
		}()
		defer func() { written = code == exitOK }()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageError(e, "demo", fmt.Errorf("--out %q: %v", dir, err))
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return usageError(e, "demo", fmt.Errorf("--out %q: not a folder", dir))
	}
	terminal := isTerminal(e.stderr)
	cfg := demo.Config{StepDuration: o.step, Law: o.law}
	lineOpen := false
	if o.live.on(terminal) {
		cfg.Progress = func(p demo.Progress) {
			line := demo.ProgressLine(p)
			if terminal {
				fmt.Fprintf(e.stderr, "\r\033[K%s", line)
				lineOpen = true
			} else {
				fmt.Fprintln(e.stderr, line)
			}
		}
	}
	nv, ns := len(demo.Variants()), len(demo.DefaultMultipliers())
	estimate := time.Duration(nv*ns)*o.step + demo.DefaultCapacityProbe + time.Duration(nv)*1500*time.Millisecond
	fmt.Fprintf(e.stderr, "sluice demo: %d variants × %d steps of %v, about %v; the report goes to %s\n", nv, ns, o.step, estimate.Round(time.Second), dir)
	res, err := demo.Run(ctx, cfg)
	if lineOpen {
		fmt.Fprintln(e.stderr)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(e.stderr, "sluice demo: interrupted")
		return exitInvalid
	case errors.Is(err, demo.ErrInvalidConfig):
		return usageError(e, "demo", err)
	case err != nil:
		fmt.Fprintf(e.stderr, "sluice demo: %v\n", err)
		return exitInternal
	}
	if err := demo.WriteTable(e.stdout, res); err != nil {
		return exitInternal
	}
	fmt.Fprintln(e.stdout, demo.Summary(res))
	page, err := demo.WriteFiles(dir, res)
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice demo: writing the report: %v\n", err)
		return exitInternal
	}
	abs, err := filepath.Abs(page)
	if err != nil {
		abs = page
	}
	fmt.Fprintf(e.stdout, "\nreport: %s\n", abs)
	return exitOK
}
