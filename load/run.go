package load

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"
)

// Meta is what the caller knows about the run that the driver does not:
// the binary, the command line and the profile.
type Meta struct {
	Tool         Tool
	BinarySHA256 string
	Command      []string
	Profile      *ProfileRef
	// SourceFiles are the hashes of the gate and driver sources the binary
	// was built from (see ReleaseReasons).
	SourceFiles []SourceFile
}

// Run drives the steps one after another and returns the report, judged
// against the profile case in meta (if any). It stops early when ctx is
// canceled (the report is then marked interrupted) or a step is aborted.
// kind is "load" or "sweep". Config errors are returned before any load is
// sent.
func Run(ctx context.Context, kind string, meta Meta, steps []Config) (*Report, error) {
	if err := CheckSteps(steps); err != nil {
		return nil, err
	}
	r := newReport(kind, meta)
	for i, cfg := range steps {
		st, end, err := runStep(ctx, cfg, i)
		if err != nil {
			return nil, err
		}
		r.Steps = append(r.Steps, st)
		if end == EndInterrupted {
			r.Interrupted = true
			break
		}
		if end == EndAborted {
			r.Aborted = "a window did not drain within the drain timeout"
			break
		}
	}
	r.Finished = time.Now().UTC()
	r.Verdict = Judge(r, meta.caseOf())
	qualify(r)
	return r, nil
}

// CheckSteps validates the steps of a run as Run does before it sends
// anything: each step's Config (Config.Check), and their windows' total
// length, at most MaxRunDuration (the report keeps every second). Errors
// are *FieldError values.
func CheckSteps(steps []Config) error {
	var total time.Duration
	for i := range steps {
		d, err := steps[i].withDefaults()
		if err != nil {
			return err
		}
		total += d.Duration * time.Duration(d.Windows)
	}
	if total > MaxRunDuration {
		return configErr("Windows×Duration", fmt.Sprintf("%v (all steps together)", total), overBound(MaxRunDuration))
	}
	return nil
}

func (m Meta) caseOf() *Case {
	if m.Profile == nil {
		return nil
	}
	c, err := m.Profile.Profile.Case(m.Profile.Case)
	if err != nil {
		return nil
	}
	return &c
}

// newReport starts an empty report with the host facts filled in.
func newReport(kind string, meta Meta) *Report {
	host, _ := os.Hostname()
	r := &Report{
		Schema: SchemaV1, Kind: kind, Tool: meta.Tool, BinarySHA256: meta.BinarySHA256,
		Host: Host{
			Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH,
			CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		},
		Command: append([]string{}, meta.Command...),
		Started: time.Now().UTC(), Profile: meta.Profile, Steps: []Step{},
		Verdict:     Verdict{Status: StatusNone, Reasons: []string{}, Windows: []WindowVerdict{}},
		SourceFiles: append([]SourceFile{}, meta.SourceFiles...),
	}
	qualify(r)
	return r
}
