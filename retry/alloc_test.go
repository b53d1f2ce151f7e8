//go:build !race

package retry

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestDeadlineAllocs: a successful call through the Transport costs no
// allocation over the bare round tripper without a deadline, and exactly
// three with one (the request copy with its header value, and the new
// header map's two). Allocation counts are only meaningful without the
// race detector.
func TestDeadlineAllocs(t *testing.T) {
	p, err := New(Config{Name: "up"})
	if err != nil {
		t.Fatal(err)
	}
	var next stubRT
	tr := &Transport{Policy: p, Next: &next}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	plain, _ := http.NewRequest(http.MethodGet, "http://upstream/x", nil)
	plain.Header.Set("Accept", "text/plain")
	dl := plain.WithContext(ctx)
	call := func(rt http.RoundTripper, req *http.Request) func() {
		return func() {
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		want float64
	}{{"no deadline", plain, 0}, {"deadline", dl, 3}} {
		bare := testing.AllocsPerRun(100, call(&next, tc.req))
		wrapped := testing.AllocsPerRun(100, call(tr, tc.req))
		if extra := wrapped - bare; extra != tc.want {
			t.Errorf("%s: %v allocations over the bare round tripper, want %v", tc.name, extra, tc.want)
		}
	}
	if got := next.last.Header.Get("Request-Timeout"); got == "" || dl.Header.Get("Request-Timeout") != "" {
		t.Fatalf("attempt header %q, caller's %q: want it on the attempt only", got, dl.Header.Get("Request-Timeout"))
	}
}
