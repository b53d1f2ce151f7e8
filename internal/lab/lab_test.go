package lab_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/lab"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLab(t *testing.T, cfg lab.Config) *lab.Lab {
	t.Helper()
	l, err := lab.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, ctx context.Context, c *http.Client, method, url string) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}, err
}

func mustDo(t *testing.T, c *http.Client, method, url string) reply {
	t.Helper()
	r, err := do(t, context.Background(), c, method, url)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func waitActive(t *testing.T, l *lab.Lab, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.State().Active != n {
		if time.Now().After(deadline) {
			t.Fatalf("active = %d, want %d", l.State().Active, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWalkthrough runs the documented sequence over a real socket: hold,
// refuse, release, recover, and the final state.
func TestWalkthrough(t *testing.T) {
	l := newLab(t, lab.Config{})
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()
	defer l.Close() // first: ends held work, so srv.Close does not wait out the hold limit
	c := srv.Client()

	if got := mustDo(t, c, "GET", srv.URL+"/state"); got.status != 200 || got.body != `{"active":0,"admitted":0,"rejected":0,"completed":0}`+"\n" {
		t.Fatalf("initial state %d %q", got.status, got.body)
	}
	first := make(chan reply, 1)
	go func() { first <- mustDo(t, c, "GET", srv.URL+"/work") }()
	waitActive(t, l, 1)

	busy := mustDo(t, c, "GET", srv.URL+"/work")
	if busy.status != 503 || busy.header.Get("Retry-After") != "1" || busy.body != `{"error":"BUSY"}`+"\n" ||
		busy.header.Get("Content-Type") != "application/json" {
		t.Fatalf("second /work: %d %v %q", busy.status, busy.header, busy.body)
	}
	if got := mustDo(t, c, "POST", srv.URL+"/release"); got.status != 200 || got.body != `{"released":true}`+"\n" {
		t.Fatalf("release: %d %q", got.status, got.body)
	}
	select {
	case got := <-first:
		if got.status != 200 || got.body != `{"result":"done"}`+"\n" {
			t.Fatalf("first /work: %d %q", got.status, got.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held /work did not complete after /release")
	}
	if got := mustDo(t, c, "GET", srv.URL+"/work"); got.status != 200 || got.body != `{"result":"done"}`+"\n" {
		t.Fatalf("/work after release: %d %q", got.status, got.body)
	}
	if got := mustDo(t, c, "GET", srv.URL+"/state"); got.body != `{"active":0,"admitted":2,"rejected":1,"completed":2}`+"\n" {
		t.Fatalf("final state %q", got.body)
	}
	if s := l.Gate().Stats(); s.Misuse != 0 || s.Inflight != 0 {
		t.Errorf("gate: misuse %d inflight %d", s.Misuse, s.Inflight)
	}
}

// TestHoldLimit: a held /work ends with 504 LAB_WAIT_EXPIRED at the hold
// limit and its slot comes back. Fake time.
func TestHoldLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLab(t, lab.Config{HoldLimit: 30 * time.Second})
		start := time.Now()
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/work", nil))
		if took := time.Since(start); took != 30*time.Second {
			t.Errorf("held for %v, want 30s", took)
		}
		if rec.Code != 504 || rec.Body.String() != `{"error":"LAB_WAIT_EXPIRED"}`+"\n" {
			t.Errorf("got %d %q", rec.Code, rec.Body)
		}
		if s := l.State(); s != (lab.State{Active: 0, Admitted: 1, Rejected: 0, Completed: 1}) {
			t.Errorf("state %+v", s)
		}
	})
}

// TestClientGoneReleases: a client that leaves while holding the slot
// gives it back at once, without waiting for the hold limit.
func TestClientGoneReleases(t *testing.T) {
	l := newLab(t, lab.Config{})
	srv := httptest.NewServer(l.Handler())
	defer srv.Close()
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := do(t, ctx, srv.Client(), "GET", srv.URL+"/work"); done <- err }()
	waitActive(t, l, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client err %v", err)
	}
	waitActive(t, l, 0)
	if s := l.State(); s.Completed != 1 || s.Admitted != 1 {
		t.Errorf("state %+v", s)
	}
	// The slot is free again: a new /work is admitted (and held).
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { _, err := do(t, ctx2, srv.Client(), "GET", srv.URL+"/work"); done <- err }()
	waitActive(t, l, 1)
	cancel2()
	<-done
	waitActive(t, l, 0)
}

// TestClose ends held work and refuses new work, releasing every slot.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLab(t, lab.Config{Slots: 2})
		recs := make([]*httptest.ResponseRecorder, 2)
		for i := range recs {
			recs[i] = httptest.NewRecorder()
			go l.Handler().ServeHTTP(recs[i], httptest.NewRequest("GET", "/work", nil))
		}
		synctest.Wait()
		if a := l.State().Active; a != 2 {
			t.Fatalf("active %d, want 2", a)
		}
		l.Close()
		synctest.Wait()
		for _, rec := range recs {
			if rec.Code != 503 || rec.Body.String() != `{"error":"LAB_CLOSED"}`+"\n" {
				t.Errorf("held work after Close: %d %q", rec.Code, rec.Body)
			}
		}
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/work", nil))
		if rec.Code != 503 || rec.Body.String() != `{"error":"BUSY"}`+"\n" || rec.Header().Get("Connection") != "close" {
			t.Errorf("new work after Close: %d %v %q", rec.Code, rec.Header(), rec.Body)
		}
		if s := l.State(); s != (lab.State{Active: 0, Admitted: 2, Rejected: 1, Completed: 2}) {
			t.Errorf("state %+v", s)
		}
		l.Close() // idempotent
	})
}

// TestSlots: with three slots, three /work are held and the fourth is
// refused.
func TestSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLab(t, lab.Config{Slots: 3})
		for range 3 {
			go l.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/work", nil))
		}
		synctest.Wait()
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/work", nil))
		if rec.Code != 503 {
			t.Errorf("fourth /work: %d", rec.Code)
		}
		rel := httptest.NewRecorder()
		l.Handler().ServeHTTP(rel, httptest.NewRequest("POST", "/release", nil))
		l.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/release", nil)) // twice is fine
		synctest.Wait()
		if s := l.State(); s != (lab.State{Active: 0, Admitted: 3, Rejected: 1, Completed: 3}) {
			t.Errorf("state %+v", s)
		}
	})
}

func TestMethodsAndPaths(t *testing.T) {
	l := newLab(t, lab.Config{})
	for _, tt := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/work", 405},
		{"GET", "/release", 405},
		{"DELETE", "/state", 405},
		{"GET", "/nope", 404},
	} {
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.want {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, rec.Code, tt.want)
		}
	}
	if s := l.State(); s != (lab.State{}) {
		t.Errorf("wrong methods touched the gate: %+v", s)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []lab.Config{{Slots: -1}, {Slots: 1 << 30}, {HoldLimit: -time.Second}} {
		if _, err := lab.New(cfg); !errors.Is(err, lab.ErrInvalidConfig) || !strings.Contains(err.Error(), "lab:") {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
	}
}
