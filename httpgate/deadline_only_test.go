package httpgate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httpgate"
)

// TestDeadlineOnlyMiddleware: Deadline reads the header without
// HeaderDeadline (using it is the opt-in), within [MinDeadline,
// MaxDeadline].
func TestDeadlineOnlyMiddleware(t *testing.T) {
	mw, err := httpgate.New(httpgate.Config{MaxDeadline: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		deadline time.Duration // 0: none
		sameReq  bool
	}
	var got seen
	var orig *http.Request
	h := mw.Deadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = seen{sameReq: r == orig}
		if dl, ok := r.Context().Deadline(); ok {
			got.deadline = time.Until(dl)
		}
		if n := httpgate.Held(r.Context()); n != 0 {
			t.Errorf("Held = %d without a holder", n)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	tests := []struct {
		name       string
		header     string
		wantStatus int
		wantMin    time.Duration
		wantMax    time.Duration
		wantSame   bool
	}{
		{"no header passes the request through", "", http.StatusNoContent, 0, 0, true},
		{"header becomes the deadline", "0.5", http.StatusNoContent, 400 * time.Millisecond, 500 * time.Millisecond, false},
		{"with a unit", "1500ms", http.StatusNoContent, 1400 * time.Millisecond, 1500 * time.Millisecond, false},
		{"raised to the floor", "1ms", http.StatusNoContent, 90 * time.Millisecond, httpgate.DefaultMinDeadline, false},
		{"deadline is bounded", "60", http.StatusNoContent, 1900 * time.Millisecond, 2 * time.Second, false},
		{"malformed header is a 400", "soon", http.StatusBadRequest, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = seen{}
			orig = httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.Background())
			if tt.header != "" {
				orig.Header.Set(httpgate.DefaultDeadlineHeader, tt.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, orig)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.wantStatus, rec.Body)
			}
			if tt.wantStatus == http.StatusBadRequest {
				if !strings.Contains(rec.Body.String(), httpgate.DefaultDeadlineHeader) {
					t.Errorf("400 body %q does not name the header", rec.Body)
				}
				return
			}
			if got.sameReq != tt.wantSame {
				t.Errorf("handler got the original request: %v, want %v", got.sameReq, tt.wantSame)
			}
			if got.deadline < tt.wantMin || got.deadline > tt.wantMax {
				t.Errorf("deadline %v, want within [%v, %v]", got.deadline, tt.wantMin, tt.wantMax)
			}
		})
	}
	// Without the header the middleware allocates nothing.
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	noop := mw.Deadline(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if allocs := testing.AllocsPerRun(100, func() { noop.ServeHTTP(nil, req) }); allocs != 0 {
		t.Errorf("Deadline without a header allocates %v times", allocs)
	}
}
