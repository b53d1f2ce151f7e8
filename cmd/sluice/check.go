package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/sluicehq/sluice/load"
)

// runCheck re-judges a saved report against a profile case.
func runCheck(_ context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice check --profile PROFILE [--case NAME] [--release] REPORT.json")
		printFlags(fs)
	}
	profile := fs.String("profile", "", "profile JSON to judge against (required)")
	caseName := fs.String("case", "", "case to judge by (default: the case the report was run against, which the profile must have; for a report run without a profile, the profile's only case)")
	release := fs.Bool("release", false, "also require a release-qualified report (known revision, clean tree, binary, profile and source hashes)")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	switch {
	case *profile == "":
		return usageError(e, "check", errors.New("--profile PROFILE is required"))
	case fs.NArg() != 1:
		return usageError(e, "check", fmt.Errorf("want one REPORT.json, got %d arguments", fs.NArg()))
	}
	r, err := load.ReadReport(fs.Arg(0))
	if err != nil {
		return inputError(e, "check", err)
	}
	ref, err := readProfileRef(*profile)
	if err != nil {
		return inputError(e, "check", err)
	}
	c, err := ref.Profile.CaseFor(r, *caseName)
	if err != nil {
		return inputError(e, "check", fmt.Errorf("%s: %v", ref.Path, err))
	}
	ref.Case = c.Name
	v := load.Check(r, &c, *release)
	fmt.Fprintf(e.stdout, "%s: %s (case %q of %s)\n", fs.Arg(0), v.Status, ref.Case, ref.Path)
	for _, reason := range v.Reasons {
		fmt.Fprintf(e.stdout, "  - %s\n", reason)
	}
	return verdictExit(v)
}
