// Package queuerules gives the queue flags of `sluice serve` and `sluice
// proxy` (--queue-discipline, --priority-header, --class-share) and the
// proxy's per-route fields of the same meaning (queue_discipline,
// priority_header, class_shares) one meaning: Rules is their text,
// Compile checks it against the gate's queue size, with errors in the
// caller's words for each rule (a flag name or a config field), and
// returns what a gate and its handler need.
//
// It is internal: a library user sets admit.QueuePolicy and wraps a
// handler with httpgate.ClassFromHeader directly; only text from flags and
// config files needs this checking.
package queuerules

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// ErrInvalid is wrapped by every error of Compile. Its text is not in
// the errors' messages, which are the caller's words only.
var ErrInvalid = errors.New("invalid queue rules")

// Rules say, as text, how a gate's queue is ordered and which requests
// it sheds first. The zero Rules is a FIFO queue with every request in
// the default class.
type Rules struct {
	// Discipline is "fifo" (or empty), "lifo" or "codel", any case
	// (admit.ParseDiscipline). Other than fifo needs a queue.
	Discipline string
	// PriorityHeader names the request header that carries the request's
	// class: critical_plus, critical, sheddable_plus or sheddable. A
	// missing, unknown or oversized value is the default class
	// (critical). Empty: every request is critical. Needs a queue: classes
	// order and shed the queue.
	PriorityHeader string
	// ClassShares are guaranteed minimum shares as class=fraction pairs,
	// each element one or more of them comma-separated
	// (admit.ParseClassShares). Needs PriorityHeader.
	ClassShares []string
}

// Names are the names errors give the rules and the queue size, so a
// flag error names the flag (--queue-discipline) and a config error the
// field (queue_discipline).
type Names struct {
	Discipline, PriorityHeader, ClassShares, Queue string
}

// Compiled is Rules made usable: the gate's queueing and the
// middleware that puts each request's class in its context.
type Compiled struct {
	// Policy is for admit.Gate.SetQueueing (or admit.Config.Queueing);
	// ContextClass is set when a header gives classes.
	Policy admit.Queueing
	// Classify puts the header's class in the request's context (see
	// httpgate.ClassFromHeader); nil without a PriorityHeader.
	Classify func(http.Handler) http.Handler
}

// Compile checks the rules for a gate whose queue holds queue waiters and
// returns them compiled. Every problem is reported (errors.Join), each
// naming its rule with names, and wraps ErrInvalid.
func (q Rules) Compile(queue int, names Names) (Compiled, error) {
	var c Compiled
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, ruleError(fmt.Sprintf(format, a...))) }
	if q.Discipline != "" {
		d, err := admit.ParseDiscipline(q.Discipline)
		switch {
		case err != nil:
			bad("%s %q: want fifo, lifo or codel", names.Discipline, q.Discipline)
		case d != admit.DisciplineFIFO && queue <= 0:
			bad("%s %s needs %s: without a queue nothing waits", names.Discipline, d, names.Queue)
		}
		c.Policy.Discipline = d
	}
	if q.PriorityHeader != "" {
		classify, err := httpgate.ClassFromHeader(q.PriorityHeader)
		switch {
		case err != nil:
			bad("%s %q: not a valid header name", names.PriorityHeader, q.PriorityHeader)
		case queue <= 0:
			bad("%s needs %s: classes order and shed the queue", names.PriorityHeader, names.Queue)
		default:
			c.Classify, c.Policy.ContextClass = classify, true
		}
	}
	if len(q.ClassShares) > 0 {
		shares, err := admit.ParseClassShares(strings.Join(q.ClassShares, ","))
		switch {
		case err != nil:
			bad("%s: %s", names.ClassShares, strings.TrimPrefix(err.Error(), admit.ErrInvalidConfig.Error()+": "))
		case q.PriorityHeader == "":
			bad("%s needs %s: without it every request is critical", names.ClassShares, names.PriorityHeader)
		case queue <= 0:
			bad("%s needs %s: shares order the queue", names.ClassShares, names.Queue)
		}
		c.Policy.ClassShares = shares
	}
	if err := errors.Join(errs...); err != nil {
		return Compiled{}, err
	}
	return c, nil
}

// ruleError is a Rules error: it wraps ErrInvalid without repeating its
// text, so the message is the caller's words only.
type ruleError string

func (e ruleError) Error() string { return string(e) }
func (e ruleError) Unwrap() error { return ErrInvalid }
