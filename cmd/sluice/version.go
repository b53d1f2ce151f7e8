package main

import (
	"context"
	"flag"
	"fmt"

	"runtime/debug"
)

// buildInfo is what `sluice version` prints and what reports embed.
type buildInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Dirty    bool   `json:"dirty"`
	Go       string `json:"go"`
}

func readBuildInfo() buildInfo {
	bi := buildInfo{Module: "github.com/sluicehq/sluice", Version: "(unknown)"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	bi.Go = info.GoVersion
	if info.Main.Path != "" {
		bi.Module = info.Main.Path
	}
	if info.Main.Version != "" {
		bi.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Revision = s.Value
		case "vcs.time":
			bi.Time = s.Value
		case "vcs.modified":
			bi.Dirty = s.Value == "true"
		}
	}
	return bi
}

func (b buildInfo) String() string {
	s := fmt.Sprintf("%s %s", b.Module, b.Version)
	if b.Revision != "" {
		s += " rev " + b.Revision
		if b.Dirty {
			s += " (dirty)"
		}
	}
	if b.Time != "" {
		s += " " + b.Time
	}
	return s + " " + b.Go
}

func runVersion(_ context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: sluice version")
		fmt.Fprintln(e.stderr)
		fmt.Fprintln(e.stderr, "Print the module version, the VCS revision (when the binary was built with VCS stamping on),")
		fmt.Fprintln(e.stderr, "the build time and the Go version. It takes no flags.")
	}
	if err := parseFlags(fs, e, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		return usageError(e, "version", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	fmt.Fprintln(e.stdout, readBuildInfo())
	return exitOK
}

// parseExit maps a flag parse error to an exit code: --help is success,
// anything else is a usage error (the flag package already printed why).
func parseExit(err error) int {
	if err == flag.ErrHelp {
		return exitOK
	}
	return exitUsage
}
