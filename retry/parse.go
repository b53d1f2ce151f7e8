package retry

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ErrBadRetryAfter is wrapped by every error ParseRetryAfter returns.
var ErrBadRetryAfter = errors.New("retry: bad Retry-After")

// maxRetryAfter bounds what ParseRetryAfter returns; no caller waits a day.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses a Retry-After value (RFC 9110 10.2.3): a number
// of whole seconds ("120") or an HTTP-date, which is turned into the time
// left from now (zero if it is in the past). Values above a day saturate
// at a day. Anything else is an error wrapping ErrBadRetryAfter.
func ParseRetryAfter(v string, now time.Time) (time.Duration, error) {
	v = trimSpace(v)
	if v == "" {
		return 0, fmt.Errorf("%w: empty value", ErrBadRetryAfter)
	}
	if v[0] >= '0' && v[0] <= '9' {
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("%w: %q: want whole seconds or an HTTP-date", ErrBadRetryAfter, v)
			}
			if secs <= int64(maxRetryAfter/time.Second) {
				secs = secs*10 + int64(c-'0')
			}
		}
		return min(time.Duration(secs)*time.Second, maxRetryAfter), nil
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: want whole seconds or an HTTP-date", ErrBadRetryAfter, v)
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), nil
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// FormatTimeout writes d as decimal seconds with millisecond precision
// ("2", "0.25", "0.001"), the form the Request-Timeout header carries and
// httpgate.ParseDeadline reads. d below one millisecond is written as
// "0.001" so the header never says zero.
func FormatTimeout(d time.Duration) string {
	var buf [timeoutLen]byte
	return string(appendTimeout(buf[:0], d))
}

// timeoutLen bounds what appendTimeout writes: at most 16 digits of whole
// seconds (the largest Duration is about 9.2e9 s), a point and 3 digits.
const timeoutLen = 24

// AppendTimeout appends FormatTimeout(d) to b.
func AppendTimeout(b []byte, d time.Duration) []byte { return appendTimeout(b, d) }

// appendTimeout appends FormatTimeout(d) to b.
func appendTimeout(b []byte, d time.Duration) []byte {
	ms := max(int64(d/time.Millisecond), 1)
	b = strconv.AppendInt(b, ms/1000, 10)
	if frac := ms % 1000; frac != 0 {
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return b
}

// Backoff returns the wait before retry number retry (1 for the first
// retry) with full jitter: a uniform draw from [0, min(max, base·2^(retry−1))),
// where u is the draw in [0, 1). Full jitter spreads retries of callers that
// failed together, so they do not come back together.
func Backoff(retry int, base, maxDelay time.Duration, u float64) time.Duration {
	ceil := base
	for i := 1; i < retry && ceil < maxDelay; i++ {
		ceil *= 2
	}
	ceil = min(ceil, maxDelay)
	return time.Duration(u * float64(ceil))
}
