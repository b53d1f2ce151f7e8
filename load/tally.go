package load

import (
	"sync"
	"time"
)

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
