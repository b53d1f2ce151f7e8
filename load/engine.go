package load

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

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
	rng     *rand.Rand // Poisson arrivals; nil for uniform ones
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
	if c.Arrivals == Poisson {
		if e.cfg.Seed == 0 {
			e.cfg.Seed = rand.Uint64()&MaxSeed | 1
		}
		e.rng = newArrivalSource(e.cfg.Seed)
	}
	c = e.cfg
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
