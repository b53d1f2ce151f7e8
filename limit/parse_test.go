package limit

import (
	"errors"
	"strings"
	"testing"
)

func TestParseLaw(t *testing.T) {
	for _, name := range LawNames() {
		for _, spelled := range []string{name, strings.ToUpper(name), " " + name + "\t"} {
			l, err := ParseLaw(spelled)
			if err != nil || l == nil || l.Name() != name {
				t.Errorf("ParseLaw(%q) = %v, %v", spelled, l, err)
			}
		}
	}
	a, _ := ParseLaw("vegas")
	b, _ := ParseLaw("vegas")
	if a == b {
		t.Error("ParseLaw must return a new law each time: laws hold state")
	}
	for _, bad := range []string{"", "fixed", "vegas2", "aimd,vegas"} {
		if l, err := ParseLaw(bad); !errors.Is(err, ErrUnknownLaw) || l != nil || !strings.Contains(err.Error(), "gradient2") {
			t.Errorf("ParseLaw(%q) = %v, %v; want ErrUnknownLaw listing the names", bad, l, err)
		}
	}
}

func FuzzParseLaw(f *testing.F) {
	for _, s := range []string{"aimd", "VEGAS", " gradient2 ", "", "fixed", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLaw(s)
		if (l == nil) == (err == nil) {
			t.Fatalf("ParseLaw(%q) = %v, %v: exactly one of law and error", s, l, err)
		}
		if err != nil && !errors.Is(err, ErrUnknownLaw) {
			t.Fatalf("ParseLaw(%q) error %v does not wrap ErrUnknownLaw", s, err)
		}
		if l != nil && l.Name() != strings.ToLower(strings.TrimSpace(s)) {
			t.Fatalf("ParseLaw(%q) gave %s", s, l.Name())
		}
	})
}
