package httpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

type refusalBody struct {
	Error  string `json:"error"`
	Gate   string `json:"gate"`
	Reason string `json:"reason"`
}

// TestGuardRefusesWhileFullAndReleases holds the only slot with one
// request, checks that a second is refused per the contract, then lets
// the first finish and checks the books.
func TestGuardRefusesWhileFullAndReleases(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			g := newGate(t, admit.Config{Name: "work", Capacity: 1})
			mw := newMW(t, httpgate.Config{})
			entered, release := make(chan struct{}, 2), make(chan struct{})
			var runs atomic.Int32
			h := mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				if got := httpgate.Held(r.Context()); got != 1 {
					t.Errorf("Held = %d inside a guarded handler, want 1", got)
				}
				entered <- struct{}{}
				<-release
				fmt.Fprint(w, "done")
			}))
			ts := serve(t, proto, h)

			type result struct {
				body string
				err  error
			}
			first := make(chan result, 1)
			go func() {
				_, b, err := get(t, context.Background(), ts, "/")
				first <- result{string(b), err}
			}()
			<-entered

			// Bounded, so a refusal that falls through into the blocking
			// handler fails here instead of hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, body, err := get(t, ctx, ts, "/")
			if err != nil {
				close(release)
				<-first
				t.Fatalf("second request: %v (did the refused request reach the handler?)", err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("second request: status %d, want 503", resp.StatusCode)
			}
			if wantMajor := map[string]int{"http1": 1, "h2c": 2}[proto]; resp.ProtoMajor != wantMajor {
				t.Fatalf("spoke HTTP/%d, want HTTP/%d", resp.ProtoMajor, wantMajor)
			}
			if got := resp.Header.Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q, want 1", got)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			var rb refusalBody
			if err := json.Unmarshal(body, &rb); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if rb != (refusalBody{"BUSY", "work", "full"}) {
				t.Errorf("body = %+v", rb)
			}

			close(release)
			if r := <-first; r.err != nil || r.body != "done" {
				t.Fatalf("first request: %q, %v", r.body, r.err)
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("the guarded handler ran %d times, want once (the refused request must not reach it)", n)
			}
			s := checkInvariants(t, g)
			if s.Admitted != 1 || s.Rejected[admit.ReasonFull] != 1 || s.Completed[admit.OutcomeOK] != 1 || s.Inflight != 0 {
				t.Errorf("stats: admitted %d, rejected full %d, completed ok %d, inflight %d; want 1, 1, 1, 0",
					s.Admitted, s.Rejected[admit.ReasonFull], s.Completed[admit.OutcomeOK], s.Inflight)
			}
		})
	}
}

// TestLazyTakesSlotsOnlyAtThePointOfCost pairs a hot path (answered
// without the expensive step) with a cold one (which needs a slot) while
// the only slot is held: the hot path must succeed and take nothing, the
// cold one must be refused. Either alone cannot tell "hits bypass the
// gate" from "the gate does nothing".
func TestLazyTakesSlotsOnlyAtThePointOfCost(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			g := newGate(t, admit.Config{Name: "disk", Capacity: 1})
			mw := newMW(t, httpgate.Config{})
			h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hot" {
					fmt.Fprint(w, "cached")
					return
				}
				if _, err := httpgate.Acquire(r.Context(), g); err != nil {
					httpgate.Refuse(w, r, err)
					return
				}
				fmt.Fprint(w, "read from disk")
			}))
			ts := serve(t, proto, h)

			// The cold path works while the slot is free.
			if resp, body, err := get(t, context.Background(), ts, "/cold"); err != nil || resp.StatusCode != 200 || string(body) != "read from disk" {
				t.Fatalf("cold with a free slot: %v %v %q", resp, err, body)
			}
			held, err := g.TryAcquire() // someone else's disk read
			if err != nil {
				t.Fatal(err)
			}
			resp, body, err := get(t, context.Background(), ts, "/hot")
			if err != nil || resp.StatusCode != 200 || string(body) != "cached" {
				t.Fatalf("hot with the slot taken: %v %v %q", resp, err, body)
			}
			resp, _, err = get(t, context.Background(), ts, "/cold")
			if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("cold with the slot taken: %v %v, want 503", resp, err)
			}
			held.Done(admit.OutcomeOK)
			s := checkInvariants(t, g)
			// offered: cold, test's own, cold refused; the hot request never reached the gate.
			if s.Offered != 3 || s.Admitted != 2 || s.Rejected.Total() != 1 || s.Inflight != 0 {
				t.Errorf("offered %d admitted %d rejected %d inflight %d; want 3 2 1 0", s.Offered, s.Admitted, s.Rejected.Total(), s.Inflight)
			}
		})
	}
}

// TestOutcomes drives each way a handler that holds a slot can end, and
// checks the outcome the slot is released with.
func TestOutcomes(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			g := newGate(t, admit.Config{Name: "work", Capacity: 4})
			mw := newMW(t, httpgate.Config{})
			h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := httpgate.Acquire(r.Context(), g); err != nil {
					httpgate.Refuse(w, r, err)
					return
				}
				switch r.URL.Path {
				case "/ok":
					w.WriteHeader(http.StatusNotFound) // a 4xx is the client's problem, not the work's
				case "/error":
					http.Error(w, "boom", http.StatusInternalServerError)
				case "/set":
					httpgate.SetOutcome(r.Context(), admit.OutcomeDropped)
					w.WriteHeader(http.StatusBadGateway)
				}
			}))
			ts := serve(t, proto, h)
			for _, p := range []string{"/ok", "/error", "/set"} {
				if _, _, err := get(t, context.Background(), ts, p); err != nil {
					t.Fatal(err)
				}
			}
			s := checkInvariants(t, g)
			want := admit.OutcomeCounts{admit.OutcomeOK: 1, admit.OutcomeError: 1, admit.OutcomeDropped: 1}
			if s.Completed != want || s.Inflight != 0 {
				t.Errorf("completed %v inflight %d, want %v 0", s.Completed, s.Inflight, want)
			}
		})
	}
}

// TestEarlyDoneIsNotReleasedAgain ends a lazily taken permit before the
// handler returns; the holder must leave it alone: one completion, no
// misuse.
func TestEarlyDoneIsNotReleasedAgain(t *testing.T) {
	g := newGate(t, admit.Config{Name: "disk", Capacity: 2})
	mw := newMW(t, httpgate.Config{})
	h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := httpgate.Acquire(r.Context(), g)
		if err != nil {
			httpgate.Refuse(w, r, err)
			return
		}
		p.Done(admit.OutcomeOK) // the read is over; the response is written without the slot
		if n := httpgate.Held(r.Context()); n != 0 {
			t.Errorf("Held after early Done = %d", n)
		}
		fmt.Fprint(w, "ok")
	}))
	ts := serve(t, "http1", h)
	for range 3 {
		if resp, _, err := get(t, context.Background(), ts, "/"); err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
	}
	s := checkInvariants(t, g)
	if s.Completed.Total() != 3 || s.Misuse != 0 {
		t.Errorf("completed %d misuse %d, want 3 0", s.Completed.Total(), s.Misuse)
	}
}

// TestEarlyDoneFromAnotherGoroutine ends the permit from a goroutine the
// handler started, racing the holder's own release when the handler
// returns. An httpgate.Permit has its own lock: exactly one release per
// request, and nothing for the race detector.
func TestEarlyDoneFromAnotherGoroutine(t *testing.T) {
	g := newGate(t, admit.Config{Name: "disk", Capacity: 4})
	mw := newMW(t, httpgate.Config{})
	var wg sync.WaitGroup
	h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := httpgate.Acquire(r.Context(), g)
		if err != nil {
			httpgate.Refuse(w, r, err)
			return
		}
		wg.Go(func() { p.Done(admit.OutcomeOK) })
		fmt.Fprint(w, "ok")
	}))
	ts := serve(t, "http1", h)
	const n = 50
	for range n {
		if resp, _, err := get(t, context.Background(), ts, "/"); err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
	}
	wg.Wait()
	s := checkInvariants(t, g)
	if s.InUse != 0 || s.Completed.Total() != n || s.Misuse != 0 {
		t.Errorf("in use %d completed %d misuse %d; want 0, %d, 0 (a permit ends quietly for its second owner)", s.InUse, s.Completed.Total(), s.Misuse, n)
	}
}

// TestSeveralGatesInOneRequest takes more slots than the holder keeps
// inline and checks that all are released.
func TestSeveralGatesInOneRequest(t *testing.T) {
	gates := make([]*admit.Gate, 5)
	for i := range gates {
		gates[i] = newGate(t, admit.Config{Name: fmt.Sprintf("g%d", i), Capacity: 1})
	}
	mw := newMW(t, httpgate.Config{})
	h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, g := range gates {
			if _, err := httpgate.Acquire(r.Context(), g); err != nil {
				httpgate.Refuse(w, r, err)
				return
			}
		}
		if n := httpgate.Held(r.Context()); n != len(gates) {
			t.Errorf("Held = %d, want %d", n, len(gates))
		}
	}))
	ts := serve(t, "http1", h)
	for range 2 {
		if resp, _, err := get(t, context.Background(), ts, "/"); err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
	}
	for _, g := range gates {
		if s := checkInvariants(t, g); s.Completed[admit.OutcomeOK] != 2 || s.Inflight != 0 {
			t.Errorf("gate %s: completed ok %d inflight %d", s.Gate, s.Completed[admit.OutcomeOK], s.Inflight)
		}
	}
}

// TestAcquireWithoutHolder takes nothing and says why.
func TestAcquireWithoutHolder(t *testing.T) {
	g := newGate(t, admit.Config{Capacity: 1})
	p, err := httpgate.Acquire(context.Background(), g)
	if !errors.Is(err, httpgate.ErrNoHolder) || p != nil {
		t.Fatalf("Acquire without holder = %v, %v", p, err)
	}
	if s := g.Stats(); s.Offered != 0 {
		t.Errorf("offered = %d, want 0", s.Offered)
	}
	if n := httpgate.Held(context.Background()); n != 0 {
		t.Errorf("Held without holder = %d", n)
	}
	httpgate.SetOutcome(context.Background(), admit.OutcomeError) // must not panic
}

// TestGoroutineOutlivingHandler: a goroutine started by the handler that
// is still queued when the handler returns must not keep the slot it is
// granted later; one that asks after the handler returned gets nothing.
func TestGoroutineOutlivingHandler(t *testing.T) {
	g := newGate(t, admit.Config{Name: "up", Capacity: 1, MaxWaiters: 4, MaxWait: -1})
	mw := newMW(t, httpgate.Config{})
	blocker, err := g.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	lateErr := make(chan error, 1)
	afterErr := make(chan error, 1)
	var reqCtx context.Context
	h := mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqCtx = context.WithoutCancel(r.Context()) // keeps the holder, outlives the request
		go func() {
			_, err := httpgate.Acquire(reqCtx, g)
			lateErr <- err
		}()
		eventually(t, "the goroutine to queue", func() bool { return g.Stats().Waiting == 1 })
	}))
	ts := serve(t, "http1", h)
	if resp, _, err := get(t, context.Background(), ts, "/"); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	blocker.Done(admit.OutcomeOK) // now the queued goroutine is granted, after its handler returned
	if err := <-lateErr; !errors.Is(err, httpgate.ErrHandlerDone) {
		t.Fatalf("late grant: err = %v, want ErrHandlerDone", err)
	}
	go func() {
		_, err := httpgate.Acquire(reqCtx, g)
		afterErr <- err
	}()
	if err := <-afterErr; !errors.Is(err, httpgate.ErrHandlerDone) {
		t.Fatalf("Acquire after return: err = %v, want ErrHandlerDone", err)
	}
	s := checkInvariants(t, g)
	if s.Inflight != 0 || s.Completed[admit.OutcomeDropped] != 1 {
		t.Errorf("inflight %d, dropped %d; want 0, 1", s.Inflight, s.Completed[admit.OutcomeDropped])
	}
}

// TestCustomRefusalWriter is used by Guard and by Refuse.
func TestCustomRefusalWriter(t *testing.T) {
	g := newGate(t, admit.Config{Name: "work", Capacity: 1})
	g.Close()
	var mu sync.Mutex
	var seen []admit.Reason
	mw := newMW(t, httpgate.Config{Refusal: func(w http.ResponseWriter, r *http.Request, err error) {
		var re *admit.RejectedError
		if errors.As(err, &re) {
			mu.Lock()
			seen = append(seen, re.Reason())
			mu.Unlock()
		}
		w.WriteHeader(http.StatusTeapot)
	}})
	mux := http.NewServeMux()
	mux.Handle("/guard", mw.Guard(g, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("guarded handler ran on a closed gate")
	})))
	mux.Handle("/lazy", mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpgate.Acquire(r.Context(), g); err != nil {
			httpgate.Refuse(w, r, err)
		}
	})))
	ts := serve(t, "http1", mux)
	for _, p := range []string{"/guard", "/lazy"} {
		resp, _, err := get(t, context.Background(), ts, p)
		if err != nil || resp.StatusCode != http.StatusTeapot {
			t.Fatalf("%s: %v %v, want 418 from the custom writer", p, resp, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != admit.ReasonClosed || seen[1] != admit.ReasonClosed {
		t.Errorf("custom writer saw %v", seen)
	}
}

// TestRefusalDoesNotReadTheBody refuses a POST whose body never arrives:
// the refusal must come back without waiting for it.
func TestRefusalDoesNotReadTheBody(t *testing.T) {
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			g := newGate(t, admit.Config{Name: "work", Capacity: 1})
			held, _ := g.TryAcquire()
			defer held.Done(admit.OutcomeOK)
			mw := newMW(t, httpgate.Config{})
			ts := serve(t, proto, mw.Guard(g, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("handler ran")
			})))
			pr, pw := io.Pipe()
			defer pw.Close()
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/", pr)
			req.ContentLength = 1 << 20
			resp, err := ts.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}

func TestNewRejectsBadHeaderName(t *testing.T) {
	_, err := httpgate.New(httpgate.Config{DeadlineHeader: "Bad Header"})
	if !errors.Is(err, httpgate.ErrInvalidConfig) || !strings.Contains(err.Error(), "Bad Header") {
		t.Fatalf("err = %v", err)
	}
}

func TestGuardNilGatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Guard(nil) did not panic")
		}
	}()
	newMW(t, httpgate.Config{}).Guard(nil, http.NotFoundHandler())
}
