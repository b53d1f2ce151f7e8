package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/sluicehq/sluice/doctor"
	"github.com/sluicehq/sluice/server"
)

// runDoctor runs `sluice doctor`: two readings of a running server's admin
// listener, and what they show.
func runDoctor(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	usageFor(fs, "usage: sluice doctor [flags]\n\n"+
		"Read a running server's /metrics and /state twice, --interval apart, and explain what the\n"+
		"difference shows: arrivals above completions, queues growing, stalls, concentrated refusals,\n"+
		"retry amplification, counts that do not add up. With --pprof, also where goroutines wait.\n\n"+
		"Exit status: 0 nothing worse than info; 1 a warning or critical finding; 2 bad flags;\n"+
		"3 the server could not be read (unreachable, HTTP error, unparsable metrics).")
	admin := fs.String("admin-addr", server.DefaultAdminAddr, "the server's admin listener (its --admin-addr), `host:port` or http://host:port")
	interval := fs.Duration("interval", doctor.DefaultInterval, "time between the two readings")
	timeout := fs.Duration("timeout", doctor.DefaultTimeout, "bound on each HTTP request")
	pprof := fs.Bool("pprof", false, "also read /debug/pprof/goroutine?debug=2 (start the server with --pprof)")
	noState := fs.Bool("no-state", false, "do not read /state (a service with promsluice metrics but no sluice server)")
	asJSON := fs.Bool("json", false, "print the diagnosis as JSON")
	deprecate(fs, "admin", "admin-addr")
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		return usageError(e, "doctor", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *interval <= 0 {
		return usageError(e, "doctor", fmt.Errorf("--interval %v: must be greater than zero", *interval))
	}
	if *timeout <= 0 {
		return usageError(e, "doctor", fmt.Errorf("--timeout %v: must be greater than zero", *timeout))
	}
	d, err := doctor.Run(ctx, doctor.Config{Admin: *admin, Interval: *interval, Timeout: *timeout, Pprof: *pprof, NoState: *noState})
	switch {
	case errors.Is(err, doctor.ErrInvalidConfig):
		return usageError(e, "doctor", err)
	case err != nil:
		printError(e, "doctor", err)
		return exitInvalid
	}
	if *asJSON {
		writeJSON(e.stdout, d)
	} else if err := d.WriteText(e.stdout); err != nil {
		return exitFail
	}
	if w := d.Worst(); w == doctor.Warn || w == doctor.Critical {
		return exitFail
	}
	return exitOK
}
