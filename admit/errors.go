package admit

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrRejected is matched by every refusal a gate makes:
// errors.Is(err, ErrRejected) holds for any *RejectedError.
var ErrRejected = errors.New("admit: rejected")

// ErrClosed is matched by refusals made because the gate was closed
// (shutdown), so callers can tell "go elsewhere, this process is leaving"
// from "this resource is busy, retry later".
var ErrClosed = errors.New("admit: gate closed")

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("admit: invalid config")

// Reason says why a gate refused. The zero Reason means "not refused".
// Reasons are a closed set so they can be metric labels.
type Reason uint8

// The reasons a gate, or a policy built on one, refuses work.
const (
	ReasonNone        Reason = iota // not refused
	ReasonFull                      // every slot taken and no queue (or TryAcquire)
	ReasonQueueFull                 // every slot taken and the wait queue is full
	ReasonWaitTimeout               // waited the gate's MaxWait without getting a slot
	ReasonDeadline                  // the caller's context deadline passed first
	ReasonCanceled                  // the caller's context was canceled (client gone)
	ReasonClosed                    // the gate is closed (shutdown)
	ReasonRate                      // a rate quota refused (used by quota packages)
	ReasonShed                      // shed by a load-shedding policy
	ReasonBreakerOpen               // a circuit breaker is open
	numReasons
)

// NumReasons is the size of arrays indexed by Reason.
const NumReasons = int(numReasons)

var reasonNames = [numReasons]string{
	"", "full", "queue_full", "wait_timeout", "deadline", "canceled", "closed",
	"rate", "shed", "breaker_open",
}

// String returns the reason's label, e.g. "queue_full".
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Overload reports whether the refusal is about load (retry later or
// elsewhere) rather than about the caller (canceled) or shutdown (closed).
func (r Reason) Overload() bool {
	switch r {
	case ReasonFull, ReasonQueueFull, ReasonWaitTimeout, ReasonDeadline, ReasonRate, ReasonShed, ReasonBreakerOpen:
		return true
	}
	return false
}

// Outcome says how admitted work ended.
type Outcome uint8

// The outcomes of admitted work. OutcomeOK is the zero value.
const (
	OutcomeOK       Outcome = iota // finished normally
	OutcomeError                   // finished with an error
	OutcomeCanceled                // the caller went away while the work ran
	OutcomePanic                   // the work panicked
	OutcomeDropped                 // abandoned before it produced a meaningful latency sample
	numOutcomes
)

// NumOutcomes is the size of arrays indexed by Outcome.
const NumOutcomes = int(numOutcomes)

var outcomeNames = [numOutcomes]string{"ok", "error", "canceled", "panic", "dropped"}

// String returns the outcome's label, e.g. "panic".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// RejectedError is the error every refusal returns. It records what the gate
// saw at the moment of refusal. Values are immutable once returned and may
// be shared between callers (a gate reuses an identical error instead of
// allocating a new one, so refusing under a flood allocates nothing).
type RejectedError struct {
	Gate   string // the gate's name
	Kind   string // the bounded kind label of the refused work
	Reason Reason
	// Inflight is the number of slots in use and Capacity the gate's
	// capacity when the refusal was decided.
	Inflight, Capacity int64
	// RetryAfter is the gate's suggestion of when to try again, whole
	// seconds, at least one second. It is computed from the average hold
	// time and the backlog when the gate measures time, else one second.
	RetryAfter time.Duration
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("admit: gate %q refused %q: %s (inflight %d/%d, retry after %s)",
		e.Gate, e.Kind, e.Reason, e.Inflight, e.Capacity, e.RetryAfter)
}

// Is makes errors.Is(err, ErrRejected) true for every refusal and
// errors.Is(err, ErrClosed) true for refusals caused by shutdown.
func (e *RejectedError) Is(target error) bool {
	return target == ErrRejected || (target == ErrClosed && e.Reason == ReasonClosed)
}

// RetryAfterSeconds is RetryAfter in whole seconds, at least 1, ready for
// an HTTP Retry-After header.
func (e *RejectedError) RetryAfterSeconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}
