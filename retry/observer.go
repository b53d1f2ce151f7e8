package retry

import "strconv"

// Event is something a Policy did or decided, for metrics. Events are a
// closed set so they can be metric labels.
type Event uint8

// The events a Policy reports.
const (
	EventAttempt           Event = iota // an attempt was sent (first or retry)
	EventRetry                          // a retry was decided (counted before its wait)
	EventBudgetExhausted                // a retry was wanted but the budget had none left
	EventThrottled                      // an attempt was refused locally by adaptive throttling
	EventRetryAfterHonored              // the policy waited as the server's Retry-After asked
	EventRetryAfterRefused              // the deadline did not cover Retry-After: failed at once
	EventDeadlineExpired                // the remaining deadline left no time to start an attempt
	EventBreakerOpen                    // the breaker refused an attempt
	EventNoRetrySignal                  // the upstream said "overloaded, do not retry"
	numEvents
)

// NumEvents is the size of arrays indexed by Event.
const NumEvents = int(numEvents)

var eventNames = [numEvents]string{
	"attempt", "retry", "budget_exhausted", "throttled", "retry_after_honored",
	"retry_after_refused", "deadline_expired", "breaker_open", "no_retry_signal",
}

// String returns the event's label, e.g. "budget_exhausted".
func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// Observer receives a Policy's events. Implementations must be safe for
// concurrent use and fast: they are called on the request path.
// (promsluice.Metrics needs none: it reads the policy's Stats.)
type Observer interface {
	ObserveRetry(policy string, e Event)
}
