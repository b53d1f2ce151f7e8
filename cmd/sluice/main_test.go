package main

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
)

// Environment of a child process: the test binary re-executed as the
// sluice command (see runChild).
const (
	childEnv       = "SLUICE_TEST_CHILD"  // "1": run as sluice with os.Args[1:]
	childNoFileEnv = "SLUICE_TEST_NOFILE" // lower the soft RLIMIT_NOFILE to this first
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	os.Exit(runEnginePasses(m))
}

// runChild is main's body, with real signals, after optionally lowering
// the descriptor limit (as `ulimit -n` would; the Go runtime raised it to
// the hard limit at start).
func runChild() int {
	if s := os.Getenv(childNoFileEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 99
		}
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 99
		}
		rl.Cur = n
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 99
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return dispatch(ctx, env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
}
