package httpgate_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// discardWriter is a ResponseWriter that keeps nothing, so the benchmarks
// measure the middleware rather than a recorder.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

func benchServe(b *testing.B, h http.Handler) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// BenchmarkGuardAdmitted: the full cost of the middleware on a request
// that gets a slot and answers "ok".
func BenchmarkGuardAdmitted(b *testing.B) {
	g, _ := admit.New(admit.Config{Capacity: 1 << 10})
	mw, _ := httpgate.New(httpgate.Config{})
	benchServe(b, mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	})))
}

// BenchmarkGuardRefused: the cost of writing a refusal.
func BenchmarkGuardRefused(b *testing.B) {
	g, _ := admit.New(admit.Config{Capacity: 1})
	held, _ := g.TryAcquire()
	defer held.Done(admit.OutcomeOK)
	mw, _ := httpgate.New(httpgate.Config{})
	benchServe(b, mw.Guard(g, http.NotFoundHandler()))
}

// BenchmarkLazyNoAcquire: the holder's cost on a request that never takes
// a slot (a cache hit).
func BenchmarkLazyNoAcquire(b *testing.B) {
	mw, _ := httpgate.New(httpgate.Config{})
	benchServe(b, mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	})))
}

// BenchmarkWriteRefusal: the refusal writer alone.
func BenchmarkWriteRefusal(b *testing.B) {
	err := admit.NewRejectedError("disk", "default", admit.ReasonFull, 0, 0, 0)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		httpgate.WriteRefusal(w, req, err)
	}
}

// The client-address key in both forms: over an *http.Request, and over
// Fields as a front end without one calls it (no allocation but the
// key's own string).
func BenchmarkKeyClientIP(b *testing.B) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:4567"
	r.Header.Set("X-Forwarded-For", "198.51.100.7, 10.2.2.2")
	b.Run("KeyFunc", func(b *testing.B) {
		key := httpgate.KeyClientIP(trusted)
		b.ReportAllocs()
		for b.Loop() {
			_ = key(r)
		}
	})
	b.Run("RequestKey", func(b *testing.B) {
		key := httpgate.ClientIPKey(trusted)
		b.ReportAllocs()
		for b.Loop() {
			_ = key(r.RemoteAddr, r.Header)
		}
	})
}
