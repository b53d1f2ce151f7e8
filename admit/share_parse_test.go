package admit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
)

func TestParseClassShares(t *testing.T) {
	for in, want := range map[string]admit.ClassShares{
		"":                            {},
		"sheddable=0.1":               {admit.ClassSheddable: 0.1},
		" critical_plus = 25% ":       {admit.ClassCriticalPlus: 0.25},
		"sheddable-plus=1":            {admit.ClassSheddablePlus: 1},
		"CRITICAL=0.5, sheddable=0.5": {admit.ClassCritical: 0.5, admit.ClassSheddable: 0.5},
		"critical=0.2,sheddable=10%,critical_plus=0.3": {admit.ClassCritical: 0.2, admit.ClassSheddable: 0.1, admit.ClassCriticalPlus: 0.3},
	} {
		got, err := admit.ParseClassShares(in)
		if err != nil || got != want {
			t.Errorf("ParseClassShares(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := admit.ParseClassShares(got.String()); err != nil || back != got {
			t.Errorf("String %q does not parse back: %v, %v", got.String(), back, err)
		}
	}
	for in, msg := range map[string]string{
		"sheddable": "want class=fraction", "=0.1": "unknown class", "sheddable=0": "outside (0, 1]",
		"sheddable=-0.1": "outside", "sheddable=NaN": "not a number", "sheddable=Inf": "not a number",
		"x=0.1": `unknown class "x"`, "sheddable=101%": "outside", "sheddable=0.1,": "want class=fraction",
		"sheddable=0.1,sheddable=0.2": "given twice", "sheddable=0.6,critical=0.6": "more than 1",
	} {
		_, err := admit.ParseClassShares(in)
		if !errors.Is(err, admit.ErrInvalidConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseClassShares(%q) = %v; want ErrInvalidConfig mentioning %q", in, err, msg)
		}
	}
}

// FuzzParseClassShares: accepted shares are valid for a gate (known
// classes, each in [0, 1], summing to at most 1) and print back to
// themselves; nothing panics.
func FuzzParseClassShares(f *testing.F) {
	for _, s := range []string{"sheddable=0.1", "critical_plus=25%,sheddable=0.5", "x", "a=b=c", "sheddable=1e-300", ",", "critical=1,sheddable=1e-10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shares, err := admit.ParseClassShares(s)
		if err != nil {
			if !errors.Is(err, admit.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		if _, err := admit.New(admit.Config{Name: "g", Capacity: 4, MaxWaiters: 4, Queueing: admit.Queueing{ClassShares: shares}}); err != nil {
			t.Fatalf("ParseClassShares(%q) = %v accepted, but a gate refuses it: %v", s, shares, err)
		}
		if back, err := admit.ParseClassShares(shares.String()); err != nil || back != shares {
			t.Fatalf("%q printed as %q parses to %v, %v", s, shares.String(), back, err)
		}
	})
}
