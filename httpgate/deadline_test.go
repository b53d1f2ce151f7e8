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
		{"2s", 2 * time.Second},
		{"0.5s", 500 * time.Millisecond},
		{"500ms", 500 * time.Millisecond},
		{"1.25ms", 1250 * time.Microsecond},
		{"1.5m", 90 * time.Second},
		{" 250ms ", 250 * time.Millisecond},
		{"0.000000001ms", time.Nanosecond}, // below a nanosecond: still positive
		{"99999999999999999999999ms", (1 << 30) * time.Second},
		{"99999999999m", (1 << 30) * time.Second},
	}
	for _, tt := range good {
		got, err := httpgate.ParseDeadline(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDeadline(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []string{"", " ", "0", "0.0", "-1", "+1", "1e3", "1.", ".5", "1.2.3", "1,2", "1 2",
		"0x10", "1.0000000001", "NaN", "inf", "１",
		"0s", "0ms", "-2s", "+2s", "2 s", "2S", "2MS", "1h", "1us", "1ns", "1m30s", "s", "ms", ".5s", "1.s", "1e3ms", "2sec"}
	for _, in := range bad {
		if d, err := httpgate.ParseDeadline(in); !errors.Is(err, httpgate.ErrBadDeadline) {
			t.Errorf("ParseDeadline(%q) = %v, %v; want ErrBadDeadline", in, d, err)
		}
	}
}

// FuzzParseDeadline checks that the parser never panics, accepts only
// positive values, and agrees with strconv.ParseFloat on what it accepts.
func FuzzParseDeadline(f *testing.F) {
	for _, s := range []string{"2", "0.25", " 1.5 ", "0", "-1", "1e3", "1.0000000001", "99999999999", "", "1.", "\t3\t", "2s", "500ms", "1.5m", "0ms"} {
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
		num, unit := strings.Trim(s, " \t"), 1.0
		for _, u := range []struct {
			suffix  string
			seconds float64
		}{{"ms", 0.001}, {"s", 1}, {"m", 60}} {
			if rest, ok := strings.CutSuffix(num, u.suffix); ok {
				num, unit = rest, u.seconds
				break
			}
		}
		f64, perr := strconv.ParseFloat(num, 64)
		if perr != nil && !errors.Is(perr, strconv.ErrRange) {
			t.Fatalf("accepted %q, which ParseFloat rejects (number %q): %v", s, num, perr)
		}
		f64 *= unit
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
		mw := newMW(t, httpgate.Config{HeaderDeadline: true})
		held, _ := g.TryAcquire()
		h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := httpgate.Acquire(r.Context(), g); err != nil {
				httpgate.Refuse(w, r, err)
			}
		}))
		start := time.Now()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Request-Timeout", "500ms")
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

// TestDeadlineHeaderIsBounded: Guard and Lazy read the header only when
// asked to; a budget above MaxDeadline is lowered to it and one below
// MinDeadline raised to it; a custom header name is honoured; a negative
// MaxDeadline ignores the header.
func TestDeadlineHeaderIsBounded(t *testing.T) {
	tests := []struct {
		name   string
		cfg    httpgate.Config
		header string
		value  string
		want   time.Duration // 0: no deadline
	}{
		{"off by default", httpgate.Config{}, "Request-Timeout", "1", 0},
		{"off by default ignores garbage", httpgate.Config{}, "Request-Timeout", "soon", 0},
		{"within bound", httpgate.Config{HeaderDeadline: true}, "Request-Timeout", "3", 3 * time.Second},
		{"with a unit", httpgate.Config{HeaderDeadline: true}, "Request-Timeout", "2s", 2 * time.Second},
		{"in milliseconds", httpgate.Config{HeaderDeadline: true}, "Request-Timeout", "250ms", 250 * time.Millisecond},
		{"above default bound", httpgate.Config{HeaderDeadline: true}, "Request-Timeout", "3600", httpgate.DefaultMaxDeadline},
		{"below default floor", httpgate.Config{HeaderDeadline: true}, "Request-Timeout", "10ms", httpgate.DefaultMinDeadline},
		{"custom bound", httpgate.Config{HeaderDeadline: true, MaxDeadline: 2 * time.Second}, "Request-Timeout", "5", 2 * time.Second},
		{"custom floor", httpgate.Config{HeaderDeadline: true, MinDeadline: time.Second}, "Request-Timeout", "0.2", time.Second},
		{"no floor", httpgate.Config{HeaderDeadline: true, MinDeadline: -1}, "Request-Timeout", "10ms", 10 * time.Millisecond},
		{"custom header", httpgate.Config{HeaderDeadline: true, DeadlineHeader: "x-budget"}, "X-Budget", "1.5", 1500 * time.Millisecond},
		{"other header ignored", httpgate.Config{HeaderDeadline: true, DeadlineHeader: "x-budget"}, "Request-Timeout", "1", 0},
		{"disabled", httpgate.Config{HeaderDeadline: true, MaxDeadline: -1}, "Request-Timeout", "1", 0},
		{"disabled ignores garbage", httpgate.Config{HeaderDeadline: true, MaxDeadline: -1}, "Request-Timeout", "soon", 0},
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
			mw := newMW(t, httpgate.Config{HeaderDeadline: true})
			ts := serve(t, proto, mw.Lazy(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("handler ran with a malformed deadline")
			})))
			for _, hdr := range [][]string{
				{"Request-Timeout", "soon"},
				{"Request-Timeout", "-1"},
				{"Request-Timeout", "2 s"},
				{"Request-Timeout", "1h"},
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
		mw := newMW(t, httpgate.Config{HeaderDeadline: true})
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

// TestClientCannotCutBelowTheFloor: however small the budget a client
// sends, the handler keeps at least MinDeadline, over a real socket.
func TestClientCannotCutBelowTheFloor(t *testing.T) {
	mw := newMW(t, httpgate.Config{HeaderDeadline: true, MinDeadline: time.Minute, MaxDeadline: time.Hour})
	left := make(chan time.Duration, 1)
	ts := serve(t, "http1", mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		if !ok {
			left <- -1
			return
		}
		left <- time.Until(dl)
	})))
	for _, v := range []string{"0.000000001", "1ms", "0.01", "10ms", "1s"} {
		resp, _, err := get(t, context.Background(), ts, "/", "Request-Timeout", v)
		if err != nil {
			t.Fatal(err)
		}
		if got := <-left; resp.StatusCode != 200 || got < 59*time.Second || got > time.Minute {
			t.Errorf("budget %q: status %d, handler had %v; want 200 and the 1m floor", v, resp.StatusCode, got)
		}
	}
}

func TestNewRejectsFloorAboveBound(t *testing.T) {
	_, err := httpgate.New(httpgate.Config{MinDeadline: time.Minute, MaxDeadline: time.Second})
	if !errors.Is(err, httpgate.ErrInvalidConfig) || !strings.Contains(err.Error(), "MinDeadline") {
		t.Fatalf("err = %v", err)
	}
	if _, err := httpgate.New(httpgate.Config{MinDeadline: time.Minute, MaxDeadline: -1}); err != nil {
		t.Fatalf("a floor with the header ignored: %v", err)
	}
}
