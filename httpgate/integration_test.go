package httpgate_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// TestPanicReleasesSlotAndReachesNetHTTP: a handler that panics while it
// holds a slot gets the slot released (outcome panic), and net/http still
// sees the panic: it logs it and drops the connection or stream.
func TestPanicReleasesSlotAndReachesNetHTTP(t *testing.T) {
	for _, proto := range protos {
		for _, mode := range []string{"lazy", "guard"} {
			t.Run(proto+"/"+mode, func(t *testing.T) {
				g := newGate(t, admit.Config{Name: "work", Capacity: 1})
				mw := newMW(t, httpgate.Config{})
				boom := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if mode == "lazy" {
						if _, err := httpgate.Acquire(r.Context(), g); err != nil {
							httpgate.Refuse(w, r, err)
							return
						}
					}
					panic("kaboom in handler")
				})
				h := mw.Lazy(boom)
				if mode == "guard" {
					h = mw.Guard(g, boom)
				}
				ts := serve(t, proto, h)
				for i := range 2 { // a leaked slot would make the second one a 503
					resp, _, err := get(t, context.Background(), ts, "/")
					if err == nil {
						t.Fatalf("request %d: got %d, want the transport error of a panicking handler", i, resp.StatusCode)
					}
				}
				eventually(t, "net/http to log the panic", func() bool { return strings.Count(ts.Log.String(), "kaboom in handler") >= 2 })
				s := checkInvariants(t, g)
				if s.Completed[admit.OutcomePanic] != 2 || s.Inflight != 0 || s.Rejected.Total() != 0 {
					t.Errorf("completed panic %d inflight %d rejected %d; want 2 0 0", s.Completed[admit.OutcomePanic], s.Inflight, s.Rejected.Total())
				}
			})
		}
	}
}

// TestAbortHandlerWithSetOutcome: a deliberate abort can say why.
func TestAbortHandlerWithSetOutcome(t *testing.T) {
	g := newGate(t, admit.Config{Name: "proxy", Capacity: 1})
	mw := newMW(t, httpgate.Config{})
	ts := serve(t, "http1", mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpgate.SetOutcome(r.Context(), admit.OutcomeCanceled)
		panic(http.ErrAbortHandler)
	})))
	if _, _, err := get(t, context.Background(), ts, "/"); err == nil {
		t.Fatal("aborted request succeeded")
	}
	eventually(t, "the abort to be released", func() bool { return g.Stats().Completed.Total() == 1 })
	if s := checkInvariants(t, g); s.Completed[admit.OutcomeCanceled] != 1 {
		t.Errorf("completed = %v, want one canceled", s.Completed)
	}
}

// TestClientGoneWhileHolding: a client that leaves while its handler holds
// a slot gets the slot released with outcome canceled.
func TestClientGoneWhileHolding(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			g := newGate(t, admit.Config{Name: "work", Capacity: 1})
			mw := newMW(t, httpgate.Config{})
			entered := make(chan struct{})
			ts := serve(t, proto, mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				<-r.Context().Done() // the work notices the client is gone
			})))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { _, _, err := get(t, ctx, ts, "/"); done <- err }()
			<-entered
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("client err = %v", err)
			}
			eventually(t, "the slot to be released", func() bool { return g.Stats().Inflight == 0 })
			if s := checkInvariants(t, g); s.Completed[admit.OutcomeCanceled] != 1 {
				t.Errorf("completed = %v, want one canceled", s.Completed)
			}
		})
	}
}

// TestThousandDisconnectsWhileQueued queues 1,000 requests behind a held
// slot, then has every client leave: each must leave the queue at once,
// counted canceled, none admitted, and the gate must end at inflight 0
// and waiting 0.
// About 2 s under -race: a thousand real clients per protocol queue and
// leave.
func TestThousandDisconnectsWhileQueued(t *testing.T) {
	const n = 1000
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			g := newGate(t, admit.Config{Name: "work", Capacity: 1, MaxWaiters: n, MaxWait: -1})
			mw := newMW(t, httpgate.Config{})
			ts := serve(t, proto, mw.Guard(g, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("a queued request was admitted")
			})))
			held, err := g.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					_, _, err := get(t, ctx, ts, "/")
					errs <- err
				})
			}
			eventually(t, "all requests to queue", func() bool { return g.Stats().Waiting == n })
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("client err = %v, want canceled", err)
				}
			}
			eventually(t, "the queue to empty", func() bool { return g.Stats().Waiting == 0 })
			held.Done(admit.OutcomeOK)
			s := checkInvariants(t, g)
			if s.Rejected[admit.ReasonCanceled] != n || s.Admitted != 1 || s.Inflight != 0 || s.Waiting != 0 {
				t.Errorf("canceled %d admitted %d inflight %d waiting %d; want %d 1 0 0",
					s.Rejected[admit.ReasonCanceled], s.Admitted, s.Inflight, s.Waiting, n)
			}
		})
	}
}
