package ratespec

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]float64{
		"100/s": 100, "600/m": 10, "36/h": 0.01, "3/10s": 0.3, "1/100ms": 10, "0.5/s": 0.5,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"100":          "want N/s",
		"x/s":          `count "x"`,
		"0/s":          `count "0"`,
		"-1/s":         `count "-1"`,
		"NaN/s":        `count "NaN"`,
		"1/day":        `unit "day"`,
		"1/-1s":        `unit "-1s"`,
		"2000000000/s": "rate 2000000000 per second is out of range",
		"1/1000000h":   "out of range",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Parse(%q): %v; want an error mentioning %q", in, err, msg)
		}
	}
}
