package pool

import (
	"time"

	"github.com/sluicehq/sluice/admit"
)

// Observer receives one event per submission decision and one per task
// end, like admit.Observer does for a gate. A pool without an Observer
// pays one nil check per event and reads no clock.
//
// Observers are called synchronously, never with the pool's lock held:
// ObserveSubmit on the submitter's goroutine after the decision,
// ObserveDone on the goroutine that ran or dropped the task, after the
// pool's own bookkeeping. They must be safe for concurrent use and cheap.
type Observer interface {
	ObserveSubmit(SubmitEvent)
	ObserveDone(DoneEvent)
}

// SubmitEvent describes one decision on a submitted task.
type SubmitEvent struct {
	Pool     string
	Accepted bool
	// Reason is why a task was not accepted: queue_full, closed, canceled
	// or deadline. ReasonNone when Accepted.
	Reason admit.Reason
	// Drop is DropDiscarded when Discard (or DiscardOldest
	// with an empty queue) dropped the new task; Go returned nil.
	Drop DropReason
	// CallerRuns is true when the task was accepted to run on the
	// submitter's goroutine.
	CallerRuns bool
	// Workers, Running and Queued as the pool saw them right after the
	// decision.
	Workers, Running, Queued int
}

// DoneEvent describes the end of an accepted task.
type DoneEvent struct {
	Pool    string
	Outcome admit.Outcome
	// Drop says why the task never ran when Outcome is
	// admit.OutcomeDropped: evicted, expired or closed.
	Drop DropReason
	// Wait is how long the task was queued: zero when a worker took it
	// at once or it ran on the caller.
	Wait time.Duration
	// Run is how long the task ran; zero for dropped tasks.
	Run time.Duration
}

// Observers fans events out to several observers, in order. Nil entries
// are skipped; with nothing left it returns nil, so the pool pays nothing.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
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

func (m multiObserver) ObserveSubmit(e SubmitEvent) {
	for _, o := range m {
		o.ObserveSubmit(e)
	}
}

func (m multiObserver) ObserveDone(e DoneEvent) {
	for _, o := range m {
		o.ObserveDone(e)
	}
}
