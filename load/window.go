package load

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"time"
)

func (e *engine) afterWindow(ctx context.Context, w *winRec, before *scrape) Window {
	elapsed := time.Since(e.base) - w.start
	cpu := processCPU() - w.cpu0
	var after *scrape
	if e.scraper != nil {
		// Scrape even when interrupted: the report should say what the
		// server saw up to now.
		after = e.scraper.scrape(context.WithoutCancel(ctx))
	}
	win := w.summarize()
	win.ElapsedS = elapsed.Seconds()
	win.Driver.CPUSeconds = cpu.Seconds()
	if s := elapsed.Seconds() * float64(runtime.GOMAXPROCS(0)); s > 0 {
		win.Driver.CPUUtilization = cpu.Seconds() / s
	}
	if e.scraper != nil {
		win.Metrics = attribute(e.scraper.url, before, after, win.Counts, elapsed.Seconds())
	}
	win.Driver.Reasons = driverLimits(win, float64(e.cfg.P99Budget)/1e6, float64(e.cfg.MaxLag)/1e6, e.cfg.MaxCPU)
	win.Driver.Limited = len(win.Driver.Reasons) > 0
	e.log().Debug("window done", "step", e.step, "window", w.index, "scheduled", win.Counts.Scheduled,
		"ok", win.Counts.OK, "refused", win.Counts.Refused, "dropped", win.Counts.Dropped,
		"response_p99_ms", win.Latency.ResponseTime.P99, "driver_limited", win.Driver.Limited)
	return win
}

// summarize folds the stripes into a report window. It runs after every
// worker has finished with the window.
func (w *winRec) summarize() Window {
	win := Window{Index: w.index, Started: w.started, DurationS: w.dur.Seconds()}
	hs := newHistSet(true)
	c := Counts{
		DropReasons: map[string]int64{}, TransportErrors: map[string]int64{},
		Status: map[string]int64{}, Refusals: []Refusal{},
	}
	refusals := map[refusalKey]int64{}
	win.Timeline = make([]Second, len(w.pace.timeline))
	all := append([]*stripe{w.pace}, w.stripes...)
	phases := make([]phaseTally, len(w.phases))
	for i := range phases {
		phases[i].resp, phases[i].okResp = newPhaseHist(), newPhaseHist()
	}
	for _, s := range all {
		s.mu.Lock()
		mergeSet(&hs, &s.h)
		c.Scheduled += s.c.Scheduled
		c.Sent += s.c.Sent
		c.Dropped += s.c.Dropped
		c.OK += s.c.OK
		c.Refused += s.c.Refused
		c.HTTPError += s.c.HTTPError
		c.TransportError += s.c.TransportError
		c.Unfinished += s.c.Unfinished
		for k, v := range s.c.DropReasons {
			c.DropReasons[k] += v
		}
		for k, v := range s.terr {
			c.TransportErrors[k] += v
		}
		for code, n := range s.status {
			if n == 0 {
				continue
			}
			key := strconv.Itoa(code)
			if code == 0 {
				key = "other"
			}
			c.Status[key] += n
		}
		for k, v := range s.refusals {
			refusals[k] += v
		}
		for i, sec := range s.timeline {
			t := &win.Timeline[i]
			t.Scheduled += sec.Scheduled
			t.Dropped += sec.Dropped
			t.OK += sec.OK
			t.Refused += sec.Refused
			t.Errors += sec.Errors
		}
		for i := range s.phases {
			addPhaseCounts(&phases[i].c, s.phases[i].c)
			if s.phases[i].resp != nil {
				phases[i].resp.Merge(s.phases[i].resp)
				phases[i].okResp.Merge(s.phases[i].okResp)
			}
		}
		s.mu.Unlock()
	}
	w.lat.fill(win.Timeline)
	for i := range win.Timeline {
		if i < len(w.lagSec) {
			win.Timeline[i].LagP99 = w.lagSec[i]
		}
	}
	for i, p := range w.phases {
		t := phases[i]
		secs := (p.end - p.start).Seconds()
		win.Phases = append(win.Phases, Phase{
			StartS: p.start.Seconds(), EndS: p.end.Seconds(), RateFrom: p.from, RateTo: p.to,
			Counts: t.c, Rates: ratesOf(Counts{Scheduled: t.c.Scheduled, Sent: t.c.Sent, OK: t.c.OK}, secs),
			ResponseTime: distOf(t.resp), OKResponseTime: distOf(t.okResp),
		})
	}
	for k, v := range refusals {
		c.Refusals = append(c.Refusals, Refusal{Status: k.status, Gate: k.gate, Reason: k.reason, Count: v})
	}
	sortRefusals(c.Refusals)
	// Trim the timeline's spare trailing second when nothing was scheduled in it.
	if n := len(win.Timeline); n > 1 && win.Timeline[n-1] == (Second{}) {
		win.Timeline = win.Timeline[:n-1]
	}
	win.Counts = c
	win.Latency = Latency{
		ScheduleWait: distOf(hs.wait), RequestTime: distOf(hs.req), ResponseTime: distOf(hs.resp),
		FirstByte: distOf(hs.fb), OKResponseTime: distOf(hs.okResp),
	}
	win.Driver.ScheduleLag = distOf(hs.lag)
	win.Rates = ratesOf(c, win.DurationS)
	win.Driver.Reasons = []string{}
	return win
}

func mergeSet(dst, src *histSet) {
	dst.wait.Merge(src.wait)
	dst.req.Merge(src.req)
	dst.resp.Merge(src.resp)
	dst.okResp.Merge(src.okResp)
	dst.fb.Merge(src.fb)
	if src.lag != nil {
		dst.lag.Merge(src.lag)
	}
}

func ratesOf(c Counts, secs float64) Rates {
	if secs <= 0 {
		return Rates{}
	}
	return Rates{
		Offered: float64(c.Scheduled) / secs,
		Sent:    float64(c.Sent) / secs,
		OK:      float64(c.OK) / secs,
	}
}

func sortRefusals(rs []Refusal) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Gate != b.Gate {
			return a.Gate < b.Gate
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Status < b.Status
	})
}

// driverLimits lists why a window's failures would be the driver's own
// doing, not the server's; empty means the driver kept up:
//   - its schedule lag p99 exceeded maxLagMS (the pacer, which never waits on
//     responses, could not keep the timetable);
//   - its CPU use reached maxCPU of GOMAXPROCS (saturated; 0 means 0.95);
//   - it dropped arrivals (queue full) although the server answered within
//     the p99 budget (request time p99 <= budgetMS): the pool was too small
//     for the rate, which Little's law would have predicted.
//
// Drops while the server itself was slow are the server's: they are not
// listed here.
func driverLimits(w Window, budgetMS, maxLagMS, maxCPU float64) []string {
	if maxCPU == 0 {
		maxCPU = 0.95
	}
	r := []string{}
	if lag := w.Driver.ScheduleLag; lag.Count > 0 && maxLagMS > 0 && lag.P99 > maxLagMS {
		r = append(r, fmt.Sprintf("schedule lag p99 %.2f ms > %.2f ms", lag.P99, maxLagMS))
	}
	if w.Driver.CPUUtilization >= maxCPU {
		r = append(r, fmt.Sprintf("driver CPU saturated (%.0f%% of GOMAXPROCS)", 100*w.Driver.CPUUtilization))
	}
	if d := w.Counts.DropReasons[DropQueueFull]; d > 0 && budgetMS > 0 && w.Latency.RequestTime.P99 <= budgetMS {
		r = append(r, fmt.Sprintf("%d drops while request time p99 %.2f ms was within the %.0f ms budget: too few workers", d, w.Latency.RequestTime.P99, budgetMS))
	}
	return r
}

// live reports progress once a second until done closes.
func (e *engine) live(done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastSent int64
	var lastWin *winRec
	scratch := newHist()
	last := time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			w := e.cur.Load()
			if w == nil {
				continue
			}
			if w != lastWin {
				lastWin, lastSent = w, 0
			}
			p := Progress{Step: e.step, Window: w.index, Elapsed: time.Since(e.base) - w.start}
			scratch.Reset()
			for _, s := range append([]*stripe{w.pace}, w.stripes...) {
				s.mu.Lock()
				p.Sent += s.c.Sent
				p.OK += s.c.OK
				p.Refused += s.c.Refused
				p.Dropped += s.c.Dropped
				p.Errors += s.c.HTTPError + s.c.TransportError + s.c.Unfinished
				scratch.Merge(s.h.resp)
				s.mu.Unlock()
			}
			if dt := now.Sub(last).Seconds(); dt > 0 {
				p.Rate = float64(p.Sent-lastSent) / dt
			}
			p.P99 = time.Duration(scratch.ValueAtQuantile(99)) * time.Microsecond
			lastSent, last = p.Sent, now
			e.cfg.Live(p)
		}
	}
}

func addPhaseCounts(dst *PhaseCounts, src PhaseCounts) {
	dst.Scheduled += src.Scheduled
	dst.Sent += src.Sent
	dst.Dropped += src.Dropped
	dst.OK += src.OK
	dst.Refused += src.Refused
	dst.Errors += src.Errors
}
