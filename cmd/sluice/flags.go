package main

import (
	"flag"
	"fmt"
	"strings"
)

// envName is the environment twin of a flag: --max-conns -> SLUICE_MAX_CONNS.
func envName(flagName string) string {
	return "SLUICE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// parseFlags parses args into fs, then fills every flag not given on the
// command line from its SLUICE_* environment twin. Command-line flags win
// over the environment, the environment wins over defaults. A bad value in
// the environment is a usage error naming the variable.
func parseFlags(fs *flag.FlagSet, e env, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var firstErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || firstErr != nil || e.getenv == nil {
			return
		}
		name := envName(f.Name)
		if v := e.getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				firstErr = fmt.Errorf("invalid value %q for %s (twin of --%s): %v", v, name, f.Name, err)
			}
		}
	})
	if firstErr != nil {
		fmt.Fprintf(fs.Output(), "sluice %s: %v\n", fs.Name(), firstErr)
		return firstErr
	}
	return nil
}
