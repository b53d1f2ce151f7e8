// Package ratespec reads a rate as people write one, "100/s", "600/m",
// "5/h" or "3/10s", for every place sluice takes a quota's rate: the
// --quota flag of serve and proxy and a route quota in the proxy's
// config file. One parser keeps the two spellings and their messages the
// same.
package ratespec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bounds of a rate, in tokens per second: below Min a bucket refills too
// slowly to mean anything; above Max a token is cheaper than the clock
// that counts it.
const (
	Min = 1e-6
	Max = 1e9
)

// Parse reads "N/unit": N a number above zero, unit s, m, h or a Go
// duration such as 10s or 100ms. It returns tokens per second, between
// Min and Max.
func Parse(v string) (float64, error) {
	num, unit, ok := strings.Cut(v, "/")
	if !ok {
		return 0, errors.New("want N/s, N/m, N/h or N/<duration>, e.g. 100/s")
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("count %q: want a number above zero", num)
	}
	var per time.Duration
	switch unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		if per, err = time.ParseDuration(unit); err != nil || per <= 0 {
			return 0, fmt.Errorf("unit %q: want s, m, h or a positive duration like 10s", unit)
		}
	}
	r := n / per.Seconds()
	if r > Max || r < Min {
		return 0, fmt.Errorf("rate %s per second is out of range (0.000001 to 1000000000)", strconv.FormatFloat(r, 'f', -1, 64))
	}
	return r, nil
}
