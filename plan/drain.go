package plan

// Drain is the input of a backlog drain calculation: a backlog and the
// rates around it, each per second, all assumed steady and of items of
// similar cost (when costs differ widely, compute per class of work or in
// units of work, not in items). Zero means zero for every field.
type Drain struct {
	// Backlog is the number of items already waiting.
	Backlog float64
	// Offered is every attempt arriving per second, retries included.
	Offered float64
	// Refused is the attempts per second turned away at the door (they do
	// not join the backlog). At most Offered.
	Refused float64
	// Completed is the items per second the work actually finishes and can
	// keep finishing (the safe completion rate, not a burst).
	Completed float64
	// Requeued is retries per second that re-enter the backlog and are not
	// already counted in Offered (a client or a broker redelivering).
	Requeued float64
}

// DrainResult is a solved drain calculation.
type DrainResult struct {
	Backlog   float64 `json:"backlog"`
	Offered   float64 `json:"offered_per_second"`
	Refused   float64 `json:"refused_per_second"`
	Accepted  float64 `json:"accepted_per_second"`  // Offered − Refused + Requeued: new work joining the backlog
	Completed float64 `json:"completed_per_second"` // as given
	// NetDrain is Completed − Accepted: how fast the backlog shrinks.
	// Zero or negative means it never drains (negative: it grows by that
	// much each second).
	NetDrain float64 `json:"net_drain_per_second"`
	// Never is true when NetDrain ≤ 0 and there is a backlog.
	Never bool `json:"never"`
	// Seconds is the ideal drain time, Backlog / NetDrain: no slowdown,
	// no surge, no double counting. Zero when Never or when there is no
	// backlog.
	Seconds float64 `json:"drain_seconds"`
}

// Solve computes the net drain rate and the ideal drain time.
func (in Drain) Solve() (DrainResult, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"backlog", in.Backlog}, {"offered", in.Offered}, {"refused", in.Refused}, {"completed", in.Completed}, {"requeued", in.Requeued}} {
		if err := checkFigure(f.name, f.v); err != nil {
			return DrainResult{}, err
		}
	}
	if in.Refused > in.Offered {
		return DrainResult{}, invalid("refused", in.Refused, "cannot exceed offered: only arriving attempts can be refused")
	}
	r := DrainResult{
		Backlog: in.Backlog, Offered: in.Offered, Refused: in.Refused, Completed: in.Completed,
		Accepted: in.Offered - in.Refused + in.Requeued,
	}
	r.NetDrain = r.Completed - r.Accepted
	switch {
	case r.Backlog == 0:
	case r.NetDrain <= 0:
		r.Never = true
	default:
		r.Seconds = r.Backlog / r.NetDrain
	}
	return r, nil
}
