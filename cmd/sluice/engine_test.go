package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"
)

// testEngine is the engine the serve tests run on: "fast" (the default)
// in the first pass of TestMain, "net" in the second.
var testEngine = "fast"

// runServe is serveMain on the engine under test: the serve tests call
// it, so one set of tests checks both front ends. In the net pass it adds
// --engine net unless the arguments or the test's environment choose an
// engine.
func runServe(ctx context.Context, e env, args []string) int {
	if testEngine == "net" && !slices.Contains(args, "--engine") && (e.getenv == nil || e.getenv("SLUICE_ENGINE") == "") {
		args = append([]string{"--engine", "net"}, args...)
	}
	return serveMain(ctx, e, args)
}

// runEnginePasses runs the package's tests on the default engine, then
// the serve tests (those whose name contains "Serve", unless -run says
// otherwise) again with --engine net; children started by the tests get
// SLUICE_ENGINE=net.
func runEnginePasses(m *testing.M) int {
	fmt.Println("=== engine fast")
	if code := m.Run(); code != 0 {
		return code
	}
	testEngine = "net"
	os.Setenv("SLUICE_ENGINE", "net")
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		_ = flag.Set("test.run", "Serve")
	}
	fmt.Println("=== engine net (serve tests)")
	return m.Run()
}
