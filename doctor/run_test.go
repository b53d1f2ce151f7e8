package doctor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// handlerTransport serves requests from an http.Handler in memory, so Run
// can be tested inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// Run reads, waits exactly Interval (on the bubble's clock), reads again,
// and diagnoses the recorded stall.
func TestRunWaitsTheInterval(t *testing.T) {
	before, err := os.ReadFile(filepath.Join("testdata", "stalled", "before.prom"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join("testdata", "stalled", "after.prom"))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var scrapes atomic.Int32
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			if scrapes.Add(1) == 1 {
				w.Write(before)
			} else {
				w.Write(after)
			}
		})
		mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"draining":false,"gates":[{"gate":"db","offered":29}]}`)
		})
		start := time.Now()
		d, err := Run(context.Background(), Config{Admin: "127.0.0.1:9090", Interval: 7 * time.Second,
			Client: &http.Client{Transport: handlerTransport{mux}}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Interval != 7 || time.Since(start) != 7*time.Second || scrapes.Load() != 2 {
			t.Errorf("interval %v s, took %v, %d scrapes; want 7 s and 2", d.Interval, time.Since(start), scrapes.Load())
		}
		var stalled bool
		for _, f := range d.Findings {
			stalled = stalled || f.Code == CodeStalled && strings.Contains(f.Seen, "in 7.00 s")
		}
		if !stalled {
			t.Errorf("findings %+v, want a 7 s stall", d.Findings)
		}
		// The context ends the wait between the readings.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := Run(ctx, Config{Admin: "127.0.0.1:9090", Interval: time.Hour,
			Client: &http.Client{Transport: handlerTransport{mux}}}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want the context's deadline", err)
		}
	})
}
