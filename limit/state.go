package limit

import "time"

// Decision is what one window decided. Its String is a bounded metric
// label.
type Decision uint8

// Decisions. The Ramp* ones are made while recovering from an episode.
const (
	DecisionNone      Decision = iota // nothing decided yet
	DecisionHold                      // limit unchanged
	DecisionGrow                      // the law raised the limit
	DecisionShrink                    // the law (or the SLO ceiling) lowered it
	DecisionRampStart                 // an episode ended; recovery begins at its floor
	DecisionRampGrow                  // the ramp climbed one step
	DecisionRampPause                 // the ramp held its step
	DecisionRampBack                  // the ramp stepped back one level
	DecisionRampDone                  // the ramp reached the pre-episode level
	DecisionRampAbort                 // overload again during the ramp
	NumDecisions
)

var decisionNames = [NumDecisions]string{"none", "hold", "grow", "shrink", "ramp_start", "ramp_grow",
	"ramp_pause", "ramp_back", "ramp_done", "ramp_abort"}

func (d Decision) String() string {
	if d < NumDecisions {
		return decisionNames[d]
	}
	return "unknown"
}

// MarshalText writes the decision's name, so State marshals to readable
// JSON.
func (d Decision) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// State is a snapshot of an Adaptive, for /state, metrics and logs.
type State struct {
	Gate string // the attached target's name, if it has one
	Law  string // the law's name

	Limit    int64         // capacity last set, in slots
	Latency  time.Duration // the last window's measure
	Baseline time.Duration // the law's unloaded latency (0 if none)
	Ceiling  time.Duration // the SLO ceiling (0: none)
	// Tail is the last window's 99th percentile hold time, Wait the queue's
	// wait (the age of the target's oldest queued request as the window
	// closed, if it was as old at the window before), Budget what the SLO
	// left the hold (the SLO less Wait, at least half of it; 0 without an
	// SLO). With a Signal,
	// Tail is the signal's measure and Budget the SLO.
	Tail, Wait, Budget time.Duration
	Samples            int   // samples in the last window
	Inflight           int64 // most slots in use in the last window
	Overload           bool  // the last window was above the ceiling
	Episode            bool  // an overload episode is under way

	Decision Decision  // the last window's decision
	Why      string    // a short, bounded reason for it
	At       time.Time // when it was made (zero before the first)
	Windows  uint64    // windows judged so far
	// Decisions counts windows by decision, indexed by Decision.
	Decisions [NumDecisions]uint64

	Ramp RampState
}

// RampState is the recovery ramp's part of State.
type RampState struct {
	Active        bool
	Level, Steps  int       // level 0 is the floor, Steps the target
	Floor, Target int64     // capacities at level 0 and at Steps
	Capacity      int64     // capacity at the current level
	Decision      Decision  // the ramp's last decision
	Why           string    // and why
	Since         time.Time // when the current level began
}
