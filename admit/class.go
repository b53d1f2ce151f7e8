package admit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Discipline is the order in which a gate serves its queue. The zero
// Discipline is DisciplineFIFO.
type Discipline uint8

// The queue disciplines.
const (
	// DisciplineFIFO serves waiters in arrival order (within a class).
	DisciplineFIFO Discipline = iota
	// DisciplineLIFO serves the newest waiter first: under a standing
	// overload the callers most likely to still be waiting for an answer
	// are served, and the old ones run into their MaxWait instead of being
	// served after their clients gave up.
	DisciplineLIFO
	// DisciplineCoDel is controlled delay: while the queue has been empty
	// within the last CoDelInterval it is FIFO and a newcomer may wait up
	// to CoDelInterval; once the queue has stood (not been empty) for
	// longer than that, newcomers may wait only CoDelTarget and the queue
	// is served newest first, so a standing queue drains instead of
	// adding its length to every request's latency.
	DisciplineCoDel
	numDisciplines
)

// Defaults of the controlled-delay discipline, as "Fail at Scale"
// (Facebook, ACM Queue 2015) describes it.
const (
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond
)

var disciplineNames = [numDisciplines]string{"fifo", "lifo", "codel"}

// String returns the discipline's name: "fifo", "lifo" or "codel".
func (d Discipline) String() string {
	if d < numDisciplines {
		return disciplineNames[d]
	}
	return fmt.Sprintf("discipline(%d)", d)
}

// ParseDiscipline returns the discipline named s ("fifo", "lifo" or
// "codel", any case), or an error wrapping ErrInvalidConfig.
func ParseDiscipline(s string) (Discipline, error) {
	for i, n := range disciplineNames {
		if strings.EqualFold(s, n) {
			return Discipline(i), nil
		}
	}
	return 0, fmt.Errorf("%w: queue discipline %q: want fifo, lifo or codel", ErrInvalidConfig, s)
}

// Class is the criticality of a request, with the names the Google SRE
// book uses. Under pressure a gate serves higher classes first and sheds
// lower ones (ReasonShed); see Queueing.ClassShares for guaranteed minimum
// shares and Queueing.ClassAging for how queued age counts.
//
// The zero Class is ClassCritical, the default for requests that say
// nothing: sheddable work has to be marked as such, so a caller that
// forgets is not shed first.
type Class uint8

// The classes, from the zero value (the default) on. Their priority
// order, highest first, is critical_plus, critical, sheddable_plus,
// sheddable.
const (
	ClassCritical      Class = iota // the default: production traffic a user waits for
	ClassCriticalPlus               // the most important: refused last
	ClassSheddablePlus              // may be refused under pressure; retried later (batch, prefetch)
	ClassSheddable                  // refused first: best-effort work
	numClasses
)

// NumClasses is the size of arrays indexed by Class.
const NumClasses = int(numClasses)

var classNames = [numClasses]string{"critical", "critical_plus", "sheddable_plus", "sheddable"}

// classRank orders classes by priority: 0 is served first.
var classRank = [numClasses]uint8{1, 0, 2, 3}

// String returns the class's label, e.g. "sheddable_plus".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// Rank is the class's place in the priority order: 0 for critical_plus
// up to 3 for sheddable. A lower rank is served first.
func (c Class) Rank() int {
	if c < numClasses {
		return int(classRank[c])
	}
	return NumClasses
}

// Above reports whether c is served before d.
func (c Class) Above(d Class) bool { return c.Rank() < d.Rank() }

// ParseClass returns the class named s ("critical_plus", "critical",
// "sheddable_plus" or "sheddable", any case, '-' accepted for '_'). It
// returns the default class and false for anything else: a class read
// from a request header must never fail a request, and an unknown value
// must not buy a better class.
func ParseClass(s string) (Class, bool) {
	if len(s) > 32 {
		return ClassCritical, false
	}
	s = strings.ReplaceAll(s, "-", "_")
	for i, n := range classNames {
		if strings.EqualFold(s, n) {
			return Class(i), true
		}
	}
	return ClassCritical, false
}

// Classes returns the class labels in priority order, highest first.
func Classes() []string {
	return []string{"critical_plus", "critical", "sheddable_plus", "sheddable"}
}

// ClassShares gives each class a guaranteed minimum share of a gate's
// capacity, indexed by Class: ClassShares{ClassSheddable: 0.1} keeps at
// least 10% of the slots (rounded down, at least one when the share is
// positive) for sheddable work whenever it is waiting. A class below its
// share is served from the queue before any class above it, and its
// waiters are never shed to make room for others. Zero means no
// guarantee; the shares must be within [0, 1] and sum to at most 1.
type ClassShares [NumClasses]float64

func (s ClassShares) validate() error {
	var sum float64
	for c, f := range s {
		if !(f >= 0 && f <= 1) { // also catches NaN
			return fmt.Errorf("class %s share %v outside [0, 1]", Class(c), f)
		}
		sum += f
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("class shares sum to %v, more than 1", sum)
	}
	return nil
}

// minSlots is the guaranteed minimum of class c at capacity cap.
func (s *ClassShares) minSlots(c Class, capacity int64) int64 {
	f := s[c]
	if f <= 0 || capacity <= 0 {
		return 0
	}
	return max(int64(f*float64(capacity)), 1)
}

// ParseClassShares parses guaranteed shares written as class=fraction
// pairs separated by commas, as `sluice serve --class-share` and the
// proxy's route rules take them: "sheddable=0.1,critical=50%". Each class
// is one of the four names (a typo in configuration is an error, never a
// silent default), given once, with a fraction in (0, 1]; the fractions
// sum to at most 1. Spaces around names and values are ignored; an empty
// s is no shares. Errors wrap ErrInvalidConfig and quote the pair at
// fault.
func ParseClassShares(s string) (ClassShares, error) {
	var shares ClassShares
	if strings.TrimSpace(s) == "" {
		return shares, nil
	}
	var seen [NumClasses]bool
	var sum float64
	for pair := range strings.SplitSeq(s, ",") {
		c, v, err := parseClassShare(pair)
		if err != nil {
			return ClassShares{}, fmt.Errorf("%w: class share %v", ErrInvalidConfig, err)
		}
		if seen[c] {
			return ClassShares{}, fmt.Errorf("%w: class share %q: class %s given twice", ErrInvalidConfig, pair, c)
		}
		seen[c], shares[c] = true, v
		if sum += v; sum > 1+1e-9 {
			return ClassShares{}, fmt.Errorf("%w: class shares sum to %v, more than 1", ErrInvalidConfig, sum)
		}
	}
	return shares, nil
}

// parseClassShare parses one "sheddable=0.1" (or "sheddable=10%").
func parseClassShare(s string) (Class, float64, error) {
	name, val, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want class=fraction, e.g. sheddable=0.1", s)
	}
	c, known := ParseClass(strings.TrimSpace(name))
	if !known {
		return 0, 0, fmt.Errorf("%q: unknown class %q (want %s)", s, name, strings.Join(Classes(), ", "))
	}
	val = strings.TrimSpace(val)
	scale := 1.0
	if p, ok := strings.CutSuffix(val, "%"); ok {
		val, scale = p, 100
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, 0, fmt.Errorf("%q: fraction %q is not a number", s, val)
	}
	if v /= scale; v <= 0 || v > 1 {
		return 0, 0, fmt.Errorf("%q: fraction %v outside (0, 1]", s, v)
	}
	return c, v, nil
}

// String writes the shares as ParseClassShares reads them, highest class
// first, classes without a share left out: "critical=0.5,sheddable=0.1".
func (s ClassShares) String() string {
	var b strings.Builder
	for _, name := range Classes() {
		c, _ := ParseClass(name)
		if s[c] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name + "=" + strconv.FormatFloat(s[c], 'g', -1, 64))
	}
	return b.String()
}
