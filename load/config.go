package load

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Config describes one step of load. The zero value is not runnable: it
// needs Targets and either a Shape (open loop) or Concurrency (closed loop).
// Every other zero field means the documented default.
type Config struct {
	// Targets are the requests to send; Pick chooses among them (zero:
	// RoundRobin).
	Targets []Target
	Pick    Pick

	// Shape is the open-loop timetable of each window. Ignored when
	// Concurrency > 0.
	Shape Shape
	// Arrivals is how an open loop's arrivals are spread over the Shape
	// (zero: Uniform, arrival i at Shape.At(i)). Poisson draws them from a
	// Poisson process at the Shape's rate, seeded by Seed.
	Arrivals Arrivals
	// Seed names the Poisson arrival times: the same seed and Shape give
	// the same timetable. Zero draws a seed at random; either way the
	// report records it. At most MaxSeed; ignored for uniform arrivals.
	Seed uint64
	// Concurrency > 0 selects a closed loop: that many workers, each sending
	// its next request when the previous one is answered.
	Concurrency int
	// Duration is the length of a closed-loop window (zero: 10 s). Open-loop
	// windows last Shape.Duration().
	Duration time.Duration
	// Windows is the number of windows (zero: 1), each judged on its own and
	// separated by a drain: the next window starts only when every request of
	// the previous one has finished.
	Windows int

	// Workers is the open-loop pool size (zero: 64). QueueDepth bounds the
	// arrival queue in front of the pool (zero: max(Workers,
	// mean rate × P99Budget)); an arrival that finds it full is dropped.
	Workers    int
	QueueDepth int
	// P99Budget is the response-time budget (zero: 500 ms). It sizes the
	// default queue and tells driver drops from server slowness.
	P99Budget time.Duration
	// MaxLag is the schedule-lag p99 above which a window is driver-limited
	// (zero: 10 ms).
	MaxLag time.Duration
	// MaxCPU is the driver CPU use, as a fraction of GOMAXPROCS, at or above
	// which a window is driver-limited (zero: 0.95; above 1: never).
	MaxCPU float64

	// Timeout bounds connecting and waiting for response headers (zero:
	// 10 s). DrainTimeout bounds the wait for a window's last requests
	// (zero: Timeout + 5 s); past it, the run is aborted and what is still
	// in flight counts as unfinished.
	Timeout      time.Duration
	DrainTimeout time.Duration

	// HTTP2 speaks HTTP/2 only (h2c on http:// URLs). DisableKeepAlives
	// opens a connection per request.
	HTTP2             bool
	DisableKeepAlives bool

	// Insecure accepts any TLS certificate the target presents, for a
	// test bench with a self-signed certificate. It does not apply to the
	// custom Transport, which carries its own TLS settings.
	Insecure bool

	// MetricsURL, when set, is scraped (Prometheus text) before and after
	// each window to attribute refusals to admission rejections.
	MetricsURL string

	// Label names the step in reports (zero: derived from the load).
	Label string
	// Live, when set, is called about once a second with the running
	// window's progress, from a goroutine of its own.
	Live func(Progress)
	// Transport replaces the HTTP transport (tests, custom TLS). Nil builds
	// one from the fields above.
	Transport http.RoundTripper
	// Logger receives a debug record per window and a warning when a step
	// is aborted; nil is silent.
	Logger *slog.Logger

	// coarseSleep makes the pacer use Go timers only (tests under
	// testing/synctest, where time is virtual).
	coarseSleep bool
	// fineSleep, when set, replaces the pacer's nanosleep (tests count it).
	fineSleep func(time.Duration)
}

// Progress is the live view of the running window.
type Progress struct {
	Step, Window int
	Elapsed      time.Duration
	Sent, OK     int64
	Refused      int64
	Dropped      int64
	Errors       int64
	Rate         float64 // sent per second over the last interval
	P99          time.Duration
}

// Arrivals is how an open loop spreads its arrivals over its Shape.
type Arrivals string

// Arrival processes.
const (
	// Uniform is the Shape's own timetable: arrival i due at Shape.At(i),
	// evenly spaced at a constant rate. Deterministic (D/M/c in queueing
	// terms).
	Uniform Arrivals = "uniform"
	// Poisson draws independent exponential gaps at the Shape's rate at
	// each moment (ramps and steps included): the arrivals of many
	// independent clients, as M/M/c theory and many load tools model them.
	Poisson Arrivals = "poisson"
)

// MaxSeed is the largest Seed: 2^53 − 1, so that the seed a report records
// reads back exactly in any JSON reader.
const MaxSeed = 1<<53 - 1

// End says how a step ended.
type End string

const (
	EndDone        End = ""
	EndInterrupted End = "interrupted"
	EndAborted     End = "aborted"
)

// ErrConfig reports a Config that cannot run.
var ErrConfig = errors.New("load: bad config")

func (c *Config) withDefaults() (Config, error) {
	d := *c
	if len(d.Targets) == 0 {
		return d, fmt.Errorf("%w: no targets", ErrConfig)
	}
	for i := range d.Targets {
		t, err := CheckTarget(d.Targets[i])
		if err != nil {
			return d, err
		}
		d.Targets[i] = t
	}
	if d.Pick == "" {
		d.Pick = RoundRobin
	}
	if d.Pick != RoundRobin && d.Pick != Weighted {
		return d, configErr("Pick", strconv.Quote(string(d.Pick)), "is not a way to pick: want round-robin or weighted")
	}
	for _, f := range []struct {
		field    string
		negative bool
		value    string
	}{
		{"Concurrency", d.Concurrency < 0, fmtInt(d.Concurrency)}, {"Workers", d.Workers < 0, fmtInt(d.Workers)},
		{"QueueDepth", d.QueueDepth < 0, fmtInt(d.QueueDepth)}, {"Windows", d.Windows < 0, fmtInt(d.Windows)},
		{"Duration", d.Duration < 0, fmtDur(d.Duration)}, {"P99Budget", d.P99Budget < 0, fmtDur(d.P99Budget)},
		{"MaxLag", d.MaxLag < 0, fmtDur(d.MaxLag)}, {"MaxCPU", !(d.MaxCPU >= 0) || math.IsInf(d.MaxCPU, 0), fmtRate(d.MaxCPU)},
		{"Timeout", d.Timeout < 0, fmtDur(d.Timeout)}, {"DrainTimeout", d.DrainTimeout < 0, fmtDur(d.DrainTimeout)},
	} {
		if f.negative {
			return d, configErr(f.field, f.value, "must not be negative")
		}
	}
	if d.Concurrency == 0 && d.Shape.Count() == 0 {
		return d, configErr("Shape", "", "is empty: give a rate (an open loop's Shape) or a Concurrency")
	}
	switch d.Arrivals {
	case "":
		if d.Concurrency == 0 {
			d.Arrivals = Uniform
		}
	case Uniform, Poisson:
		if d.Concurrency > 0 {
			return d, configErr("Arrivals", string(d.Arrivals), "applies to an open loop: a closed loop has no arrival process (each worker sends after its last answer)")
		}
	default:
		return d, configErr("Arrivals", strconv.Quote(string(d.Arrivals)), "is not an arrival process: want uniform or poisson")
	}
	if d.Seed > MaxSeed {
		return d, configErr("Seed", strconv.FormatUint(d.Seed, 10), overBound(uint64(MaxSeed)))
	}
	if err := d.checkBounds(); err != nil {
		return d, err
	}
	if d.Windows == 0 {
		d.Windows = 1
	}
	if d.Duration == 0 {
		d.Duration = 10 * time.Second
	}
	if d.Concurrency == 0 {
		d.Duration = d.Shape.Duration()
	}
	if d.Workers == 0 {
		d.Workers = 64
	}
	if d.Concurrency > 0 {
		d.Workers = d.Concurrency
	}
	if d.P99Budget == 0 {
		d.P99Budget = 500 * time.Millisecond
	}
	if d.MaxCPU == 0 {
		d.MaxCPU = 0.95
	}
	if d.MaxLag == 0 {
		d.MaxLag = 10 * time.Millisecond
	}
	if d.Timeout == 0 {
		d.Timeout = 10 * time.Second
	}
	if d.DrainTimeout == 0 {
		d.DrainTimeout = d.Timeout + 5*time.Second
	}
	if d.Concurrency == 0 && d.QueueDepth == 0 {
		d.QueueDepth = DefaultQueueDepth(d.Workers, d.Shape.MeanRate(), d.P99Budget)
		if d.QueueDepth > MaxQueueDepth {
			return d, configErr("QueueDepth", "", fmt.Sprintf("by default is rate × p99 budget = %d, over the bound: at most %d; set it, or a smaller p99 budget", d.QueueDepth, MaxQueueDepth))
		}
	}
	return d, nil
}

// Check validates c as Run and RunStep would, without running anything:
// nil, or a *FieldError naming the first setting refused (a size past its
// bound in limits.go, a negative figure, an unknown choice, no load at
// all), wrapping ErrConfig. Targets are checked as CheckTarget checks them.
func (c *Config) Check() error {
	_, err := c.withDefaults()
	return err
}

// checkBounds refuses sizes past the limits in limits.go, before anything
// is allocated for them.
func (d *Config) checkBounds() error {
	switch {
	case d.Concurrency > MaxWorkers:
		return configErr("Concurrency", fmtInt(d.Concurrency), overBound(MaxWorkers))
	case d.Workers > MaxWorkers:
		return configErr("Workers", fmtInt(d.Workers), overBound(MaxWorkers))
	case d.QueueDepth > MaxQueueDepth:
		return configErr("QueueDepth", fmtInt(d.QueueDepth), overBound(MaxQueueDepth))
	case d.P99Budget > MaxP99Budget:
		return configErr("P99Budget", fmtDur(d.P99Budget), overBound(MaxP99Budget))
	case d.Windows > MaxWindows:
		return configErr("Windows", fmtInt(d.Windows), overBound(MaxWindows))
	case d.Duration > MaxWindowDuration:
		return configErr("Duration", fmtDur(d.Duration), overBound(MaxWindowDuration))
	case d.Shape.Duration() > MaxWindowDuration:
		return configErr("Shape", fmtDur(d.Shape.Duration()), overBound(MaxWindowDuration))
	}
	dur := max(d.Duration, d.Shape.Duration())
	if d.Concurrency > 0 && d.Duration == 0 {
		dur = 10 * time.Second
	}
	if n := time.Duration(max(d.Windows, 1)); dur > MaxRunDuration/n {
		return configErr("Windows×Duration", fmt.Sprintf("%d × %v", n, dur), overBound(MaxRunDuration))
	}
	for _, t := range d.Targets {
		if len(t.Body) > MaxBodyBytes {
			return configErr("Body", fmtInt(len(t.Body)), overBound(MaxBodyBytes))
		}
	}
	return nil
}

// DefaultQueueDepth is max(workers, rate × p99 budget): the arrivals that can
// wait without, by Little's law, pushing the wait past the budget.
func DefaultQueueDepth(workers int, rate float64, budget time.Duration) int {
	n := int(rate * budget.Seconds())
	return max(workers, n)
}

func (c Config) transport() (http.RoundTripper, func()) {
	if c.Transport != nil {
		return c.Transport, func() {}
	}
	d := &net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   c.Workers,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   c.Timeout,
		ResponseHeaderTimeout: c.Timeout,
		DisableKeepAlives:     c.DisableKeepAlives,
		DisableCompression:    true,
	}
	if c.Insecure {
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // asked for with --insecure

	}
	if c.HTTP2 {
		p := new(http.Protocols)
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		t.Protocols = p
		t.ForceAttemptHTTP2 = true
	}
	return t, t.CloseIdleConnections
}

func (c Config) stepHeader() Step {
	st := Step{Workers: c.Workers, Label: c.Label}
	if c.Concurrency > 0 {
		st.Mode = "closed"
		st.Concurrency = c.Concurrency
		if st.Label == "" {
			st.Label = "c=" + strconv.Itoa(c.Concurrency)
		}
	} else {
		st.Mode = "open"
		st.QueueDepth = c.QueueDepth
		st.Arrivals = c.Arrivals
		if c.Arrivals == Poisson {
			st.Seed = c.Seed
		}
		segs := c.Shape.segs
		st.Rate = segs[0].From
		if len(segs) == 1 && segs[0].To != segs[0].From {
			st.RampTo = segs[0].To
		}
		if len(segs) > 1 {
			for _, g := range segs {
				st.StepRates = append(st.StepRates, g.From)
			}
		}
		if st.Label == "" {
			st.Label = "rate=" + strconv.FormatFloat(st.Rate, 'f', -1, 64)
			if st.RampTo > 0 {
				st.Label += ".." + strconv.FormatFloat(st.RampTo, 'f', -1, 64)
			}
			if len(st.StepRates) > 0 {
				rs := make([]string, len(st.StepRates))
				for i, r := range st.StepRates {
					rs[i] = strconv.FormatFloat(r, 'f', -1, 64)
				}
				st.Label = "steps=" + strings.Join(rs, ",")
			}
		}
	}
	s := Settings{
		Pick: string(c.Pick), HTTP2: c.HTTP2, KeepAlive: !c.DisableKeepAlives,
		DurationS: c.Duration.Seconds(), Windows: c.Windows, TimeoutS: c.Timeout.Seconds(),
		DrainTimeoutS: c.DrainTimeout.Seconds(), P99BudgetMS: float64(c.P99Budget) / 1e6,
		MaxLagMS: float64(c.MaxLag) / 1e6, MaxCPU: c.MaxCPU, MetricsURL: c.MetricsURL,
	}
	for _, t := range c.Targets {
		ti := TargetInfo{Method: t.Method, URL: t.URL, Headers: t.Header, BodyBytes: len(t.Body), Weight: t.Weight}
		if len(t.Body) > 0 {
			sum := sha256.Sum256(t.Body)
			ti.BodySHA256 = hex.EncodeToString(sum[:])
		}
		s.Targets = append(s.Targets, ti)
	}
	st.Settings = s
	return st
}
