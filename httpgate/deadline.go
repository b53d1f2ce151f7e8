package httpgate

import (
	"errors"
	"fmt"
	"time"
)

// ErrBadDeadline is wrapped by every error ParseDeadline returns.
var ErrBadDeadline = errors.New("bad deadline")

// maxDeadlineSeconds bounds the integer part ParseDeadline accepts before
// saturating, far above any sensible MaxDeadline and far below overflow.
const maxDeadlineSeconds = 1 << 30

// ParseDeadline parses a deadline header value. The rule: a positive
// decimal number, with at most nine digits after the point, and an
// optional unit right after it: "ms", "s" or "m". A bare number is
// seconds. So "2", "2s", "0.5", "500ms" and "1.5m" are all accepted, and
// mean what they say. Optional spaces or tabs around the value are
// ignored. Signs, exponents, other units, a space between number and
// unit, lists and zero are errors wrapping ErrBadDeadline. Values beyond
// 2^30 seconds saturate there; callers bound the result anyway.
func ParseDeadline(s string) (time.Duration, error) {
	s = trimOWS(s)
	if s == "" {
		return 0, fmt.Errorf("%w: empty value", ErrBadDeadline)
	}
	// The whole part counts units (milliseconds at the smallest), so it
	// saturates at 2^30 seconds' worth of milliseconds.
	const maxWhole = maxDeadlineSeconds * 1000
	var whole int64
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if whole < maxWhole {
			whole = whole*10 + int64(s[i]-'0')
		}
	}
	if i == 0 {
		return 0, fmt.Errorf("%w: %q: %s", ErrBadDeadline, s, deadlineRule)
	}
	whole = min(whole, maxWhole)
	var frac int64 // billionths of the unit
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		scale := int64(1e8)
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if i-start >= 9 {
				return 0, fmt.Errorf("%w: %q: more than nine digits after the point", ErrBadDeadline, s)
			}
			frac += int64(s[i]-'0') * scale
			scale /= 10
		}
		if i == start {
			return 0, fmt.Errorf("%w: %q: no digits after the point", ErrBadDeadline, s)
		}
	}
	var unit time.Duration
	switch s[i:] {
	case "", "s":
		unit = time.Second
	case "ms":
		unit = time.Millisecond
	case "m":
		unit = time.Minute
	default:
		return 0, fmt.Errorf("%w: %q: %s", ErrBadDeadline, s, deadlineRule)
	}
	if whole == 0 && frac == 0 {
		return 0, fmt.Errorf("%w: %q: must be greater than zero", ErrBadDeadline, s)
	}
	const most = maxDeadlineSeconds * time.Second
	if whole > int64(most/unit) {
		return most, nil
	}
	// Every unit is a whole number of milliseconds, so the fraction is
	// scaled without overflow: frac < 1e9, unit/1ms <= 60000.
	d := time.Duration(whole)*unit + time.Duration(frac*int64(unit/time.Millisecond)/1000)
	return min(max(d, time.Nanosecond), most), nil // a sub-nanosecond value is still positive
}

const deadlineRule = "want a positive number with an optional unit ms, s or m, such as 2, 0.5, 2s or 500ms (a bare number is seconds)"

// parseDeadlineValues parses the header's values; more than one is an
// error, since two budgets cannot both be honoured.
func parseDeadlineValues(vals []string) (time.Duration, error) {
	if len(vals) > 1 {
		return 0, fmt.Errorf("%w: header given %d times", ErrBadDeadline, len(vals))
	}
	return ParseDeadline(vals[0])
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
