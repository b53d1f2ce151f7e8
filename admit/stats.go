package admit

import "time"

// ReasonCounts counts refusals by Reason.
type ReasonCounts [NumReasons]uint64

// Total is the number of refusals for any reason.
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

// Stats is a snapshot of a gate's counters. Counters only grow. When
// nothing is in motion (no call inside the gate), a snapshot satisfies
//
//	Offered  = Admitted + Rejected.Total() + Waiting
//	Admitted = Completed.Total() + Inflight
//
// and the same per kind. While calls are in flight the fields are read
// one by one and may disagree by the few operations under way.
type Stats struct {
	Gate     string
	Capacity int64 // configured capacity (also after Close)
	Closed   bool

	Offered   uint64        // every attempt that reached the gate
	Admitted  uint64        // attempts that got their slots
	Rejected  ReasonCounts  // attempts refused, by reason
	Completed OutcomeCounts // admitted work that ended, by outcome

	Inflight int64 // admitted and not yet completed (permits)
	InUse    int64 // slots held (equals Inflight when every weight is 1)
	Waiting  int64 // in Acquire, not yet decided
	// PeakInUse is the most slots ever held at once.
	PeakInUse int64

	WaitTime time.Duration // total time callers spent queued
	HoldTime time.Duration // total time permits held their slots (0 with NoTiming)

	Misuse uint64 // Done called on a permit that was already done

	Kinds []KindStats // per kind, in the gate's kind order ("other" last)
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

// Stats returns a snapshot of the gate's counters.
func (g *Gate) Stats() Stats {
	s := Stats{
		Gate:      g.name,
		Capacity:  g.setCap.Load(),
		Closed:    g.Closed(),
		Waiting:   g.nwait.Load(),
		PeakInUse: g.peak.Load(),
		WaitTime:  time.Duration(g.waitNanos.Load()),
		HoldTime:  time.Duration(g.holdNanos.Load()),
		Misuse:    g.misuse.Load(),
		Kinds:     make([]KindStats, len(g.kinds)),
	}
	completed := g.completedTotal()
	s.InUse = g.InUse()
	s.Inflight = s.InUse - g.extra.Load() - g.pending.Load()
	s.Admitted = completed + uint64(s.Inflight)

	// Kinds other than 0 are counted directly; kind 0 gets the rest.
	var otherAdmitted, otherCompleted uint64
	var otherWaiting int64
	for i := range g.kinds {
		kc := &g.perKind[i]
		ks := &s.Kinds[i]
		ks.Kind = g.kinds[i]
		for r := range ks.Rejected {
			ks.Rejected[r] = kc.rejected[r].Load()
		}
		var nonOK uint64
		for o := OutcomeOK + 1; o < numOutcomes; o++ {
			ks.Completed[o] = kc.nonOK[o].Load()
			nonOK += ks.Completed[o]
		}
		ks.Waiting = kc.waiting.Load()
		var done uint64
		if i == 0 {
			continue // filled in below
		}
		ks.Admitted = kc.admitted.Load()
		done = kc.completed.Load()
		ks.Completed[OutcomeOK] = done - nonOK
		ks.Inflight = int64(ks.Admitted - done)
		otherAdmitted += ks.Admitted
		otherCompleted += done
		otherWaiting += ks.Waiting
	}
	k0 := &s.Kinds[0]
	k0.Admitted = s.Admitted - otherAdmitted
	done0 := completed - otherCompleted
	var nonOK0 uint64
	for o := OutcomeOK + 1; o < numOutcomes; o++ {
		nonOK0 += k0.Completed[o]
	}
	k0.Completed[OutcomeOK] = done0 - nonOK0
	k0.Inflight = int64(k0.Admitted - done0)

	for i := range s.Kinds {
		ks := &s.Kinds[i]
		ks.Offered = ks.Admitted + ks.Rejected.Total() + uint64(max(ks.Waiting, 0))
		for r := range ks.Rejected {
			s.Rejected[r] += ks.Rejected[r]
		}
		for o := range ks.Completed {
			s.Completed[o] += ks.Completed[o]
		}
	}
	s.Offered = s.Admitted + s.Rejected.Total() + uint64(max(s.Waiting, 0))
	return s
}
