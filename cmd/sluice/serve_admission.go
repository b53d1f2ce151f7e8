package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/queuerules"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/static"
)

// admissionOptions are the `sluice serve` flags that shape the disk gate
// beyond its size: an adaptive limit, the queue's discipline, priority
// classes from a header and their guaranteed shares.
type admissionOptions struct {
	limit    string
	limitMin int64
	limitMax int64
	slo      time.Duration
	queueFlags

	// set by validate and wire
	law      limit.Law
	queuing  queuerules.Compiled
	adaptive *limit.Adaptive
}

// addAdmissionFlags registers the admission flags on fs.
func addAdmissionFlags(fs *flag.FlagSet) *admissionOptions {
	o := &admissionOptions{}
	fs.StringVar(&o.limit, "limit", "fixed", "how the disk gate's capacity is set: fixed (--max-inflight) or an adaptive law that follows latency: aimd, vegas or gradient2")
	fs.Int64Var(&o.limitMin, "limit-min", 0, "smallest capacity an adaptive --limit may set (0: 1)")
	fs.Int64Var(&o.limitMax, "limit-max", 0, "largest capacity an adaptive --limit may set (0: 1000)")
	fs.DurationVar(&o.slo, "slo", 0, "latency objective (99th percentile of queue wait plus disk read): an adaptive --limit holds the reads' tail to what the queue leaves of it and never learns a baseline above it; with --queue and no --max-wait the queue waits at most a quarter of it (0: none)")
	o.queueFlags.register(fs, "disk")
	return o
}

// validate checks the flags against each other and the queue size. Every
// error names the flag at fault.
func (o *admissionOptions) validate(queue int) error {
	var errs []error
	adaptive := o.limit != "fixed"
	if adaptive {
		law, err := limit.ParseLaw(o.limit)
		if err != nil {
			errs = append(errs, fmt.Errorf("--limit %q: want fixed, aimd, vegas or gradient2", o.limit))
		}
		o.law = law
	}
	if o.limitMin < 0 || o.limitMin > admit.MaxCapacity {
		errs = append(errs, fmt.Errorf("--limit-min %d: want 0..%d", o.limitMin, admit.MaxCapacity))
	}
	if o.limitMax < 0 || o.limitMax > admit.MaxCapacity {
		errs = append(errs, fmt.Errorf("--limit-max %d: want 0..%d", o.limitMax, admit.MaxCapacity))
	}
	if o.limitMin > 0 && o.limitMax > 0 && o.limitMin > o.limitMax {
		errs = append(errs, fmt.Errorf("--limit-min %d is above --limit-max %d", o.limitMin, o.limitMax))
	}
	if o.slo < 0 {
		errs = append(errs, fmt.Errorf("--slo %v: want 0 or more", o.slo))
	}
	if !adaptive {
		for _, f := range []struct {
			name string
			set  bool
		}{{"limit-min", o.limitMin != 0}, {"limit-max", o.limitMax != 0}, {"slo", o.slo != 0}} {
			if f.set {
				errs = append(errs, fmt.Errorf("--%s needs an adaptive --limit (aimd, vegas or gradient2)", f.name))
			}
		}
	}
	var err error
	if o.queuing, err = o.queueFlags.compile(queue); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// limitConfig returns the disk gate's adaptive limit when --limit asks
// for one, else nil (a fixed capacity). The disk gate is built with it
// (limit.NewGate, through static.Config.Limit), which also gives a queue
// without --max-wait a quarter of --slo, so that the queue's wait and the
// disk read fit in the SLO together.
func (o *admissionOptions) limitConfig(logger *slog.Logger) (*limit.Config, error) {
	if o.law == nil {
		return nil, nil
	}
	cfg := &limit.Config{Law: o.law, Min: o.limitMin, Max: o.limitMax, SLO: o.slo, Logger: logger}
	if _, err := limit.New(*cfg); err != nil {
		return nil, fmt.Errorf("--limit %s: %w", o.limit, err)
	}
	return cfg, nil
}

// wire applies the queue rules to the disk gate, meters the adaptive
// limit the handler built on m, and wraps h so the priority header
// reaches the gate.
func (o *admissionOptions) wire(logger *slog.Logger, m *promsluice.Metrics, disk *static.Handler, h http.Handler) (http.Handler, error) {
	if g := disk.Gate(); g != nil {
		if err := g.SetQueueing(o.queuing.Policy); err != nil {
			return nil, fmt.Errorf("--class-share: %w", err)
		}
	}
	if o.adaptive = disk.Limit(); o.adaptive != nil {
		if err := m.Add(o.adaptive); err != nil {
			return nil, err
		}
	}
	if o.queuing.Classify != nil {
		h = o.queuing.Classify(h)
	}
	if logger != nil && (o.adaptive != nil || o.queuing.Policy.Discipline != admit.DisciplineFIFO || o.priorityHeader != "") {
		logger.Info("disk gate admission", "limit", o.limit, "limit_min", o.limitMin, "limit_max", o.limitMax, "slo", o.slo,
			"queue_discipline", o.queuing.Policy.Discipline.String(), "priority_header", o.priorityHeader, "class_shares", o.shares.String())
	}
	return h, nil
}

// limits returns the adaptive limits for /state.
func (o *admissionOptions) limits() []*limit.Adaptive {
	if o.adaptive == nil {
		return nil
	}
	return []*limit.Adaptive{o.adaptive}
}

// queueFlags are the queue flags `sluice serve` and `sluice proxy` share:
// --queue-discipline, --priority-header and --class-share, checked and
// applied by internal/queuerules so both commands give them one meaning.
type queueFlags struct {
	discipline     string
	priorityHeader string
	shares         classShareFlag
}

// register adds the flags to fs; gate names the gate they shape in the
// help text ("disk", "upstream").
func (q *queueFlags) register(fs *flag.FlagSet, gate string) {
	fs.StringVar(&q.discipline, "queue-discipline", "fifo", "order of the "+gate+" gate's queue: fifo, lifo (newest first) or codel (short waits once the queue stands; needs --queue)")
	fs.StringVar(&q.priorityHeader, "priority-header", "", "request header naming the request's class: critical_plus, critical, sheddable_plus or sheddable (unknown values: critical); lower classes are shed first (needs --queue)")
	fs.Var(&q.shares, "class-share", "guaranteed minimum share of the "+gate+" gate for a class, `class=fraction` (e.g. sheddable=0.1); repeat for several classes (or comma-separate them), shares sum to 1 at most")
}

// rules returns the flags as queue rules.
func (q *queueFlags) rules() queuerules.Rules {
	return queuerules.Rules{Discipline: q.discipline, PriorityHeader: q.priorityHeader, ClassShares: q.shares.raw}
}

// compile checks the flags for a gate whose queue holds queue waiters;
// errors name the flags.
func (q *queueFlags) compile(queue int) (queuerules.Compiled, error) {
	return q.rules().Compile(queue, queuerules.Names{
		Discipline: "--queue-discipline", PriorityHeader: "--priority-header", ClassShares: "--class-share", Queue: "--queue",
	})
}

// classShareFlag collects repeated --class-share class=fraction values
// (one value may also list several, comma-separated, so SLUICE_CLASS_SHARE
// can carry them). admit.ParseClassShares checks them all together: known
// classes, each once, fractions in (0, 1] summing to at most 1.
type classShareFlag struct {
	raw    []string
	shares admit.ClassShares
	set    bool
}

func (f *classShareFlag) String() string {
	if f == nil {
		return ""
	}
	return f.shares.String()
}

func (f *classShareFlag) Set(s string) error {
	all := append(f.raw[:len(f.raw):len(f.raw)], s)
	shares, err := admit.ParseClassShares(strings.Join(all, ","))
	if err != nil {
		// The flag package names the flag; admit's prefix adds nothing.
		return errors.New(strings.TrimPrefix(err.Error(), admit.ErrInvalidConfig.Error()+": "))
	}
	f.raw, f.shares, f.set = all, shares, true
	return nil
}
