package proxy

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// holdingBackend is an upstream that holds each request until release is
// called (or the request ends), counting the requests it holds at once.
type holdingBackend struct {
	url        *url.URL
	entered    chan string
	release    chan struct{}
	now, peak  atomic.Int64
	answerWith string
}

func newHoldingBackend(t *testing.T, answer string) *holdingBackend {
	t.Helper()
	hb := &holdingBackend{entered: make(chan string, 64), release: make(chan struct{}), answerWith: answer}
	hb.url = backend(t, func(w http.ResponseWriter, r *http.Request) {
		n := hb.now.Add(1)
		defer hb.now.Add(-1)
		for p := hb.peak.Load(); n > p && !hb.peak.CompareAndSwap(p, n); p = hb.peak.Load() {
		}
		hb.entered <- r.URL.Path
		select {
		case <-hb.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, hb.answerWith)
	})
	return hb
}

// TestReloadResizesTheRunningGate: a route kept under its name keeps its
// gate. Its two held slots stay held through a reload that raises
// max_inflight to 4; exactly two more requests are admitted, not four (a
// second gate would admit the new capacity again while the old one's
// requests finish), the fifth is refused, and every held request then
// completes. A shrink to 1 admits nobody new until the held slots go.
func TestReloadResizesTheRunningGate(t *testing.T) {
	hb := newHoldingBackend(t, "ok")
	rules := func(n int64) []Route { return []Route{{Name: "slow", PathPrefix: "/slow", MaxInflight: n}} }
	p := mustNew(t, Config{Upstreams: []*url.URL{hb.url}, Routes: rules(2)})
	base, c := front(t, p)
	gate := gateByName(p, "slow")

	var answers []<-chan int
	send := func() {
		ch := make(chan int, 1)
		go func() {
			code, _, _, _ := get(t, c, base+"/slow")
			ch <- code
		}()
		answers = append(answers, ch)
		<-hb.entered
	}
	send()
	send()
	if code, rb, _, _ := get(t, c, base+"/slow"); code != http.StatusServiceUnavailable || rb.Gate != "slow" || rb.Reason != "full" {
		t.Fatalf("third request before the reload: %d %+v; want 503 from gate slow, full", code, rb)
	}

	sum, err := p.Reload(rules(4), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Resized, []string{"slow 2->4"}) || len(sum.Added)+len(sum.Removed) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if g := gateByName(p, "slow"); g != gate {
		t.Fatal("the reload built a new gate for the kept route")
	}
	if s := gate.Stats(); s.InUse != 2 || s.Capacity != 4 {
		t.Fatalf("after the reload the gate holds %d of %d slots; want the 2 held of 4", s.InUse, s.Capacity)
	}
	send()
	send()
	if code, rb, _, _ := get(t, c, base+"/slow"); code != http.StatusServiceUnavailable || rb.Reason != "full" {
		t.Fatalf("fifth request: %d %+v; want 503 full: the 2 old and 2 new requests fill the 4 slots", code, rb)
	}
	if _, err := p.Reload(rules(1), nil); err != nil {
		t.Fatal(err)
	}
	close(hb.release)
	for i, ch := range answers {
		if code := <-ch; code != http.StatusOK {
			t.Errorf("request %d held through the reloads: %d, want 200", i, code)
		}
	}
	if peak := hb.peak.Load(); peak != 4 {
		t.Fatalf("the upstream saw %d requests of the route at once; want 4", peak)
	}
	waitIdle(t, p, 5*time.Second)
	if s := gate.Stats(); s.Capacity != 1 || s.Admitted != 4 {
		t.Fatalf("gate after the shrink: capacity %d, admitted %d; want 1 and 4", s.Capacity, s.Admitted)
	}
}

// TestReloadChangesRoutesQuotasAndUpstreams: routes come and go, a kept
// route's unchanged quota keeps its clients' buckets while a changed one
// starts over, a kept route's queue order changes in place, and new
// requests go to the new upstream list.
func TestReloadChangesRoutesQuotasAndUpstreams(t *testing.T) {
	seenA, seenB := make(chan string, 16), make(chan string, 16)
	upA := backend(t, func(w http.ResponseWriter, r *http.Request) { seenA <- r.URL.Path; _, _ = io.WriteString(w, "a") })
	upB := backend(t, func(w http.ResponseWriter, r *http.Request) { seenB <- r.URL.Path; _, _ = io.WriteString(w, "b") })
	quotaOf := func(burst int) *RouteQuota { return &RouteQuota{Rate: 0.001, Burst: burst, Key: "header:K"} }
	p := mustNew(t, Config{Upstreams: []*url.URL{upA}, Routes: []Route{
		{Name: "kept", PathPrefix: "/kept", Quota: quotaOf(1)},
		{Name: "changed", PathPrefix: "/changed", Quota: quotaOf(1)},
		{Name: "queued", PathPrefix: "/queued", MaxInflight: 2, Queue: 2},
		{Name: "gone", PathPrefix: "/gone", MaxInflight: 1},
	}})
	base, c := front(t, p)
	for _, path := range []string{"/kept", "/changed"} {
		if code, _, _, body := get(t, c, base+path, "K", "alice"); code != http.StatusOK || body != "a" {
			t.Fatalf("%s: %d %q", path, code, body)
		}
		if code, _, _, _ := get(t, c, base+path, "K", "alice"); code != http.StatusTooManyRequests {
			t.Fatalf("%s again: %d, want 429 (burst 1)", path, code)
		}
	}
	queued := gateByName(p, "queued")
	sum, err := p.Reload([]Route{
		{Name: "new", PathPrefix: "/new", MaxInflight: 3},
		{Name: "kept", PathPrefix: "/kept", Quota: quotaOf(1)},
		{Name: "changed", PathPrefix: "/changed", Quota: quotaOf(2)},
		{Name: "queued", PathPrefix: "/queued", MaxInflight: 2, Queue: 2, Queueing: Queueing{Discipline: "lifo"}},
	}, []*url.URL{upB})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Added, []string{"new"}) || !slices.Equal(sum.Removed, []string{"gone"}) || !slices.Equal(sum.NewQuotas, []string{"changed"}) ||
		!slices.Equal(sum.Requeued, []string{"queued"}) || sum.Routes != 4 || sum.Upstreams != 1 || sum.UpstreamsAdded != 1 || sum.UpstreamsRemoved != 1 {
		t.Fatalf("summary %+v", sum)
	}
	if code, _, _, _ := get(t, c, base+"/kept", "K", "alice"); code != http.StatusTooManyRequests {
		t.Fatalf("kept quota after the reload: %d, want 429: alice's bucket is still empty", code)
	}
	if code, _, _, body := get(t, c, base+"/changed", "K", "alice"); code != http.StatusOK || body != "b" {
		t.Fatalf("changed quota after the reload: %d %q, want 200 from the new upstream: a new bucket", code, body)
	}
	if g := gateByName(p, "queued"); g != queued || g.Discipline().String() != "lifo" {
		t.Fatalf("queued route: same gate %v, discipline %v; want the same gate, now lifo", g == queued, g.Discipline())
	}
	if gateByName(p, "gone") != nil || gateByName(p, "new") == nil {
		t.Fatalf("gates after the reload: %v", p.Gates())
	}
	st := p.State()
	if len(st.Routes) != 4 || st.Routes[0].Name != "new" || st.Routes[3].Gate.Discipline != "lifo" || len(st.Upstreams) != 1 || st.Upstreams[0].URL != upB.String() {
		t.Fatalf("/state after the reload: %+v", st)
	}
	if len(seenA) != 2 || len(seenB) != 1 {
		t.Fatalf("upstream A saw %d requests, B %d; want 2 before the reload and 1 after", len(seenA), len(seenB))
	}
}

// TestReloadRefusedChangesNothing: bad rules, bad upstreams and changes
// that need a new gate are refused, and the running rules stay.
func TestReloadRefusedChangesNothing(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	running := []Route{{Name: "a", PathPrefix: "/a", MaxInflight: 2, Queue: 2}, {Name: "b", PathPrefix: "/b", MaxInflight: 1, Limit: Limit{Law: "aimd"}}}
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, Routes: running})
	gates := p.Gates()
	bad, _ := url.Parse("http://h:99999")
	for _, tc := range []struct {
		name      string
		routes    []Route
		upstreams []*url.URL
		want      error
	}{
		{"duplicate name", []Route{{Name: "a"}, {Name: "a"}}, nil, ErrInvalidConfig},
		{"bad upstream", running, []*url.URL{bad}, ErrInvalidConfig},
		{"queue changed", []Route{{Name: "new", PathPrefix: "/new"}, {Name: "a", PathPrefix: "/a", MaxInflight: 4, Queue: 3}}, nil, ErrRestartNeeded},
		{"limit changed", []Route{{Name: "a", PathPrefix: "/a", MaxInflight: 2, Queue: 2}, {Name: "b", PathPrefix: "/b", MaxInflight: 1}}, nil, ErrRestartNeeded},
		{"adaptive ceiling changed", []Route{{Name: "b", PathPrefix: "/b", MaxInflight: 2, Limit: Limit{Law: "aimd"}}}, nil, ErrRestartNeeded},
	} {
		_, err := p.Reload(tc.routes, tc.upstreams)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if !slices.Equal(p.Gates(), gates) || gateByName(p, "a").Capacity() != 2 || len(p.State().Routes) != 2 || p.State().Upstreams[0].URL != up.String() {
			t.Fatalf("%s: the refused reload changed the proxy: %+v", tc.name, p.State())
		}
	}
	for _, g := range gates {
		g.Close()
	}
	p.Close()
}

// TestReloadUnderLoad: clients keep sending while the route's capacity is
// reloaded up and down and routes come and go. The upstream never sees
// more of the route's requests at once than the largest capacity ever set
// (a second gate for a resized route would let through the old and the
// new capacity together), every request is answered, and every slot
// comes back.
func TestReloadUnderLoad(t *testing.T) {
	var now, peak atomic.Int64
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/r" {
			n := now.Add(1)
			defer now.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
		}
		select {
		case <-time.After(time.Duration(rand.IntN(3)) * time.Millisecond):
		case <-r.Context().Done():
		}
	})
	const most = 3
	rules := func(n int64, extra bool) []Route {
		rs := []Route{{Name: "r", PathPrefix: "/r", MaxInflight: n, Quota: &RouteQuota{Rate: 1e6, Burst: 1000}}}
		if extra {
			rs = append(rs, Route{Name: "x", PathPrefix: "/x", MaxInflight: 1})
		}
		return rs
	}
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 16, Routes: rules(most, false)})
	base, c := front(t, p)
	stop := make(chan struct{})
	reloaded := make(chan int)
	go func() {
		n := 0
		defer func() { reloaded <- n }()
		for ; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p.Reload(rules(int64(1+n%most), n%2 == 0), nil); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	var answered atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				path := []string{"/r", "/x", "/"}[(i+j)%3]
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
				if resp, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusServiceUnavailable {
						answered.Add(1)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	if n := <-reloaded; n < 10 {
		t.Fatalf("only %d reloads while the clients ran", n)
	}
	if got := answered.Load(); got != 8*25 {
		t.Fatalf("%d of %d requests answered 200 or 503", got, 8*25)
	}
	if pk := peak.Load(); pk > most {
		t.Fatalf("the upstream saw %d requests of route r at once; its capacity was never above %d", pk, most)
	}
	waitIdle(t, p, 5*time.Second)
}
