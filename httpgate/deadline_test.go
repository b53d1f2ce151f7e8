package httpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

func TestParseDeadline(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"2", 2 * time.Second},
		{"0.25", 250 * time.Millisecond},
		{" 1.5\t", 1500 * time.Millisecond},
		{"0.000000001", time.Nanosecond},
		{"10.123456789", 10*time.Second + 123456789},
		{"007", 7 * time.Second},
		{"99999999999999999999999", (1 << 30) * time.Second}, // saturates instead of overflowing
	}
	for _, tt := range good {
		got, err := httpgate.ParseDeadline(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDeadline(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []string{"", " ", "0", "0.0", "-1", "+1", "1e3", "1s", "500ms", "1.", ".5", "1.2.3", "1,2", "1 2",
		"0x10", "1.0000000001", "NaN", "inf", "１"}
	for _, in := range bad {
		if d, err := httpgate.ParseDeadline(in); !errors.Is(err, httpgate.ErrBadDeadline) {
			t.Errorf("ParseDeadline(%q) = %v, %v; want ErrBadDeadline", in, d, err)
		}
	}
}

// FuzzParseDeadline checks that the parser never panics, accepts only
// positive values, and agrees with strconv.ParseFloat on what it accepts.
func FuzzParseDeadline(f *testing.F) {
	for _, s := range []string{"2", "0.25", " 1.5 ", "0", "-1", "1e3", "1.0000000001", "99999999999", "", "1.", "\t3\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := httpgate.ParseDeadline(s)
		if err != nil {
			if !errors.Is(err, httpgate.ErrBadDeadline) {
				t.Fatalf("error %v does not wrap ErrBadDeadline", err)
			}
			return
		}
		if d <= 0 || d > (1<<30)*time.Second+time.Second {
			t.Fatalf("ParseDeadline(%q) = %v: out of range", s, d)
		}
		f64, perr := strconv.ParseFloat(strings.Trim(s, " \t"), 64)
		if perr != nil && !errors.Is(perr, strconv.ErrRange) {
			t.Fatalf("accepted %q, which ParseFloat rejects: %v", s, perr)
		}
		if f64 < 1<<30 && math.Abs(f64-d.Seconds()) > 1e-6*max(1, f64) {
			t.Fatalf("ParseDeadline(%q) = %v, ParseFloat says %v", s, d, f64)
		}
	})
}

// TestDeadlineHeaderBoundsTheWait: time spent queued counts against the
// client's budget, and the waiter is refused with reason deadline when it
// runs out. Fake time (synctest), real handler chain.
func TestDeadlineHeaderBoundsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, admit.Config{Name: "disk", Capacity: 1, MaxWaiters: 8, MaxWait: time.Minute})
		mw := newMW(t, httpgate.Config{})
		held, _ := g.TryAcquire()
		h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := httpgate.Acquire(r.Context(), g); err != nil {
				httpgate.Refuse(w, r, err)
			}
		}))
		start := time.Now()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Request-Timeout", "0.5")
		h.ServeHTTP(rec, req)
		if waited := time.Since(start); waited != 500*time.Millisecond {
			t.Errorf("waited %v, want exactly the 500ms budget", waited)
		}
		var rb refusalBody
		if err := json.Unmarshal(rec.Body.Bytes(), &rb); err != nil || rec.Code != 503 || rb.Reason != "deadline" {
			t.Errorf("got %d %q, want 503 reason deadline", rec.Code, rec.Body)
		}
		held.Done(admit.OutcomeOK)
		if s := checkInvariants(t, g); s.Rejected[admit.ReasonDeadline] != 1 {
			t.Errorf("rejected = %v", s.Rejected)
		}
	})
}

// TestDeadlineHeaderIsBounded: a budget above MaxDeadline is lowered to
// it; a custom header name is honoured; a negative MaxDeadline ignores
// the header.
func TestDeadlineHeaderIsBounded(t *testing.T) {
	tests := []struct {
		name   string
		cfg    httpgate.Config
		header string
		value  string
		want   time.Duration // 0: no deadline
	}{
		{"within bound", httpgate.Config{}, "Request-Timeout", "3", 3 * time.Second},
		{"above default bound", httpgate.Config{}, "Request-Timeout", "3600", httpgate.DefaultMaxDeadline},
		{"custom bound", httpgate.Config{MaxDeadline: 2 * time.Second}, "Request-Timeout", "5", 2 * time.Second},
		{"custom header", httpgate.Config{DeadlineHeader: "x-budget"}, "X-Budget", "1.5", 1500 * time.Millisecond},
		{"other header ignored", httpgate.Config{DeadlineHeader: "x-budget"}, "Request-Timeout", "1", 0},
		{"disabled", httpgate.Config{MaxDeadline: -1}, "Request-Timeout", "1", 0},
		{"disabled ignores garbage", httpgate.Config{MaxDeadline: -1}, "Request-Timeout", "soon", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mw := newMW(t, tt.cfg)
				var got time.Duration
				h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if dl, ok := r.Context().Deadline(); ok {
						got = time.Until(dl)
					}
				}))
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set(tt.header, tt.value)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 || got != tt.want {
					t.Errorf("status %d, deadline in %v; want 200, %v", rec.Code, got, tt.want)
				}
			})
		})
	}
}

// TestMalformedDeadlineHeader is answered 400 over a real socket, naming
// the header, and the handler does not run.
func TestMalformedDeadlineHeader(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			mw := newMW(t, httpgate.Config{})
			ts := serve(t, proto, mw.Lazy(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("handler ran with a malformed deadline")
			})))
			for _, hdr := range [][]string{
				{"Request-Timeout", "soon"},
				{"Request-Timeout", "-1"},
				{"Request-Timeout", "1", "Request-Timeout", "2"},
			} {
				resp, body, err := get(t, context.Background(), ts, "/", hdr...)
				if err != nil {
					t.Fatal(err)
				}
				var b struct{ Error, Header, Detail string }
				if err := json.Unmarshal(body, &b); err != nil {
					t.Fatalf("body %q: %v", body, err)
				}
				if resp.StatusCode != 400 || b.Error != "BAD_DEADLINE" || b.Header != "Request-Timeout" || b.Detail == "" {
					t.Errorf("%v: %d %+v", hdr, resp.StatusCode, b)
				}
			}
		})
	}
}

// TestDeadlineEndsHeldWorkAsCanceled: work that outlives the client's
// budget is released with outcome canceled.
func TestDeadlineEndsHeldWorkAsCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, admit.Config{Name: "disk", Capacity: 1})
		mw := newMW(t, httpgate.Config{})
		h := mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			if !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				t.Errorf("ctx err = %v", r.Context().Err())
			}
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Request-Timeout", "2")
		h.ServeHTTP(httptest.NewRecorder(), req)
		if s := checkInvariants(t, g); s.Completed[admit.OutcomeCanceled] != 1 || s.Inflight != 0 {
			t.Errorf("completed %v inflight %d", s.Completed, s.Inflight)
		}
	})
}
