package httpgate

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/admit"
)

// QueueRules say, as text from flags or a config file, how a gate's queue
// is ordered and which requests it sheds first: `sluice serve`'s and
// `sluice proxy`'s --queue-discipline, --priority-header and --class-share,
// and the proxy's per-route rules. The zero QueueRules is a FIFO queue with
// every request in the default class. Compile checks and applies them, so
// every caller gives them the same meaning.
type QueueRules struct {
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

// RuleNames are the names errors give the rules and the queue size, so a
// flag error names the flag (--queue-discipline) and a config error the
// field (queue_discipline).
type RuleNames struct {
	Discipline, PriorityHeader, ClassShares, Queue string
}

// Compiled is QueueRules made usable: the gate's queueing and the
// middleware that puts each request's class in its context.
type Compiled struct {
	// Policy is for admit.Gate.SetQueueing (or admit.Config.Queueing);
	// ContextClass is set when a header gives classes.
	Policy admit.Queueing
	// Classify puts the header's class in the request's context (see
	// ClassFromHeader); nil without a PriorityHeader.
	Classify func(http.Handler) http.Handler
}

// Compile checks the rules for a gate whose queue holds queue waiters and
// returns them compiled. Every problem is reported (errors.Join), each
// naming its rule with names, and wraps ErrInvalidConfig.
func (q QueueRules) Compile(queue int, names RuleNames) (Compiled, error) {
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
		classify, err := ClassFromHeader(q.PriorityHeader)
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

// ruleError is a QueueRules error: it wraps ErrInvalidConfig without
// repeating its text, so the message is the caller's words only.
type ruleError string

func (e ruleError) Error() string { return string(e) }
func (e ruleError) Unwrap() error { return ErrInvalidConfig }
