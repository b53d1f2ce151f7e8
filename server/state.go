package server

import (
	"github.com/sluicehq/sluice/admit"
)

// State is what the admin listener's /state reports.
type State struct {
	Draining    bool         `json:"draining"`
	Gates       []GateState  `json:"gates"`
	Connections ConnState    `json:"connections"`
	Limits      []LimitState `json:"limits,omitempty"`
	// Extra holds the sections of Config.StateExtras, by name.
	Extra map[string]any `json:"extra,omitempty"`
}

// GateState is one gate's counters. Rejected and Completed hold every
// reason and outcome, zero included, so the keys are stable.
type GateState struct {
	Gate      string            `json:"gate"`
	Capacity  int64             `json:"capacity"`
	Closed    bool              `json:"closed"`
	Offered   uint64            `json:"offered"`
	Admitted  uint64            `json:"admitted"`
	Rejected  map[string]uint64 `json:"rejected"`
	Completed map[string]uint64 `json:"completed"`
	Inflight  int64             `json:"inflight"`
	Waiting   int64             `json:"waiting"`
	PeakInUse int64             `json:"peak_in_use"`
	Misuse    uint64            `json:"misuse"`
	// OldestWaitSeconds is the age of the oldest queued caller (0: none).
	OldestWaitSeconds float64 `json:"oldest_wait_seconds"`
	// Classes is per priority class, once the gate has seen a class other
	// than the default.
	Classes map[string]ClassState `json:"classes,omitempty"`
}

// ConnState is the main listener's connection counters.
type ConnState struct {
	MaxConns            int               `json:"max_conns"`
	Open                int               `json:"open"`
	Refusing            int               `json:"refusing"`
	Accepted            uint64            `json:"accepted"`
	Rejected            map[string]uint64 `json:"rejected"`
	ClosedIdle          uint64            `json:"closed_idle"`
	ClosedHeaderTimeout uint64            `json:"closed_header_timeout"`
	ClosedSendTimeout   uint64            `json:"closed_send_timeout"`
	ClosedBodyTimeout   uint64            `json:"closed_body_timeout"`
	AcceptErrors        map[string]uint64 `json:"accept_errors"`
	Backoffs            uint64            `json:"accept_backoffs"`
}

// State returns a snapshot of the gates and the main listener.
func (s *Server) State() State {
	gates := s.Gates()
	st := State{Draining: s.draining.Load(), Gates: make([]GateState, 0, len(gates))}
	for _, g := range gates {
		st.Gates = append(st.Gates, gateState(g.Stats()))
	}
	for _, a := range s.limits {
		st.Limits = append(st.Limits, limitState(a))
	}
	c := s.main.Stats()
	st.Connections = ConnState{
		MaxConns: c.MaxConns, Open: c.Open, Refusing: c.Refusing, Accepted: c.Accepted,
		Rejected: c.Rejected, ClosedIdle: c.ClosedIdle, ClosedHeaderTimeout: c.ClosedHeaderTimeout,
		ClosedSendTimeout: c.ClosedSendTimeout, ClosedBodyTimeout: c.ClosedBodyTimeout,
		AcceptErrors: c.AcceptErrors, Backoffs: c.Backoffs,
	}
	if len(s.extras) > 0 {
		st.Extra = make(map[string]any, len(s.extras))
		for name, f := range s.extras {
			st.Extra[name] = f()
		}
	}
	return st
}

func gateState(s admit.Stats) GateState {
	gs := GateState{
		Gate: s.Gate, Capacity: s.Capacity, Closed: s.Closed,
		Offered: s.Offered, Admitted: s.Admitted,
		Rejected:  make(map[string]uint64, admit.NumReasons-1),
		Completed: make(map[string]uint64, admit.NumOutcomes),
		Inflight:  s.Inflight, Waiting: s.Waiting, PeakInUse: s.PeakInUse, Misuse: s.Misuse,
	}
	for r := admit.Reason(1); int(r) < admit.NumReasons; r++ {
		gs.Rejected[r.String()] = s.Rejected[r]
	}
	for o := admit.Outcome(0); int(o) < admit.NumOutcomes; o++ {
		gs.Completed[o.String()] = s.Completed[o]
	}
	admissionState(&gs, s)
	return gs
}
