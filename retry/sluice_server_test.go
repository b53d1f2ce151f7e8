package retry

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// TestAgainstSluiceServer: the transport against a real sluice HTTP edge
// (httpgate over an admit gate of one slot). The server's handler context
// carries the deadline the client propagated; a busy gate's 503 with
// Retry-After is waited out when the deadline covers it, and returned at
// once when it does not.
func TestAgainstSluiceServer(t *testing.T) {
	gate, err := admit.New(admit.Config{Name: "work", Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httpgate.New(httpgate.Config{HeaderDeadline: true}) // Guard reads Request-Timeout only when asked
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan time.Duration, 8)
	s := serve(t, mw.Guard(gate, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dl, ok := r.Context().Deadline(); ok {
			left <- time.Until(dl)
		} else {
			left <- -1
		}
		io.WriteString(w, "ok")
	})))

	held, err := gate.TryAcquire() // the server is busy
	if err != nil {
		t.Fatal(err)
	}
	var waited time.Duration
	c, p := client(t, Config{DeadlineMargin: 100 * time.Millisecond, Sleep: func(ctx context.Context, d time.Duration) error {
		waited += d
		held.Done(admit.OutcomeOK) // the slot frees during the wait
		return nil
	}})

	// Deadline shorter than the gate's Retry-After (1 s): the 503 at once.
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	resp, err := get(t, c, ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get(NoRetryHeader) == "" || waited != 0 {
		t.Fatalf("status %d, Retry-After %q, no-retry %q, waited %v: want the server's 503 at once",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(NoRetryHeader), waited)
	}

	// Deadline covering it: waits Retry-After, then gets the slot.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err = get(t, c, ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || waited < time.Second {
		t.Fatalf("status %d after waiting %v, want 200 after ≥ 1s", resp.StatusCode, waited)
	}
	if d := <-left; d <= 0 || d > 4900*time.Millisecond {
		t.Fatalf("handler's deadline %v: want the propagated 5s − 100ms margin or less", d)
	}
	st := p.Stats()
	if st[EventRetryAfterRefused] != 1 || st[EventRetryAfterHonored] != 1 {
		t.Fatalf("Retry-After refused %d honored %d, want 1 and 1", st[EventRetryAfterRefused], st[EventRetryAfterHonored])
	}
}
