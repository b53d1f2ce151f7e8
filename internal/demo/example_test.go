package demo_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/demo"
)

// Run the bug and the fix against each other on short steps, print the
// table and say what it shows. (Compiled, not run: it takes seconds and
// its figures depend on the machine.)
func ExampleRun() {
	res, err := demo.Run(context.Background(), demo.Config{
		StepDuration: 500 * time.Millisecond,
		Variants:     []demo.Variant{demo.RequestScope, demo.DiskScope},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	demo.WriteTable(os.Stdout, res)
	fmt.Println(demo.Summary(res))
	if _, err := demo.WriteFiles(os.TempDir(), res); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// How the table writes durations and steps.
func ExampleFormatMS() {
	fmt.Println(demo.FormatMS(0.42), demo.FormatMS(38.2), demo.FormatMS(1250), demo.FormatMultiplier(2))
	// Output: 0.4ms 38ms 1.25s 2×
}
