package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/load"
	"github.com/sluicehq/sluice/load/render"
)

// runReport prints a saved report, renders it (or two, overlaid) as HTML,
// or merges reports from several driver machines.
func runReport(ctx context.Context, e env, args []string) int {
	if len(args) > 0 && args[0] == "merge" {
		return runReportMerge(ctx, e, args[1:])
	}
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice report [--html OUT.html] REPORT.json [B.json]")
		fmt.Fprintln(e.stderr, "       sluice report merge --out MERGED.json A.json B.json ...")
		printFlags(fs)
	}
	html := fs.String("html", "", "write a self-contained HTML page with charts (two reports: an A/B overlay)")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageError(e, "report", fmt.Errorf("want one REPORT.json (or two, to compare), got %d arguments", fs.NArg()))
	}
	var reports []*load.Report
	worst := exitOK
	for _, p := range fs.Args() {
		r, err := load.ReadReport(p)
		if err != nil {
			return inputError(e, "report", err)
		}
		load.Rejudge(r) // the verdict check would give, not the one the file stores
		worst = worseExit(worst, verdictExit(r.Verdict))
		reports = append(reports, r)
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		fmt.Fprintf(e.stdout, "== %s\n", fs.Arg(i))
		render.Text(e.stdout, r)
	}
	if *html != "" {
		if err := render.WriteHTML(*html, reports, fs.Args()); err != nil {
			fmt.Fprintf(e.stderr, "sluice report: %v\n", err)
			return exitInternal
		}
		fmt.Fprintf(e.stdout, "html: %s\n", *html)
	}
	return worst
}

// worseExit is the worse of two verdict exit codes: FAIL over INVALID over
// a pass.
func worseExit(a, b int) int {
	rank := func(c int) int {
		switch c {
		case exitFail:
			return 2
		case exitInvalid:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

func runReportMerge(_ context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("report merge", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice report merge [--out MERGED.json] A.json B.json ...")
		fmt.Fprintln(e.stderr)
		fmt.Fprintln(e.stderr, "Merge the reports of one run driven from several machines: counts add up, histograms merge.")
		fmt.Fprintln(e.stderr)
		fmt.Fprintln(e.stderr, "flags:")
		printFlags(fs)
	}
	out := fs.String("out", "", "merged report file (default: load-report-<UTC time>.json)")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() < 2 {
		return usageError(e, "report merge", fmt.Errorf("want two reports or more to merge, got %d", fs.NArg()))
	}
	path := *out
	if path == "" {
		path = load.DefaultReportName(time.Now())
	}
	if msg := mergeInputsDistinct(path, fs.Args()); msg != "" {
		return inputError(e, "report merge", errors.New(msg))
	}
	var reports []*load.Report
	var sources []load.Source
	hashes := map[string]string{}
	for _, p := range fs.Args() {
		r, sum, err := load.ReadReportSHA256(p)
		if err != nil {
			return inputError(e, "report merge", err)
		}
		if prev, dup := hashes[sum]; dup {
			return inputError(e, "report merge", fmt.Errorf("%s and %s have the same content: merging would count every request twice", prev, p))
		}
		hashes[sum] = p
		reports = append(reports, r)
		sources = append(sources, load.Source{File: filepath.Base(p), SHA256: sum, Host: r.Host.Hostname, Started: r.Started})
	}
	meta := load.Meta{Tool: toolInfo(), BinarySHA256: binarySHA256(), Command: append([]string{"sluice", "report", "merge"}, args...), SourceFiles: sourceFiles()}
	m, err := load.Merge(meta, reports)
	if err != nil {
		return inputError(e, "report merge", err)
	}
	m.Sources = sources
	if err := load.WriteReport(path, m); err != nil {
		fmt.Fprintf(e.stderr, "sluice report merge: %v\n", err)
		return exitInternal
	}
	render.Text(e.stdout, m)
	fmt.Fprintf(e.stdout, "report: %s\n", path)
	return exitOK
}

// mergeInputsDistinct refuses the same input file twice (by path or by
// identity, so links and ./a vs a are caught) and an output that is one of
// the inputs.
func mergeInputsDistinct(out string, inputs []string) string {
	stats := make([]os.FileInfo, len(inputs))
	for i, p := range inputs {
		st, err := os.Stat(p)
		if err != nil {
			return err.Error()
		}
		stats[i] = st
		for j := range i {
			if os.SameFile(stats[j], st) {
				return fmt.Sprintf("%s and %s are the same file: merging would count every request twice", inputs[j], p)
			}
		}
	}
	if st, err := os.Stat(out); err == nil {
		for i, in := range stats {
			if os.SameFile(in, st) {
				return fmt.Sprintf("--out %s is the input %s: refusing to overwrite an input", out, inputs[i])
			}
		}
	}
	return ""
}
