package testutil

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Engines are the HTTP/1.1 front ends the servers' tests run on: net
// (net/http) and fast (sluice's engine).
var Engines = []string{"net", "fast"}

// RunOnEngines is a TestMain body that runs the package's tests once per
// engine, so that one set of tests checks both front ends: set is called
// with the engine's name before each run, and a banner names it in the
// output. SLUICE_TEST_ENGINES (a comma-separated subset, e.g. "fast")
// narrows the list. After the last run it checks for leaked goroutines
// as goleak.VerifyTestMain does. With -failfast it stops after the first
// engine whose run failed. It returns the exit code.
func RunOnEngines(m *testing.M, set func(engine string), opts ...goleak.Option) int {
	engines := Engines
	if v := os.Getenv("SLUICE_TEST_ENGINES"); v != "" {
		engines = strings.Split(v, ",")
	}
	code := 0
	for _, e := range engines {
		fmt.Printf("=== engine %s\n", e)
		set(e)
		if c := m.Run(); c != 0 {
			fmt.Printf("--- FAIL on engine %s\n", e)
			code = c
			if failFast() {
				// -failfast asks for the first failure only: a test
				// that failed on one engine need not be run (and
				// waited for) on the next.
				break
			}
		}
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// failFast reports whether the test binary runs with -failfast.
func failFast() bool {
	f := flag.Lookup("test.failfast")
	return f != nil && f.Value.String() == "true"
}
