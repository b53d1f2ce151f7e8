package engine

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// A refusal on the fast path is the answer httpgate.WriteRefusal writes
// through net/http (status, Content-Type, Retry-After, body), plus the
// lines Extra gives, rendered once and kept until Reset.
func TestRefusalsMatchWriteRefusal(t *testing.T) {
	refusal := admit.NewRejectedError("api-quota", "default", admit.ReasonRate, 0, 0, 3*time.Second)
	var calls atomic.Int32
	var version atomic.Value
	version.Store("1")
	f := &Refusals{Extra: func(gate string, retry int) []byte {
		calls.Add(1)
		return []byte("X-Extra: " + gate + " " + version.Load().(string) + "\r\n")
	}}
	_, addr := serveEngine(t, Config{Fast: fastFunc(func(w *Response, r *Request) bool {
		f.Write(w, refusal)
		return true
	})})
	rec := httptest.NewRecorder()
	httpgate.WriteRefusal(rec, httptest.NewRequest("GET", "/", nil), refusal)
	get := func() (*http.Response, string) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for range 3 {
		resp, body := get()
		if resp.StatusCode != rec.Code || body != rec.Body.String() || resp.Header.Get("Retry-After") != rec.Header().Get("Retry-After") ||
			resp.Header.Get("Content-Type") != rec.Header().Get("Content-Type") || resp.Header.Get("X-Extra") != "api-quota 1" {
			t.Fatalf("fast %d %q %v; net/http %d %q %v", resp.StatusCode, body, resp.Header, rec.Code, rec.Body, rec.Header())
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("Extra called %d times for one gate and value, want once", calls.Load())
	}
	version.Store("2")
	f.Reset()
	if resp, _ := get(); resp.Header.Get("X-Extra") != "api-quota 2" {
		t.Fatalf("after Reset: %v", resp.Header)
	}
}
