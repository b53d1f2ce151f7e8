package httpgate_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// A request admitted before its *http.Request existed is served as under
// Guard: the handler's holder owns the slots (Held counts them, Acquire
// adds to them, SetOutcome decides how they end) and releases each once
// when the handler returns, panics included.
func TestServeAdmitted(t *testing.T) {
	mw, err := httpgate.New(httpgate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	route := newGate(t, admit.Config{Name: "route", Capacity: 1})
	up := newGate(t, admit.Config{Name: "up", Capacity: 2})
	extra := newGate(t, admit.Config{Name: "extra", Capacity: 1})

	a, err := mw.TryAdmit(route, admit.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mw.TryAdmit(route, admit.Request{}); err == nil {
		t.Fatal("a full gate admitted")
	}
	if err := a.TryAcquire(up, admit.Request{Weight: 2}); err != nil {
		t.Fatal(err)
	}
	if route.Stats().InUse != 1 || up.Stats().InUse != 2 {
		t.Fatalf("in use: route %d, up %d", route.Stats().InUse, up.Stats().InUse)
	}
	var held int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpgate.Acquire(r.Context(), extra); err != nil {
			t.Error(err)
		}
		held = httpgate.Held(r.Context())
		httpgate.SetOutcome(r.Context(), admit.OutcomeDropped)
		w.WriteHeader(http.StatusOK)
	})
	mw.ServeAdmitted(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), h, a)
	if held != 3 {
		t.Fatalf("the handler held %d permits, want 3", held)
	}
	for _, g := range []*admit.Gate{route, up, extra} {
		s := g.Stats()
		if s.InUse != 0 || s.Completed[admit.OutcomeDropped] == 0 {
			t.Fatalf("gate %s after the handler: %+v", g.Name(), s)
		}
	}

	// A panic releases too, recorded as one.
	a, _ = mw.TryAdmit(route, admit.Request{})
	func() {
		defer func() { _ = recover() }()
		mw.ServeAdmitted(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			panic("boom")
		}), a)
	}()
	if s := route.Stats(); s.InUse != 0 || s.Completed[admit.OutcomePanic] != 1 {
		t.Fatalf("after a panic: %+v", s)
	}

	// Release: an admission not served after all.
	a, _ = mw.TryAdmit(route, admit.Request{})
	a.Release(admit.OutcomeError)
	a.Release(admit.OutcomeError) // a second Release does nothing
	if s := route.Stats(); s.InUse != 0 || s.Completed[admit.OutcomeError] != 1 {
		t.Fatalf("after Release: %+v", s)
	}
}

// A malformed deadline header is answered 400, and the admission ends
// dropped.
func TestServeAdmittedBadDeadline(t *testing.T) {
	mw, err := httpgate.New(httpgate.Config{HeaderDeadline: true})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, admit.Config{Name: "g", Capacity: 1})
	a, err := mw.TryAdmit(g, admit.Request{})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set(httpgate.DefaultDeadlineHeader, "soon")
	rec := httptest.NewRecorder()
	mw.ServeAdmitted(rec, r, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served") }), a)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d", rec.Code)
	}
	if s := g.Stats(); s.InUse != 0 || s.Completed[admit.OutcomeDropped] != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestHeaderClass(t *testing.T) {
	for v, want := range map[string]admit.Class{"": admit.ClassCritical, " sheddable ": admit.ClassSheddable,
		"critical-plus": admit.ClassCriticalPlus, "bogus": admit.ClassCritical} {
		if got := httpgate.HeaderClass(v); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}
