package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
)

// admissionOptions are the `sluice serve` flags that shape the disk gate
// beyond its size: an adaptive limit, the queue's discipline, priority
// classes from a header and their guaranteed shares.
type admissionOptions struct {
	limit          string
	limitMin       int64
	limitMax       int64
	slo            time.Duration
	discipline     string
	priorityHeader string
	shares         classShareFlag

	// set by validate and observer
	law      limit.Law
	disc     admit.Discipline
	adaptive *limit.Adaptive
	gate     atomic.Pointer[admit.Gate] // for the ramp's queue-age signal
}

// addAdmissionFlags registers the admission flags on fs.
func addAdmissionFlags(fs *flag.FlagSet) *admissionOptions {
	o := &admissionOptions{}
	fs.StringVar(&o.limit, "limit", "fixed", "how the disk gate's capacity is set: fixed (--work-limit) or an adaptive law that follows latency: aimd, vegas or gradient2")
	fs.Int64Var(&o.limitMin, "limit-min", 0, "smallest capacity an adaptive --limit may set (0: 1)")
	fs.Int64Var(&o.limitMax, "limit-max", 0, "largest capacity an adaptive --limit may set (0: 1000)")
	fs.DurationVar(&o.slo, "slo", 0, "latency objective (99th percentile of queue wait plus disk read): an adaptive --limit holds the reads' tail to what the queue leaves of it and never learns a baseline above it; with --queue and no --max-wait the queue waits at most a quarter of it (0: none)")
	fs.StringVar(&o.discipline, "queue-discipline", "fifo", "order of the disk queue: fifo, lifo (newest first) or codel (short waits once the queue stands; needs --queue)")
	fs.StringVar(&o.priorityHeader, "priority-header", "", "request header naming the request's class: critical_plus, critical, sheddable_plus or sheddable (unknown values: critical); lower classes are shed first (needs --queue)")
	fs.Var(&o.shares, "class-share", "guaranteed minimum share of the disk gate for a class, `class=fraction` (e.g. sheddable=0.1); repeat for several classes, shares sum to 1 at most")
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
	d, err := admit.ParseDiscipline(o.discipline)
	if err != nil {
		errs = append(errs, fmt.Errorf("--queue-discipline %q: want fifo, lifo or codel", o.discipline))
	}
	o.disc = d
	if d != admit.DisciplineFIFO && queue == 0 {
		errs = append(errs, fmt.Errorf("--queue-discipline %s needs --queue: without a queue nothing waits", d))
	}
	if o.priorityHeader != "" {
		if !httpguts.ValidHeaderFieldName(o.priorityHeader) {
			errs = append(errs, fmt.Errorf("--priority-header %q: not a valid header name", o.priorityHeader))
		} else if queue == 0 {
			errs = append(errs, errors.New("--priority-header needs --queue: classes order and shed the queue"))
		}
	}
	if o.shares.set && queue == 0 {
		errs = append(errs, errors.New("--class-share needs --queue: shares order the queue"))
	}
	if o.shares.set && o.priorityHeader == "" {
		errs = append(errs, errors.New("--class-share needs --priority-header: without it every request is critical"))
	}
	return errors.Join(errs...)
}

// maxWait is the disk queue's wait limit: the --max-wait given or, with an
// adaptive --limit, an --slo and a --queue but no --max-wait, the limit
// package's share of the SLO for the queue (a quarter), so that the
// queue's wait and the disk read fit in the SLO together.
func (o *admissionOptions) maxWait(given time.Duration, queue int) time.Duration {
	if given != 0 || o.law == nil || o.slo <= 0 || queue == 0 {
		return given
	}
	return limit.QueueWaitFor(o.slo)
}

// observer returns the disk gate's Observer: base, plus the adaptive limit
// when --limit asks for one.
func (o *admissionOptions) observer(base admit.Observer, logger *slog.Logger) (admit.Observer, error) {
	if o.law == nil {
		return base, nil
	}
	a, err := limit.New(limit.Config{
		Law: o.law, Min: o.limitMin, Max: o.limitMax, SLO: o.slo, Logger: logger,
		Ramp: limit.Ramp{QueueAge: func() time.Duration {
			if g := o.gate.Load(); g != nil {
				return g.OldestWait()
			}
			return 0
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("--limit %s: %w", o.limit, err)
	}
	o.adaptive = a
	return admit.Observers(base, a), nil
}

// wire applies the queue policy to the disk gate, attaches the adaptive
// limit, and wraps h so the priority header reaches the gate.
func (o *admissionOptions) wire(logger *slog.Logger, g *admit.Gate, h http.Handler, collectors []prometheus.Collector) (http.Handler, []prometheus.Collector, error) {
	o.gate.Store(g)
	err := g.SetQueuePolicy(admit.QueuePolicy{
		Discipline: o.disc, ClassShares: o.shares.shares, ContextClass: o.priorityHeader != "",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--class-share: %w", err)
	}
	if o.adaptive != nil {
		if err := o.adaptive.Attach(g); err != nil {
			return nil, nil, fmt.Errorf("--limit %s: %w", o.limit, err)
		}
		lm := promsluice.NewLimitMetrics()
		lm.Add(o.adaptive)
		collectors = append(collectors, lm)
	}
	if o.priorityHeader != "" {
		classify, err := httpgate.ClassFromHeader(o.priorityHeader)
		if err != nil {
			return nil, nil, fmt.Errorf("--priority-header: %w", err)
		}
		h = classify(h)
	}
	if logger != nil && (o.adaptive != nil || o.disc != admit.DisciplineFIFO || o.priorityHeader != "") {
		logger.Info("disk gate admission", "limit", o.limit, "limit_min", o.limitMin, "limit_max", o.limitMax, "slo", o.slo,
			"queue_discipline", o.disc.String(), "priority_header", o.priorityHeader, "class_shares", o.shares.String())
	}
	return h, collectors, nil
}

// limits returns the adaptive limits for /state.
func (o *admissionOptions) limits() []*limit.Adaptive {
	if o.adaptive == nil {
		return nil
	}
	return []*limit.Adaptive{o.adaptive}
}

// classShareFlag collects repeated --class-share class=fraction values.
type classShareFlag struct {
	shares admit.ClassShares
	seen   [admit.NumClasses]bool
	set    bool
}

func (f *classShareFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	var parts []string
	for c, v := range f.shares {
		if f.seen[c] {
			parts = append(parts, admit.Class(c).String()+"="+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

func (f *classShareFlag) Set(s string) error {
	c, v, err := parseClassShare(s)
	if err != nil {
		return err
	}
	if f.seen[c] {
		return fmt.Errorf("class %s given twice", c)
	}
	sum := v
	for _, have := range f.shares {
		sum += have
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("shares sum to %v, more than 1", sum)
	}
	f.shares[c], f.seen[c], f.set = v, true, true
	return nil
}

// parseClassShare parses "sheddable=0.1" (also "sheddable=10%"). The class
// must be one of the four names: a typo in configuration is an error, not
// a silent default.
func parseClassShare(s string) (admit.Class, float64, error) {
	name, val, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want class=fraction, e.g. sheddable=0.1", s)
	}
	c, known := admit.ParseClass(strings.TrimSpace(name))
	if !known {
		return 0, 0, fmt.Errorf("%q: unknown class %q (want %s)", s, name, strings.Join(admit.Classes(), ", "))
	}
	val = strings.TrimSpace(val)
	scale := 1.0
	if p, ok := strings.CutSuffix(val, "%"); ok {
		val, scale = p, 100
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, 0, fmt.Errorf("%q: fraction %q is not a number", s, val)
	}
	v /= scale
	if v <= 0 || v > 1 {
		return 0, 0, fmt.Errorf("%q: fraction %v outside (0, 1]", s, v)
	}
	return c, v, nil
}
