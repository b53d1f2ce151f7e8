package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a real HTTP server on 127.0.0.1 and closes it (and its
// keep-alive connections) when the test ends.
func serve(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// mustShape builds a constant-rate shape or fails the test.
func mustShape(t testing.TB, rate float64, d time.Duration) Shape {
	t.Helper()
	s, err := Constant(rate, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runOne runs a single step and returns its windows, failing the test on a
// config error.
func runOne(t testing.TB, ctx context.Context, cfg Config) (Step, End) {
	t.Helper()
	st, end, err := RunStep(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Windows {
		if err := w.Counts.Reconcile(); err != nil {
			t.Fatalf("window %d does not reconcile: %v (%+v)", w.Index, err, w.Counts)
		}
	}
	return st, end
}
