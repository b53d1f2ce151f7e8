// NOTE TO THE ENGINEER REPLACING THIS FILE: before any work, read the team rules in
// .helper-brief.md at the repository root (file ownership, commits, go.mod, mutant
// format, deadline). Delete this note when you replace the file.
package main

import (
	"context"
	"fmt"
)

// Placeholders until the load driver lands; they say so and fail.
func runLoad(_ context.Context, e env, _ []string) int   { return notYet(e, "load") }
func runSweep(_ context.Context, e env, _ []string) int  { return notYet(e, "sweep") }
func runCheck(_ context.Context, e env, _ []string) int  { return notYet(e, "check") }
func runReport(_ context.Context, e env, _ []string) int { return notYet(e, "report") }

func notYet(e env, name string) int {
	fmt.Fprintf(e.stderr, "sluice %s: not built yet\n", name)
	return exitFail
}
