package quotakey_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/quotakey"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{"ip": "", "header:X-Api-Key": "X-Api-Key", "header:tenant": "tenant"} {
		if got, err := quotakey.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "IP", "cookie:x", "header:", "header:bad h", "header:a\nb", "header:é", " ip", "header:X-Api-Key "} {
		if got, err := quotakey.Parse(in); !errors.Is(err, quotakey.ErrInvalid) || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

// FuzzParse: a key either is refused with ErrInvalid or names a header
// that httpgate.KeyHeader accepts (it panics on an invalid name) and that
// keys a real request by its value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"ip", "header:X-Api-Key", "header:", "header:bad h", "cookie:x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := quotakey.Parse(s)
		if err != nil {
			if !errors.Is(err, quotakey.ErrInvalid) || name != "" {
				t.Fatalf("Parse(%q) = %q, %v", s, name, err)
			}
			return
		}
		if name == "" {
			if s != quotakey.IP {
				t.Fatalf("Parse(%q) keys on the client's address", s)
			}
			return
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(name, "k1")
		if got := httpgate.KeyHeader(name)(r); got != "k1" {
			t.Fatalf("key %q read %q from its header, want k1", s, got)
		}
	})
}
