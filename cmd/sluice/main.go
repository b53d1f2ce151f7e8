// Command sluice is the command-line face of the sluice toolkit: servers
// that shed load at the point of cost, a load driver that measures
// overload honestly, and the arithmetic and diagnosis around them. `sluice
// help` lists the commands; commands() below is the one table that list,
// the usage text and the dispatch are read from.
//
// main is deliberately thin: it picks a subcommand and hands it the rest of
// the arguments, standard streams and a context that ends on SIGINT/SIGTERM.
// Each subcommand lives in its own file and returns an exit code.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes shared by every subcommand.
const (
	exitOK       = 0
	exitFail     = 1 // the job ran and failed (a FAIL verdict, a server error)
	exitUsage    = 2 // bad flags, bad input files
	exitInvalid  = 3 // a measurement that cannot be trusted (driver-limited)
	exitInternal = 4 // the tool itself failed (a report could not be written, an unexpected error)
	exitBind     = 5 // a server could not listen: its address is in use, not permitted or not this host's
)

// env carries what a subcommand may touch of the outside world, so tests
// can run subcommands in-process with their own streams and environment.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

type command struct {
	name, summary string
	run           func(ctx context.Context, e env, args []string) int
}

func commands() []command {
	return []command{
		{"serve", "serve static files with disk reads behind an admission gate", serveMain},
		{"proxy", "reverse proxy with gates, quotas, retry budget, breaker and stale-if-error", runProxy},
		{"ratelimit", "Envoy's rate limit service (RLS v3) on sluice's quotas, local or shared through Redis", runRatelimit},
		{"lab", "run the backpressure lab server (one business slot by default)", runLab},
		{"load", "drive open- or closed-loop load at a target and write a report", runLoad},
		{"sweep", "run a ladder of concurrencies or rates and print the cliff table", runSweep},
		{"check", "re-judge a saved report against a profile", runCheck},
		{"report", "summarise, render or merge saved reports", runReport},
		{"plan", "capacity arithmetic: Little's law, drain time, queue size, retries, fleet", runPlan},
		{"doctor", "diagnose a running server from its /metrics, /state and goroutines", runDoctor},
		{"demo", "overload an in-process server four ways and compare: no gate, the bug, the fix, adaptive", runDemo},
		{"version", "print the module version and VCS revision", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	tuneGC(os.Args[1:], os.Getenv)
	code := dispatch(ctx, env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, e env, args []string) int {
	if len(args) >= 2 && args[0] == "help" {
		// sluice help serve: serve's --help (an unknown name is refused
		// as a mistyped command is).
		return dispatch(ctx, e, []string{args[1], "--help"})
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	best, bestD := "", 3
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
		if d := editDistance(args[0], c.name); d < bestD {
			best, bestD = c.name, d
		}
	}
	if best != "" {
		fmt.Fprintf(e.stderr, "sluice: unknown command %q (did you mean %q?)\n", args[0], best)
	} else {
		fmt.Fprintf(e.stderr, "sluice: unknown command %q\n", args[0])
	}
	fmt.Fprintln(e.stderr, "Run 'sluice help' for the commands.")
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sluice <command> --help' (or 'sluice help <command>') for the flags of a command.")
}
