package main

import (
	"context"
	"fmt"
)

// runServe is a placeholder until its issue lands; it says so and fails.
func runServe(_ context.Context, e env, _ []string) int {
	fmt.Fprintln(e.stderr, "sluice serve: not built yet")
	return exitFail
}
