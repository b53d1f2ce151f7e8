package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/load"
)

// runCheck re-judges a saved report against a profile case.
func runCheck(_ context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice check --profile PROFILE [--case NAME] [--release] REPORT.json")
		fs.PrintDefaults()
	}
	profile := fs.String("profile", "", "profile JSON to judge against (required)")
	caseName := fs.String("case", "", "case to use (default: the report's case, or the profile's only case)")
	release := fs.Bool("release", false, "also require a release-qualified report (known revision, clean tree, binary, profile and source hashes)")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if *profile == "" || fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	r, err := load.ReadReport(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice check: %v\n", err)
		return exitUsage
	}
	name := *caseName
	if name == "" && r.Profile != nil {
		name = r.Profile.Case
	}
	ref, c, err := readProfile(*profile, name)
	if err != nil && *caseName == "" && name != "" {
		// The report's case is not in this profile: fall back to its only case.
		ref, c, err = readProfile(*profile, "")
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice check: %v\n", err)
		return exitUsage
	}
	v := load.Judge(r, c)
	if *release {
		// Judged from the report's own fields, not its stored flag.
		for _, why := range load.ReleaseReasons(r) {
			v.Reasons = append(v.Reasons, "not release-qualified: "+why)
			if v.Status != load.StatusFail {
				v.Status = load.StatusInvalid
			}
		}
		if r.Kind == "merge" && !r.ReleaseQualified {
			v.Reasons = append(v.Reasons, "not release-qualified: "+strings.Join(r.ReleaseReasons, "; "))
			if v.Status != load.StatusFail {
				v.Status = load.StatusInvalid
			}
		}
	}
	fmt.Fprintf(e.stdout, "%s: %s (case %q of %s)\n", fs.Arg(0), v.Status, ref.Case, ref.Path)
	for _, reason := range v.Reasons {
		fmt.Fprintf(e.stdout, "  - %s\n", reason)
	}
	return verdictExit(v)
}
