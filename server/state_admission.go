package server

import (
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
)

// ClassState is one priority class of a gate in /state.
type ClassState struct {
	Admitted uint64            `json:"admitted"`
	Rejected map[string]uint64 `json:"rejected"` // non-zero reasons only
	InUse    int64             `json:"in_use"`
	Waiting  int64             `json:"waiting"`
}

// LimitState is an adaptive limit's state in /state: the capacity it set,
// its algorithm's inputs, the last decision and the recovery ramp.
type LimitState struct {
	Gate            string  `json:"gate"`
	Law             string  `json:"law"`
	Limit           int64   `json:"limit"`
	LatencySeconds  float64 `json:"latency_seconds"`
	BaselineSeconds float64 `json:"baseline_seconds"`
	CeilingSeconds  float64 `json:"ceiling_seconds"`
	// TailSeconds is the last window's 99th percentile hold time,
	// QueueWaitSeconds the queue's wait counted against the SLO, and
	// BudgetSeconds what the SLO leaves the hold (see limit.State).
	TailSeconds      float64   `json:"tail_seconds"`
	QueueWaitSeconds float64   `json:"queue_wait_seconds"`
	BudgetSeconds    float64   `json:"budget_seconds"`
	Samples          int       `json:"samples"`
	Inflight         int64     `json:"inflight"`
	Overload         bool      `json:"overload"`
	Episode          bool      `json:"episode"`
	Decision         string    `json:"decision"`
	Why              string    `json:"why"`
	Windows          uint64    `json:"windows"`
	Ramp             RampState `json:"ramp"`
}

// RampState is the recovery ramp's part of LimitState.
type RampState struct {
	Active   bool   `json:"active"`
	Level    int    `json:"level"`
	Steps    int    `json:"steps"`
	Floor    int64  `json:"floor"`
	Target   int64  `json:"target"`
	Capacity int64  `json:"capacity"`
	Decision string `json:"decision"`
	Why      string `json:"why"`
}

// admissionState fills the queue and class parts of a gate's state.
func admissionState(gs *GateState, s admit.Stats) {
	gs.OldestWaitSeconds = s.OldestWait.Seconds()
	used := false
	for c := 1; c < admit.NumClasses; c++ {
		cs := &s.Classes[c]
		used = used || cs.Admitted != 0 || cs.Rejected.Total() != 0 || cs.Waiting != 0
	}
	if !used {
		return
	}
	gs.Classes = make(map[string]ClassState, admit.NumClasses)
	for _, cs := range s.Classes {
		st := ClassState{Admitted: cs.Admitted, Rejected: map[string]uint64{}, InUse: cs.InUse, Waiting: cs.Waiting}
		for r := admit.Reason(1); int(r) < admit.NumReasons; r++ {
			if n := cs.Rejected[r]; n != 0 {
				st.Rejected[r.String()] = n
			}
		}
		gs.Classes[cs.Class.String()] = st
	}
}

func limitState(a *limit.Adaptive) LimitState {
	s := a.State()
	return LimitState{
		Gate: s.Gate, Law: s.Law, Limit: s.Limit,
		LatencySeconds: s.Latency.Seconds(), BaselineSeconds: s.Baseline.Seconds(), CeilingSeconds: s.Ceiling.Seconds(),
		TailSeconds: s.Tail.Seconds(), QueueWaitSeconds: s.Wait.Seconds(), BudgetSeconds: s.Budget.Seconds(),
		Samples: s.Samples, Inflight: s.Inflight, Overload: s.Overload, Episode: s.Episode,
		Decision: s.Decision.String(), Why: s.Why, Windows: s.Windows,
		Ramp: RampState{Active: s.Ramp.Active, Level: s.Ramp.Level, Steps: s.Ramp.Steps, Floor: s.Ramp.Floor,
			Target: s.Ramp.Target, Capacity: s.Ramp.Capacity, Decision: s.Ramp.Decision.String(), Why: s.Ramp.Why},
	}
}
