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

// ParseDeadline parses a deadline header value: a positive number of
// seconds in decimal, with at most nine digits after the point ("2",
// "0.25", "10.000000001"). Optional spaces or tabs around the number are
// ignored. Signs, exponents, units, lists and empty values are errors
// wrapping ErrBadDeadline. Values beyond 2^30 seconds saturate there;
// callers bound the result anyway.
func ParseDeadline(s string) (time.Duration, error) {
	s = trimOWS(s)
	if s == "" {
		return 0, fmt.Errorf("%w: empty value", ErrBadDeadline)
	}
	var secs int64
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if secs < maxDeadlineSeconds {
			secs = secs*10 + int64(s[i]-'0')
		}
	}
	if i == 0 {
		return 0, fmt.Errorf("%w: %q: want decimal seconds such as 2 or 0.5", ErrBadDeadline, s)
	}
	secs = min(secs, maxDeadlineSeconds)
	var nanos int64
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		scale := int64(1e8)
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if i-start >= 9 {
				return 0, fmt.Errorf("%w: %q: more than nine digits after the point", ErrBadDeadline, s)
			}
			nanos += int64(s[i]-'0') * scale
			scale /= 10
		}
		if i == start {
			return 0, fmt.Errorf("%w: %q: no digits after the point", ErrBadDeadline, s)
		}
	}
	if i != len(s) {
		return 0, fmt.Errorf("%w: %q: want decimal seconds such as 2 or 0.5", ErrBadDeadline, s)
	}
	if secs == 0 && nanos == 0 {
		return 0, fmt.Errorf("%w: %q: must be greater than zero", ErrBadDeadline, s)
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos), nil
}

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
