package admit

import "time"

// ReasonCounts counts rejections by Reason.
type ReasonCounts [NumReasons]uint64

// Total is the number of rejections for any reason.
func (c ReasonCounts) Total() uint64 {
	var t uint64
	for _, n := range c {
		t += n
	}
	return t
}

// OutcomeCounts counts completions by Outcome.
type OutcomeCounts [NumOutcomes]uint64

// Total is the number of completions with any outcome.
func (c OutcomeCounts) Total() uint64 {
	var t uint64
	for _, n := range c {
		t += n
	}
	return t
}

// Stats is a snapshot of a gate's counters, taken atomically: it is the
// state of the gate at one instant, never half of an operation. So, always
// (not only when the gate is quiet),
//
//	Offered  = Admitted + Rejected.Total() + Waiting
//	Admitted = Completed.Total() + Inflight
//
// for the gate and for every kind, and a later snapshot never shows a
// smaller count than an earlier one: counters are monotonic and never
// wrap.
type Stats struct {
	Gate     string
	Capacity int64 // configured capacity (also after Close)
	Closed   bool

	Offered   uint64        // every attempt that reached the gate
	Admitted  uint64        // attempts that got their slots
	Rejected  ReasonCounts  // attempts rejected, by reason
	Completed OutcomeCounts // admitted work that ended, by outcome

	Inflight int64 // admitted and not yet completed (permits)
	InUse    int64 // slots held, including slots granted to a waiter not yet awake
	Waiting  int64 // in Acquire, not yet decided (queued, or granted and not yet awake)
	Queued   int64 // waiting in the queue, not yet granted
	// PeakInUse is the most slots ever held at once.
	PeakInUse int64

	// WaitTime is the total time callers spent queued. HoldTime is the
	// total hold time of the permits whose hold was measured (HoldSamples
	// of them; see Config.SampleEvery), so HoldTime/HoldSamples is the mean
	// hold time. WaitTime is summed in a float64 of seconds and HoldTime in
	// whole nanoseconds; neither overflows: both stop at the largest
	// Duration (about 292 years).
	WaitTime    time.Duration
	HoldTime    time.Duration
	HoldSamples uint64
	// RecentHold is the moving average of recent hold times that
	// RetryAfter is computed from (0 before the first sample).
	RecentHold time.Duration

	Misuse uint64 // Done called on a permit that was already done, or an over-release

	// OldestWait is how long the oldest caller still queued has waited (0
	// when nobody is queued): the "oldest task is not moving" signal.
	OldestWait time.Duration

	Kinds []KindStats // per kind, in the gate's kind order
	// Classes is per class, indexed by Class (ClassCritical, the default,
	// first). Its counts add up to the gate's.
	Classes [NumClasses]ClassStats
}

// ClassStats is the part of a Stats snapshot for one class.
type ClassStats struct {
	Class    Class
	Admitted uint64
	Rejected ReasonCounts
	InUse    int64 // slots held, including granted waiters not yet awake
	Waiting  int64
}

// KindStats is the part of a Stats snapshot for one kind.
type KindStats struct {
	Kind      string
	Offered   uint64
	Admitted  uint64
	Rejected  ReasonCounts
	Completed OutcomeCounts
	Inflight  int64
	Waiting   int64
}

// Stats returns a snapshot of the gate's counters. It briefly blocks the
// gate's slow paths (queueing, weighted work, kinds after the first,
// outcomes other than ok) to read them together; the fast path never
// waits for it.
func (g *Gate) Stats() Stats {
	s := Stats{
		Gate:      g.name,
		Capacity:  g.setCap.Load(),
		Closed:    g.Closed(),
		PeakInUse: g.peak.Load(),
		Kinds:     make([]KindStats, len(g.kinds)),
	}
	g.acct.Lock()
	s.Misuse = g.misuse.Load()
	word := g.state.Load()
	folded := g.folded.Load()
	slowUsed := g.slowUsed.Load()
	fastFailed := g.fastFailed.Load()
	for i := range g.kinds {
		kc := &g.perKind[i]
		ks := &s.Kinds[i]
		ks.Admitted = kc.admitted.Load()
		for o := range ks.Completed {
			ks.Completed[o] = kc.completed[o].Load()
		}
		for r := range ks.Rejected {
			ks.Rejected[r] = kc.rejected[r].Load()
		}
		ks.Waiting = kc.waiting.Load()
	}
	s.Queued = g.queued.Load()
	for c := Class(1); c < numClasses; c++ {
		cc, cs := &g.perClass[c], &s.Classes[c]
		cs.Admitted = cc.admitted.Load()
		for r := range cs.Rejected {
			cs.Rejected[r] = cc.rejected[r].Load()
		}
		cs.InUse = cc.used.Load()
		cs.Waiting = cc.waiting.Load()
	}
	g.acct.Unlock()

	// Fast permits: those completed ok are counted in the word (and in
	// folded), those still held are the slots not held by anything else,
	// those that ended otherwise are in fastFailed (and in kind 0's
	// completed counts).
	s.InUse = int64(word & usedMask)
	fastOK := doneField(word) + folded
	fastHeld := uint64(s.InUse - slowUsed)
	k0 := &s.Kinds[0]
	k0.Admitted += fastOK + fastHeld + fastFailed
	k0.Completed[OutcomeOK] += fastOK

	for i := range s.Kinds {
		ks := &s.Kinds[i]
		ks.Kind = g.kinds[i]
		ks.Inflight = int64(ks.Admitted - ks.Completed.Total())
		ks.Offered = ks.Admitted + ks.Rejected.Total() + uint64(ks.Waiting)
		s.Offered += ks.Offered
		s.Admitted += ks.Admitted
		s.Inflight += ks.Inflight
		s.Waiting += ks.Waiting
		for r := range ks.Rejected {
			s.Rejected[r] += ks.Rejected[r]
		}
		for o := range ks.Completed {
			s.Completed[o] += ks.Completed[o]
		}
	}
	s.WaitTime = seconds(g.waitSeconds.Load())
	s.HoldTime = time.Duration(min(g.holdNanos.Load(), maxHoldNanos))
	s.HoldSamples = g.holdSamples.Load()
	s.RecentHold = time.Duration(g.holdEWMA.Load())
	s.OldestWait = g.OldestWait()
	// The default class has what the others do not.
	d := &s.Classes[ClassCritical]
	d.Admitted, d.Rejected, d.InUse, d.Waiting = s.Admitted, s.Rejected, s.InUse, s.Waiting
	for c := Class(1); c < numClasses; c++ {
		cs := &s.Classes[c]
		cs.Class = c
		d.Admitted -= cs.Admitted
		d.InUse -= cs.InUse
		d.Waiting -= cs.Waiting
		for r := range cs.Rejected {
			d.Rejected[r] -= cs.Rejected[r]
		}
	}
	return s
}

// seconds converts a float64 sum of seconds to a Duration, saturating.
func seconds(f float64) time.Duration {
	if f >= float64(1<<63-1)/float64(time.Second) {
		return 1<<63 - 1
	}
	return time.Duration(f * float64(time.Second))
}
