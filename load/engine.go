package load

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
		return d, fmt.Errorf("%w: pick %q (want round-robin or weighted)", ErrConfig, d.Pick)
	}
	if d.Concurrency < 0 || d.Workers < 0 || d.QueueDepth < 0 || d.Windows < 0 ||
		d.Duration < 0 || d.P99Budget < 0 || d.MaxLag < 0 || d.MaxCPU < 0 || d.Timeout < 0 || d.DrainTimeout < 0 {
		return d, fmt.Errorf("%w: negative setting", ErrConfig)
	}
	if d.Concurrency == 0 && d.Shape.Count() == 0 {
		return d, fmt.Errorf("%w: neither a rate nor a concurrency", ErrConfig)
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
			return d, fmt.Errorf("%w: default queue depth rate × p99 budget = %d is over the bound; it is at most %d (set QueueDepth or a smaller P99Budget)", ErrConfig, d.QueueDepth, MaxQueueDepth)
		}
	}
	return d, nil
}

// checkBounds refuses sizes past the limits in limits.go, before anything
// is allocated for them.
func (d *Config) checkBounds() error {
	over := func(what string, got, max any) error {
		return fmt.Errorf("%w: %s %v is over the bound: at most %v", ErrConfig, what, got, max)
	}
	switch {
	case d.Concurrency > MaxWorkers:
		return over("concurrency", d.Concurrency, MaxWorkers)
	case d.Workers > MaxWorkers:
		return over("workers", d.Workers, MaxWorkers)
	case d.QueueDepth > MaxQueueDepth:
		return over("queue depth", d.QueueDepth, MaxQueueDepth)
	case d.P99Budget > MaxP99Budget:
		return over("p99 budget", d.P99Budget, MaxP99Budget)
	case d.Windows > MaxWindows:
		return over("windows", d.Windows, MaxWindows)
	case d.Duration > MaxWindowDuration:
		return over("duration", d.Duration, MaxWindowDuration)
	case d.Shape.Duration() > MaxWindowDuration:
		return over("shape duration", d.Shape.Duration(), MaxWindowDuration)
	}
	dur := max(d.Duration, d.Shape.Duration())
	if d.Concurrency > 0 && d.Duration == 0 {
		dur = 10 * time.Second
	}
	if total := dur * time.Duration(max(d.Windows, 1)); total > MaxRunDuration {
		return over("windows × duration", total, MaxRunDuration)
	}
	for _, t := range d.Targets {
		if len(t.Body) > MaxBodyBytes {
			return over("body bytes", len(t.Body), MaxBodyBytes)
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

// arrival is one scheduled request on its way to a worker.
type arrival struct {
	sched  time.Duration // since the run's base time
	win    *winRec
	target int
	phase  int // index into win's phases (0 when it has none)
}

type refusalKey struct {
	status       int
	gate, reason string
}

// stripe is a lock-protected share of a window's tallies; workers spread
// over stripes so they rarely contend.
type stripe struct {
	mu       sync.Mutex
	h        histSet
	c        Counts // scalar fields only; maps live below
	status   [600]int64
	terr     map[string]int64
	refusals map[refusalKey]int64
	timeline []Second
	phases   []phaseTally
	_        [64]byte
}

// phaseTally is a stripe's share of one phase row.
type phaseTally struct {
	c            PhaseCounts
	resp, okResp *hdrHist // nil in the pacer's stripe
}

// add counts an outcome class in the phase's row.
func (t *phaseTally) add(class int) {
	t.c.Sent++
	switch class {
	case classOK:
		t.c.OK++
	case classRefused:
		t.c.Refused++
	default:
		t.c.Errors++
	}
}

type histSet struct{ wait, req, resp, okResp, fb, lag *hdrHist }

func newHistSet(withLag bool) histSet {
	s := histSet{wait: newHist(), req: newHist(), resp: newHist(), okResp: newHist(), fb: newHist()}
	if withLag {
		s.lag = newHist()
	}
	return s
}

// winRec accumulates one window while it runs.
type winRec struct {
	index   int
	start   time.Duration // since base
	started time.Time
	dur     time.Duration
	stripes []*stripe
	pace    *stripe // the pacer's share: scheduled, drops, lag
	wg      sync.WaitGroup
	cpu0    time.Duration // driver CPU when the window started
	phases  []phase       // the rows of a stepped or ramped window
	lat     *secLatency   // per-second response-time histograms
	lagSec  []float64     // per-second schedule-lag p99 (ms), written by the pacer
	lagCur  lagSecond     // the pacer's current second
}

func newWinRec(index, nstripes int, dur time.Duration, phases []phase) *winRec {
	secs := int((dur+time.Second-1)/time.Second) + 1
	w := &winRec{index: index, dur: dur, phases: phases, lat: newSecLatency(secs), lagSec: make([]float64, secs)}
	mk := func(lag bool) *stripe {
		s := &stripe{
			h: newHistSet(lag), terr: map[string]int64{}, refusals: map[refusalKey]int64{},
			timeline: make([]Second, secs), phases: make([]phaseTally, len(phases)),
		}
		if !lag {
			for i := range s.phases {
				s.phases[i].resp, s.phases[i].okResp = newPhaseHist(), newPhaseHist()
			}
		}
		return s
	}
	for range nstripes {
		w.stripes = append(w.stripes, mk(false))
	}
	w.pace = mk(true)
	w.pace.c.DropReasons = map[string]int64{}
	return w
}

func (w *winRec) sec(sched time.Duration) int {
	i := int((sched - w.start) / time.Second)
	tl := len(w.pace.timeline)
	if i < 0 {
		return 0
	}
	if i >= tl {
		return tl - 1
	}
	return i
}

// engine runs one step.
type engine struct {
	cfg     Config
	base    time.Time
	h1      *h1        // nil: requests go through rt (net/http)
	h1t     []h1Target // the targets serialised for h1
	h1hosts int
	rt      http.RoundTripper
	closeRT func()
	scraper *scraper
	step    int
	cur     atomic.Pointer[winRec]
}

// RunStep drives one step of load and returns what it measured. It returns
// an error only for a Config that cannot run; an interrupted (ctx canceled)
// or aborted step returns the windows measured so far and says so in End.
func RunStep(ctx context.Context, cfg Config) (Step, End, error) {
	return runStep(ctx, cfg, 0)
}

func runStep(ctx context.Context, cfg Config, stepIndex int) (Step, End, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return Step{}, EndDone, err
	}
	e := &engine{cfg: c, base: time.Now(), step: stepIndex}
	e.rt, e.closeRT = c.transport()
	defer e.closeRT()
	if h1Eligible(c) {
		if e.h1t, e.h1hosts, err = h1Targets(c); err != nil {
			return Step{}, EndDone, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		e.h1 = &h1{timeout: c.Timeout, dialer: net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second}, keepAlive: !c.DisableKeepAlives}
	}
	if c.MetricsURL != "" {
		e.scraper = newScraper(c.MetricsURL, c.Timeout)
	}
	st := c.stepHeader()

	stepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	liveDone := make(chan struct{})
	var liveWG sync.WaitGroup
	if c.Live != nil {
		liveWG.Add(1)
		go func() { defer liveWG.Done(); e.live(liveDone) }()
	}
	defer func() { close(liveDone); liveWG.Wait() }()

	nstripes := min(max(runtime.GOMAXPROCS(0), 1), 8, c.Workers)
	workers := make([]*worker, c.Workers)
	for i := range workers {
		workers[i] = e.newWorker(stepCtx, i)
	}
	if e.h1 != nil {
		// A canceled run must not wait out request timeouts: unblock
		// every connection's reads and writes.
		stop := context.AfterFunc(stepCtx, func() {
			for _, wk := range workers {
				wk.h1.interrupt()
			}
		})
		defer func() {
			stop()
			for _, wk := range workers {
				wk.h1.closeAll()
			}
		}()
	}

	end := EndDone
	if c.Concurrency > 0 {
		for wi := 0; wi < c.Windows && end == EndDone; wi++ {
			w := newWinRec(wi, nstripes, c.Duration, nil)
			before := e.beforeWindow(stepCtx, w)
			var wg sync.WaitGroup
			for _, wk := range workers {
				wg.Add(1)
				go func() { defer wg.Done(); wk.closedLoop(w, nstripes) }()
			}
			end = e.drain(ctx, wg.Wait, c.Duration+c.DrainTimeout, cancel, wi, end)
			st.Windows = append(st.Windows, e.afterWindow(stepCtx, w, before))
		}
		return st, end, nil
	}

	q := make(chan arrival, c.QueueDepth)
	var pool sync.WaitGroup
	for _, wk := range workers {
		pool.Add(1)
		go func() { defer pool.Done(); wk.openLoop(q, nstripes) }()
	}
	pk := newPicker(c.Pick, c.Targets, 0)
	phases := c.Shape.phases()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for wi := 0; wi < c.Windows && end == EndDone; wi++ {
		w := newWinRec(wi, nstripes, c.Duration, phases)
		before := e.beforeWindow(stepCtx, w)
		e.pace(stepCtx, w, q, pk, timer)
		if ctx.Err() != nil {
			end = EndInterrupted
			cancel()
		}
		end = e.drain(ctx, w.wg.Wait, c.DrainTimeout, cancel, wi, end)
		st.Windows = append(st.Windows, e.afterWindow(stepCtx, w, before))
	}
	close(q)
	pool.Wait()
	return st, end, nil
}

// drain waits for a window's last requests (wait returns when they are
// done) for at most limit. Past it the step is aborted: cancel stops what is
// in flight, and drain still waits for the workers to let go, so the window
// is summarised only when nothing touches it. It returns how the step ends:
// end as it was, EndAborted, or EndInterrupted when ctx (the caller's) ended.
func (e *engine) drain(ctx context.Context, wait func(), limit time.Duration, cancel func(), window int, end End) End {
	drained := make(chan struct{})
	go func() { wait(); close(drained) }()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		e.log().Warn("window did not drain; aborting", "step", e.step, "window", window, "drain_timeout", e.cfg.DrainTimeout)
		end = EndAborted
		cancel()
		<-drained
	}
	if ctx.Err() != nil {
		end = EndInterrupted
	}
	return end
}

// sleepUntil waits until due (an offset from base) or ctx ends; it reports
// whether due was reached. How it sleeps depends on how far off due is when
// the wait begins, which is the gap between arrivals:
//
//   - a sparse timetable (due at least fineSleep away, rates below 500/s):
//     a Go timer for all but the last fineSleep, then a nanosleep on the
//     pacer's thread, since Go timers below a millisecond wake up to a
//     millisecond late on Linux (the netpoller sleeps in whole
//     milliseconds). Precise, and a few hundred wake-ups a second are cheap.
//   - a dense timetable (due sooner): a Go timer alone. A blocking
//     nanosleep per arrival keeps the runtime's monitor thread busy taking
//     the pacer's P away and handing it back: at 1,000 req/s it made five
//     nanosleeps and three futex calls per request, at 5,000 req/s it cost
//     more CPU than the requests themselves (54 against 34 µs each). A timer
//     parks the pacer, fires at the next scheduling point of a busy process
//     (or within a millisecond of an idle one), and every arrival due by
//     then leaves in one batch. The lag this adds (about 0.4 ms at the
//     median) is measured, like all lag, in the schedule-lag histogram and
//     counted in response time.
func (e *engine) sleepUntil(ctx context.Context, due time.Duration, timer *time.Timer) bool {
	sparse := due-time.Since(e.base) >= fineSleep
	for {
		d := due - time.Since(e.base)
		if d <= 0 {
			return ctx.Err() == nil
		}
		if sparse && !e.cfg.coarseSleep {
			if d < fineSleep {
				preciseSleep(d)
				continue
			}
			d -= fineSleep
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

// pace schedules one window's arrivals on the timetable, whatever the
// workers are doing. Arrivals due together go out together; each keeps its
// own scheduled time.
func (e *engine) pace(ctx context.Context, w *winRec, q chan<- arrival, pk *picker, timer *time.Timer) {
	shape := e.cfg.Shape
	n := shape.Count()
	p := w.pace
	ph := 0
	w.lagCur.sec = 0
	defer w.lagCur.flush(w.lagSec)
	for i := int64(0); i < n; i++ {
		off := shape.At(i)
		for ph < len(w.phases)-1 && off >= w.phases[ph].end {
			ph++
		}
		due := w.start + off
		now := time.Since(e.base)
		if d := due - now; d > 0 {
			if !e.sleepUntil(ctx, due, timer) {
				return
			}
			now = time.Since(e.base)
		} else if i&255 == 0 && ctx.Err() != nil {
			return
		}
		a := arrival{sched: due, win: w, target: pk.pick(), phase: ph}
		w.wg.Add(1)
		queued := true
		select {
		case q <- a:
		default:
			queued = false
			w.wg.Done()
		}
		sec := w.sec(due)
		w.lagCur.record(sec, now-due, w.lagSec)
		p.mu.Lock()
		record(p.h.lag, now-due)
		p.c.Scheduled++
		p.timeline[sec].Scheduled++
		if len(p.phases) > 0 {
			p.phases[ph].c.Scheduled++
		}
		if !queued {
			p.c.Dropped++
			p.timeline[sec].Dropped++
			p.c.DropReasons[DropQueueFull]++
			if len(p.phases) > 0 {
				p.phases[ph].c.Dropped++
			}
		}
		p.mu.Unlock()
	}
	// The window lasts its full duration even when the last arrival is due
	// before the end.
	if d := w.start + w.dur - time.Since(e.base); d > 0 {
		timer.Reset(d)
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
	}
}

// log is the configured logger, or one that discards.
func (e *engine) log() *slog.Logger {
	if e.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.cfg.Logger
}

func (e *engine) beforeWindow(ctx context.Context, w *winRec) *scrape {
	var s *scrape
	if e.scraper != nil {
		s = e.scraper.scrape(ctx)
	}
	w.started = time.Now()
	w.start = time.Since(e.base)
	w.cpu0 = processCPU()
	e.cur.Store(w)
	return s
}

// worker sends requests one at a time. It owns prepared requests (one per
// target) and a body buffer, so the steady state allocates only inside
// net/http.
type worker struct {
	e        *engine
	id       int
	ctx      context.Context
	reqs     []*http.Request
	bodies   [][]byte
	buf      []byte
	first    atomic.Int64 // first response byte, ns since base
	lastBody []byte       // last refusal body and its parse, to skip re-parsing
	lastEnv  Envelope
	lastOK   bool
	h1       *h1Worker
}

func (e *engine) newWorker(ctx context.Context, id int) *worker {
	wk := &worker{e: e, id: id, buf: make([]byte, 4096)}
	if e.h1 != nil {
		wk.h1 = e.h1.newWorker(e.h1hosts)
	}
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() {
		wk.first.Store(int64(time.Since(e.base)))
	}}
	wk.ctx = httptrace.WithClientTrace(ctx, trace)
	if e.h1 != nil {
		return wk // requests are serialised once, in e.h1t
	}
	for _, t := range e.cfg.Targets {
		req, err := http.NewRequestWithContext(wk.ctx, t.Method, t.URL, nil)
		if err != nil { // CheckTarget accepted it, so this cannot happen
			panic(err)
		}
		for k, vs := range t.Header {
			for _, v := range vs {
				if http.CanonicalHeaderKey(k) == "Host" {
					req.Host = v
					continue
				}
				req.Header.Add(k, v)
			}
		}
		if len(t.Body) > 0 {
			body := t.Body
			req.ContentLength = int64(len(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		wk.reqs = append(wk.reqs, req)
		wk.bodies = append(wk.bodies, t.Body)
	}
	return wk
}

func (wk *worker) openLoop(q <-chan arrival, nstripes int) {
	s := wk.id % nstripes
	for a := range q {
		if wk.ctx.Err() != nil {
			p := a.win.pace
			sec := a.win.sec(a.sched)
			p.mu.Lock()
			p.c.Dropped++
			p.c.DropReasons[DropCanceled]++
			p.timeline[sec].Dropped++
			if len(p.phases) > 0 {
				p.phases[a.phase].c.Dropped++
			}
			p.mu.Unlock()
			a.win.wg.Done()
			continue
		}
		wk.do(a, a.win.stripes[s])
		a.win.wg.Done()
	}
}

func (wk *worker) closedLoop(w *winRec, nstripes int) {
	st := w.stripes[wk.id%nstripes]
	pk := newPicker(wk.e.cfg.Pick, wk.e.cfg.Targets, wk.id)
	end := w.start + w.dur
	for {
		now := time.Since(wk.e.base)
		if now >= end || wk.ctx.Err() != nil {
			return
		}
		sec := w.sec(now)
		st.mu.Lock()
		st.c.Scheduled++
		st.timeline[sec].Scheduled++
		st.mu.Unlock()
		wk.do(arrival{sched: now, win: w, target: pk.pick()}, st)
	}
}

// outcome classes, in the order Counts lists them.
const (
	classOK = iota
	classRefused
	classHTTPError
	classTransport
	classUnfinished
)

// exchange sends one request and reads the answer, keeping the first
// len(wk.buf) body bytes in wk.buf.
func (wk *worker) exchange(target int) (status, n int, first time.Duration, err error) {
	e := wk.e
	if wk.h1 != nil {
		r, err := wk.h1.do(&e.h1t[target], wk.buf, e.base, wk.canceled)
		return r.status, r.n, r.first, err
	}
	req := wk.reqs[target]
	if b := wk.bodies[target]; len(b) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	wk.first.Store(0)
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return 0, 0, 0, err
	}
	n, err = io.ReadFull(resp.Body, wk.buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	} else if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	return resp.StatusCode, n, time.Duration(wk.first.Load()), err
}

func (wk *worker) canceled() bool { return wk.ctx.Err() != nil }

func (wk *worker) do(a arrival, st *stripe) {
	e := wk.e
	sent := time.Since(e.base)
	status, n, first, err := wk.exchange(a.target)
	var (
		class  = classOK
		kind   string
		env    Envelope
		hasEnv bool
	)
	if err == nil {
		switch {
		case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			class = classRefused
			env, hasEnv = wk.envelope(wk.buf[:n])
		case status >= 400:
			class = classHTTPError
		}
	}
	done := time.Since(e.base)
	if err != nil {
		if wk.ctx.Err() != nil {
			class = classUnfinished
		} else {
			class = classTransport
			kind = errorKind(err)
		}
	}
	if first == 0 || first < sent {
		first = done
	}
	sec := a.win.sec(a.sched)
	st.mu.Lock()
	st.c.Sent++
	tl := &st.timeline[sec]
	switch class {
	case classOK:
		st.c.OK++
		tl.OK++
	case classRefused:
		st.c.Refused++
		tl.Refused++
		k := refusalKey{status: status}
		if hasEnv {
			k.gate, k.reason = env.Gate, env.Reason
		}
		st.refusals[k]++
	case classHTTPError:
		st.c.HTTPError++
		tl.Errors++
	case classTransport:
		st.c.TransportError++
		tl.Errors++
		st.terr[kind]++
	case classUnfinished:
		st.c.Unfinished++
		tl.Errors++
	}
	if class <= classHTTPError {
		if status >= 100 && status < 600 {
			st.status[status]++
		} else {
			st.status[0]++
		}
		record(st.h.wait, sent-a.sched)
		record(st.h.req, done-sent)
		record(st.h.resp, done-a.sched)
		record(st.h.fb, first-sent)
		if class == classOK {
			record(st.h.okResp, done-a.sched)
		}
	}
	if len(st.phases) > 0 {
		pt := &st.phases[a.phase]
		pt.add(class)
		if class <= classHTTPError {
			record(pt.resp, done-a.sched)
			if class == classOK {
				record(pt.okResp, done-a.sched)
			}
		}
	}
	st.mu.Unlock()
	if class <= classHTTPError {
		a.win.lat.record(sec, done-a.sched, class == classOK)
	}
}

// envelope parses a refusal body, reusing the last parse when the body is
// the same (a gate sends the same bytes every time).
func (wk *worker) envelope(body []byte) (Envelope, bool) {
	if wk.lastBody != nil && bytes.Equal(body, wk.lastBody) {
		return wk.lastEnv, wk.lastOK
	}
	env, ok := ParseEnvelope(body)
	wk.lastBody = append(wk.lastBody[:0], body...)
	wk.lastEnv, wk.lastOK = env, ok
	return env, ok
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
