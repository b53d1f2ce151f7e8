package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"
)

// testEngine is the engine the serve and proxy tests run on: "fast" (the
// default) in the first pass of TestMain, "net" in the second.
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

// runProxyOnEngine is runProxy on the engine under test, as runServe is
// serveMain's.
func runProxyOnEngine(ctx context.Context, e env, args []string) int {
	if testEngine == "net" && !slices.Contains(args, "--engine") && (e.getenv == nil || e.getenv("SLUICE_ENGINE") == "") {
		args = append([]string{"--engine", "net"}, args...)
	}
	return runProxy(ctx, e, args)
}

// netPassSkips are the proxy tests the net pass leaves out: they check
// flags only, or serve TLS, which is net/http on either engine.
const netPassSkips = "^TestProxy(BadFlags|RequestPathFlags|ConfigWithByteOrderMark|OverTLS)"

// runEnginePasses runs the package's tests on the default engine, then
// the serve and proxy tests (those whose name contains "Serve" or
// "Proxy", unless -run says otherwise; minus netPassSkips) again with
// --engine net; children started by the tests get SLUICE_ENGINE=net.
func runEnginePasses(m *testing.M) int {
	fmt.Println("=== engine fast")
	if code := m.Run(); code != 0 {
		return code
	}
	testEngine = "net"
	os.Setenv("SLUICE_ENGINE", "net")
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		_ = flag.Set("test.run", "Serve|Proxy")
	}
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() == "" {
		_ = flag.Set("test.skip", netPassSkips)
	}
	fmt.Println("=== engine net (serve and proxy tests)")
	return m.Run()
}
