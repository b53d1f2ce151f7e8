package load

import (
	"context"
	"math/rand/v2"
	"time"
)

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
			if d <= fineSleep { // <=: a zero timer would spin until the clock moves
				if e.cfg.fineSleep != nil {
					e.cfg.fineSleep(d)
				} else {
					preciseSleep(d)
				}
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
	tt := e.timetable()
	p := w.pace
	ph := 0
	w.lagCur.sec = 0
	defer w.lagCur.flush(w.lagSec)
	for i := int64(0); ; i++ {
		off, ok := tt.next()
		if !ok {
			break
		}
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

// timetable yields one window's arrival offsets, in order.
//
// Uniform arrivals are the Shape itself: arrival i at At(i). Poisson
// arrivals at the same mean rate come from the time map of a unit-rate
// Poisson process: its points are sums of independent Exp(1) steps, and
// the k-th arrival is due when the integral of the rate reaches the k-th
// point. That is exact for a constant rate, a ramp and steps alike (a
// non-homogeneous Poisson process whose intensity is the shape's rate);
// the window ends at the first point past the shape's total.
type timetable struct {
	shape Shape
	count int64      // uniform: arrivals in the window
	i     int64      // uniform: the next arrival
	rng   *rand.Rand // poisson; nil for uniform
	n     float64    // poisson: the point reached so far
}

// timetable starts a window's timetable; Poisson windows draw from the
// step's one generator in turn, so a step is reproducible from its seed.
func (e *engine) timetable() *timetable {
	if e.rng == nil {
		return &timetable{shape: e.cfg.Shape, count: e.cfg.Shape.Count()}
	}
	return &timetable{shape: e.cfg.Shape, rng: e.rng}
}

func (t *timetable) next() (time.Duration, bool) {
	if t.rng == nil {
		if t.i >= t.count {
			return 0, false
		}
		t.i++
		return t.shape.At(t.i - 1), true
	}
	t.n += t.rng.ExpFloat64()
	if t.n >= t.shape.total {
		return 0, false
	}
	return t.shape.at(t.n), true
}

// newArrivalSource is the generator of a Poisson step, seeded by seed.
func newArrivalSource(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, poissonStream))
}

// poissonStream is the second word of the generator's state: fixed, so
// that the seed alone names the arrival times.
const poissonStream = 0x9e3779b97f4a7c15
