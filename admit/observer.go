package admit

import "time"

// Observer receives one event per admission decision and one per
// completion. A gate without an Observer pays one nil check per event.
//
// Observers are called synchronously on the caller's goroutine, after the
// gate's own bookkeeping: a completion is reported after the slot has been
// released, so an observer's cost never counts as hold time and never
// delays the next admission. Observers must be safe for concurrent use and
// should be cheap (increment a counter, record a histogram sample).
type Observer interface {
	ObserveAdmission(AdmissionEvent)
	ObserveCompletion(CompletionEvent)
}

// GrantObserver is an Observer that needs, of a granted admission, only
// the slots in use right after it (an adaptive limit keeping a window's
// peak does). A gate whose Observer is a GrantObserver calls ObserveGrant
// for every grant instead of ObserveAdmission; refusals and completions
// are reported as usual. It is a matter of cost: an AdmissionEvent is too
// large to pass in registers, and building and copying one is most of
// what an observer costs an admission (a seventh of the whole cost of a
// gate with an adaptive limit; docs/bench/admission.md has the figures).
// Observers() of several observers is not a GrantObserver: each of them
// sees every event.
type GrantObserver interface {
	Observer
	ObserveGrant(inflight int64)
}

// AdmissionEvent describes one decision: a slot granted or a refusal.
type AdmissionEvent struct {
	Gate, Kind string
	Accepted   bool
	Reason     Reason // ReasonNone when Accepted
	Weight     int64  // slots asked for
	// Inflight (slots in use), Capacity and Waiting as the gate saw them
	// right after the decision.
	Inflight, Capacity, Waiting int64
	// Wait is the time spent in the gate's queue; zero for decisions made
	// without queueing.
	Wait time.Duration
}

// CompletionEvent describes the end of admitted work.
type CompletionEvent struct {
	Gate, Kind string
	Outcome    Outcome
	Weight     int64
	// Hold is how long the slot was held; zero when the gate does not
	// measure time (Config.NoTiming).
	Hold time.Duration
}

// Sample reports whether Hold is a meaningful latency sample: false for
// dropped work (which ended before it did what it was admitted for) and
// when the gate does not measure time. Adaptive limits and latency
// histograms should skip events without a sample.
func (e CompletionEvent) Sample() bool { return e.Outcome != OutcomeDropped && e.Hold > 0 }

// Observers fans events out to several observers, in order. Nil entries,
// typed nil pointers included, are skipped; with nothing left it returns
// nil, so the gate pays nothing.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if !isNil(o) {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) ObserveAdmission(e AdmissionEvent) {
	for _, o := range m {
		o.ObserveAdmission(e)
	}
}

func (m multiObserver) ObserveCompletion(e CompletionEvent) {
	for _, o := range m {
		o.ObserveCompletion(e)
	}
}
