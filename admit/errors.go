package admit

import (
	"context"
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

// ErrInvalidConfig is wrapped by every error New and SetCapacity return.
var ErrInvalidConfig = errors.New("admit: invalid config")

// ErrInvalidRequest is wrapped by the error an acquisition returns for a
// request the gate cannot even consider: a weight outside 1..MaxCapacity
// or a Kind the gate does not have. Such a call is a programming error; it
// touches nothing and is not counted as offered.
var ErrInvalidRequest = errors.New("admit: invalid request")

// Reason says why an attempt was rejected. The zero Reason means "not
// rejected".
// Reasons are a closed set so they can be metric labels.
type Reason uint8

// The reasons a gate, or a policy built on one, refuses work.
const (
	ReasonNone        Reason = iota // not refused
	ReasonFull                      // every slot taken and no queue (or TryAcquire); or the work is bigger than the capacity
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

// OutcomeFor maps the error that admitted work ended with to an Outcome:
// nil is OutcomeOK, a canceled context (context.Canceled, or a deadline
// that passed: the caller stopped waiting) is OutcomeCanceled, anything
// else is OutcomeError. The usual shape is
//
//	err := work(ctx)
//	p.Done(admit.OutcomeFor(err))
func OutcomeFor(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	return OutcomeError
}

// RejectedError is the error every refusal returns. It records what the
// gate saw at the moment of refusal. Its fields are read through methods,
// so a value can be shared safely: a gate hands out one identical,
// immutable error while nothing it reports has changed, and refusing under
// a flood allocates nothing.
//
// A refusal caused by the caller's own context (ReasonCanceled,
// ReasonDeadline) unwraps to context.Canceled or context.DeadlineExceeded,
// so errors.Is(err, context.Canceled) holds for it.
type RejectedError struct {
	gate, kind         string
	reason             Reason
	inflight, capacity int64
	retryAfter         time.Duration
}

// NewRejectedError returns a refusal made outside a Gate, by a policy that
// follows the same contract (a quota, a breaker, a shedder): gate and kind
// are bounded labels, inflight and capacity what the policy saw (zero when
// it has no such notion), retryAfter its estimate of when to try again
// (rounded up to whole seconds by RetryAfterSeconds).
func NewRejectedError(gate, kind string, r Reason, inflight, capacity int64, retryAfter time.Duration) *RejectedError {
	return &RejectedError{gate: gate, kind: kind, reason: r, inflight: inflight, capacity: capacity, retryAfter: retryAfter}
}

// Gate is the name of the gate (or policy) that refused.
func (e *RejectedError) Gate() string { return e.gate }

// Kind is the bounded kind label of the refused work.
func (e *RejectedError) Kind() string { return e.kind }

// Reason says why the work was refused.
func (e *RejectedError) Reason() Reason { return e.reason }

// Inflight is the number of slots in use when the refusal was decided.
func (e *RejectedError) Inflight() int64 { return e.inflight }

// Capacity is the gate's capacity when the refusal was decided.
func (e *RejectedError) Capacity() int64 { return e.capacity }

// RetryAfter is the refuser's suggestion of when to try again. A gate
// computes it from recent hold times and the backlog (see the package
// documentation); it is at least one second.
func (e *RejectedError) RetryAfter() time.Duration { return e.retryAfter }

func (e *RejectedError) Error() string {
	return fmt.Sprintf("admit: gate %q refused %q: %s (inflight %d/%d, retry after %s)",
		e.gate, e.kind, e.reason, e.inflight, e.capacity, e.retryAfter)
}

// Is makes errors.Is(err, ErrRejected) true for every refusal and
// errors.Is(err, ErrClosed) true for refusals caused by shutdown.
func (e *RejectedError) Is(target error) bool {
	return target == ErrRejected || (target == ErrClosed && e.reason == ReasonClosed)
}

// Unwrap returns the context error behind a refusal caused by the
// caller's context, and nil for every other refusal.
func (e *RejectedError) Unwrap() error {
	switch e.reason {
	case ReasonCanceled:
		return context.Canceled
	case ReasonDeadline:
		return context.DeadlineExceeded
	}
	return nil
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least
// 1, ready for an HTTP Retry-After header.
func (e *RejectedError) RetryAfterSeconds() int {
	if e.retryAfter >= time.Duration(1<<62) {
		return 1 << 30 // absurd, but never an overflow
	}
	s := int((e.retryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}
