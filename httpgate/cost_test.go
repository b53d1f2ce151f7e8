package httpgate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// A scan costs the whole gate, a point read one slot: while a scan runs a
// point read is refused, and while a point read runs a scan is refused;
// the gate's slot count shows what each was charged.
func TestRouteCostsChargeBySlots(t *testing.T) {
	g := newGate(t, admit.Config{Name: "db", Capacity: 4})
	mw := newMW(t, httpgate.Config{})
	costs, err := httpgate.RouteCosts(map[string]int64{"/scan": 4, "/scan/small": 2})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan int64, 4), make(chan struct{})
	h := mw.GuardFunc(g, costs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- g.InUse()
		<-release
		fmt.Fprint(w, "ok")
	}))
	ts := serve(t, "http1", h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	// inUse waits for the next request to enter the handler and returns
	// the slots in use then; a request refused instead fails the test.
	inUse := func(what string, done <-chan error) int64 {
		t.Helper()
		select {
		case used := <-entered:
			return used
		case err := <-done:
			t.Fatalf("%s never entered the handler (%v)", what, err)
		case <-ctx.Done():
			t.Fatalf("%s: timed out", what)
		}
		return 0
	}

	done := make(chan error, 1)
	go func() { _, _, err := get(t, ctx, ts, "/scan/all"); done <- err }()
	if used := inUse("a scan", done); used != 4 {
		t.Fatalf("a scan holds %d slots, want 4", used)
	}
	if resp, _, err := get(t, ctx, ts, "/item/1"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("point read during a scan: %v %v, want 503", resp, err)
	}
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { _, _, err := get(t, ctx, ts, "/scan/small/x"); done <- err }()
	if used := inUse("a small scan", done); used != 2 {
		t.Fatalf("a small scan holds %d slots, want 2 (longest prefix wins)", used)
	}
	go func() { _, _, err := get(t, ctx, ts, "/item/2"); done <- err }()
	if used := inUse("a point read", done); used != 3 {
		t.Fatalf("a point read next to it: %d slots in use, want 3", used)
	}
	if resp, _, err := get(t, ctx, ts, "/scan"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a full scan with 3 of 4 slots taken: %v %v, want 503", resp, err)
	}
	close(release)
	released = true
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s := checkInvariants(t, g)
	if s.Admitted != 3 || s.Rejected[admit.ReasonFull] != 2 || s.InUse != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRouteCostsValidation(t *testing.T) {
	for _, bad := range []map[string]int64{{"scan": 2}, {"/scan": 0}, {"/scan": admit.MaxCapacity + 1}, {"/x": -3}} {
		if _, err := httpgate.RouteCosts(bad); !errors.Is(err, httpgate.ErrInvalidConfig) {
			t.Errorf("RouteCosts(%v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// A RequestFunc that asks for more than the gate can ever give is a
// wiring mistake: 500, and the gate counts nothing.
func TestGuardFuncInvalidRequestIs500(t *testing.T) {
	g := newGate(t, admit.Config{Capacity: 2})
	mw := newMW(t, httpgate.Config{})
	h := mw.GuardFunc(g, httpgate.Weight(admit.MaxCapacity+1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("handler ran")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	if s := g.Stats(); s.Offered != 0 {
		t.Fatalf("an invalid request was counted: %+v", s)
	}
}

func TestClassHeader(t *testing.T) {
	g := newGate(t, admit.Config{Capacity: 4})
	mw := newMW(t, httpgate.Config{})
	decide := httpgate.WithClassHeader(httpgate.Weight(2), "X-Priority")
	var got admit.Class
	h := mw.GuardFunc(g, decide, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	classes := map[string]admit.Class{
		"sheddable": admit.ClassSheddable, "critical_plus": admit.ClassCriticalPlus,
		"nonsense": admit.ClassCritical, "": admit.ClassCritical,
	}
	for v, want := range classes {
		r := httptest.NewRequest("GET", "/", nil)
		if v != "" {
			r.Header.Set("x-priority", v)
		}
		if req := decide(r); req.Class != want || req.Weight != 2 {
			t.Errorf("header %q: %+v, want class %v weight 2", v, req, want)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	s := g.Stats()
	if s.Classes[admit.ClassSheddable].Admitted != 1 || s.Classes[admit.ClassCriticalPlus].Admitted != 1 || s.Classes[admit.ClassCritical].Admitted != 2 {
		t.Fatalf("per-class admissions %+v", s.Classes)
	}

	mwFn, err := httpgate.ClassFromHeader("X-Priority")
	if err != nil {
		t.Fatal(err)
	}
	inner := mwFn(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = admit.ClassFrom(r.Context()) }))
	for v, want := range classes {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Priority", v)
		inner.ServeHTTP(httptest.NewRecorder(), r)
		if got != want {
			t.Errorf("ClassFromHeader, header %q: class %v, want %v", v, got, want)
		}
	}
	if _, err := httpgate.ClassFromHeader("bad header"); !errors.Is(err, httpgate.ErrInvalidConfig) {
		t.Errorf("ClassFromHeader(bad header) = %v", err)
	}
}
