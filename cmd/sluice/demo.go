package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/demo"
	"github.com/sluicehq/sluice/limit"
)

// runDemo runs `sluice demo`: the whole idea in one command. It measures
// an in-process server's capacity, overloads four variants of it the same
// way, prints the comparison and writes an HTML report.
func runDemo(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice demo [flags]\n\n"+
		"Start a static-file server in this process (hot files in its cache, cold files on a slow disk),\n"+
		"measure how many uncached requests a second its disk completes, then offer 1×, 2×, 5× and 10× that,\n"+
		"cached and uncached work together, to four variants: no gate, a gate taken per request (the bug),\n"+
		"a gate taken per disk read (the fix), and an adaptive disk gate. Prints the comparison, says what\n"+
		"it shows, and writes an HTML report. Takes under a minute; needs nothing installed.\n\n"+
		"Exit status: 0 done; 2 bad flags or an --out that cannot be used; 4 the demo itself failed.")
	out := fs.String("out", "", "folder for the HTML report and the drivers' JSON reports, created if missing (default: a new temporary folder)")
	step := fs.Duration("step", demo.DefaultStepDuration, "length of each step of the overload")
	law := fs.String("law", demo.DefaultLaw, "the adaptive gate's law: aimd, vegas or gradient2")
	var live liveFlag
	fs.Var(&live, "live", "live progress line on stderr: auto (when a terminal), on or off")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "sluice demo: unexpected argument %q (see --help)\n", fs.Arg(0))
		return exitUsage
	}
	if *step <= 0 || *step > demo.MaxStepDuration {
		fmt.Fprintf(e.stderr, "sluice demo: --step %v: want more than 0 and at most %v\n", *step, demo.MaxStepDuration)
		return exitUsage
	}
	if _, err := limit.ParseLaw(*law); err != nil {
		fmt.Fprintf(e.stderr, "sluice demo: --law %q: want aimd, vegas or gradient2\n", *law)
		return exitUsage
	}
	dir := *out
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-demo-")
		if err != nil {
			fmt.Fprintf(e.stderr, "sluice demo: %v\n", err)
			return exitInternal
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(e.stderr, "sluice demo: --out %q: %v\n", dir, err)
		return exitUsage
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		fmt.Fprintf(e.stderr, "sluice demo: --out %q: not a folder\n", dir)
		return exitUsage
	}

	terminal := isTerminal(e.stderr)
	cfg := demo.Config{StepDuration: *step, Law: *law}
	lineOpen := false
	if live.on(terminal) {
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
	fmt.Fprintf(e.stderr, "sluice demo: %d variants × %d steps of %v, about %v; report in %s\n",
		len(demo.Variants()), len(demo.DefaultMultipliers()), *step,
		(time.Duration(len(demo.Variants())*len(demo.DefaultMultipliers()))*(*step) + 3*time.Second + time.Duration(len(demo.Variants()))*2*time.Second).Round(time.Second), dir)
	res, err := demo.Run(ctx, cfg)
	if lineOpen {
		fmt.Fprintln(e.stderr)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(e.stderr, "sluice demo: interrupted")
		return exitInvalid
	case errors.Is(err, demo.ErrInvalidConfig):
		fmt.Fprintf(e.stderr, "sluice demo: %v\n", err)
		return exitUsage
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
