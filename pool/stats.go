package pool

import (
	"time"

	"github.com/sluicehq/sluice/admit"
)

// Stats is a snapshot of a pool's counters, taken under its lock, so it
// is consistent: at every moment
//
//	Offered  = Admitted + Rejected.Total()
//	Admitted = Completed.Total() + Queued + Running
//
// Counters only grow. Tasks dropped by Discard are counted in
// Rejected (reason queue_full) and in Dropped[DropDiscarded]; accepted
// tasks that never ran (evicted, expired, closed) are completed with
// admit.OutcomeDropped and counted in Dropped by reason.
type Stats struct {
	Pool     string
	Core     int
	Max      int
	QueueCap int // -1 when unbounded
	WhenFull WhenFull
	Closed   bool

	Offered   uint64              // every Go or Submit call
	Admitted  uint64              // tasks accepted: started, queued, or run by the caller
	Rejected  admit.ReasonCounts  // tasks rejected, by reason
	Completed admit.OutcomeCounts // accepted tasks that ended, by outcome
	// Dropped counts tasks that never ran, by why.
	Dropped [NumDropReasons]uint64
	// CallerRuns counts tasks CallerRuns ran on the submitter.
	CallerRuns uint64

	Workers     int // worker goroutines alive
	Idle        int // workers waiting for a task
	PeakWorkers int // most workers ever alive at once
	Running     int // tasks running now, on workers or callers
	Queued      int // accepted tasks waiting for a worker
	// OldestQueued is how long the task at the head of the queue has
	// waited; zero with an empty queue.
	OldestQueued time.Duration
}

// Panics is the number of tasks that panicked.
func (s Stats) Panics() uint64 { return s.Completed[admit.OutcomePanic] }

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Pool:        p.name,
		Core:        p.core,
		Max:         p.max,
		QueueCap:    p.queueCap,
		WhenFull:    p.whenFull,
		Closed:      p.closed,
		Offered:     p.offered,
		Admitted:    p.admitted,
		Rejected:    p.rejected,
		Completed:   p.completed,
		Dropped:     p.dropped,
		CallerRuns:  p.callerRuns,
		Workers:     p.workers,
		Idle:        len(p.idle),
		PeakWorkers: p.peakWorkers,
		Running:     p.running,
		Queued:      p.q.n,
	}
	if p.q.n > 0 {
		s.OldestQueued = max(time.Since(p.epoch)-p.q.peek().enq, 0)
	}
	return s
}
