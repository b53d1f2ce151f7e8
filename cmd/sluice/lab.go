package main

import (
	"context"
	"fmt"
)

// runLab is a placeholder until its issue lands; it says so and fails.
func runLab(_ context.Context, e env, _ []string) int {
	fmt.Fprintln(e.stderr, "sluice lab: not built yet")
	return exitFail
}
