package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/retry"
)

// rawRequest writes raw bytes to a new connection to base and reads one
// answer.
func rawRequest(t *testing.T, base, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// completed returns how many admissions of the gate ended with o.
func completed(p *Proxy, gate string, o admit.Outcome) uint64 {
	return gateByName(p, gate).Stats().Completed[o]
}

// TestStaleKeyedByInboundRequest: a copy stored for one host is never
// served to another, whether the upstream fails or a gate refuses; copies
// are served for gate refusals (full) too; Vary's headers are part of the
// key.
func TestStaleKeyedByInboundRequest(t *testing.T) {
	var fail atomic.Bool
	b := newBlock()
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			b.ServeHTTP(w, r)
			return
		}
		if fail.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if r.URL.Path == "/lang" {
			w.Header().Set("Vary", "Accept-Language")
			fmt.Fprintf(w, "page in %s", r.Header.Get("Accept-Language"))
			return
		}
		fmt.Fprintf(w, "page of %s", r.Header.Get("X-Forwarded-Host"))
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 1, StaleIfError: time.Minute, MaxAttempts: 1, NoBreaker: true})
	base, c := front(t, p)
	if code, _, _, body := get(t, c, base+"/page", "Host", "tenant-a.example"); code != 200 || body != "page of tenant-a.example" {
		t.Fatalf("tenant-a fresh: %d %q", code, body)
	}
	for _, lang := range []string{"fr", "de"} {
		if code, _, _, body := get(t, c, base+"/lang", "Accept-Language", lang); code != 200 || body != "page in "+lang {
			t.Fatalf("%s fresh: %d %q", lang, code, body)
		}
	}
	fail.Store(true)
	if code, _, hdr, body := get(t, c, base+"/page", "Host", "tenant-b.example"); code != 502 || hdr.Get(StaleHeader) != "" {
		t.Fatalf("tenant-b while the upstream fails: %d %q %s=%q; want its own 502, never tenant-a's copy", code, body, StaleHeader, hdr.Get(StaleHeader))
	}
	if code, _, hdr, body := get(t, c, base+"/page", "Host", "TENANT-A.example"); code != 200 || body != "page of tenant-a.example" || hdr.Get(StaleHeader) != "upstream_502" {
		t.Fatalf("tenant-a while the upstream fails: %d %q %s=%q; want its stale copy", code, body, StaleHeader, hdr.Get(StaleHeader))
	}
	for _, lang := range []string{"fr", "de"} {
		if code, _, _, body := get(t, c, base+"/lang", "Accept-Language", lang); code != 200 || body != "page in "+lang {
			t.Fatalf("%s while the upstream fails: %d %q; want the copy of its own variant", lang, code, body)
		}
	}
	if code, _, hdr, _ := get(t, c, base+"/lang", "Accept-Language", "es"); code != 502 || hdr.Get(StaleHeader) != "" {
		t.Fatalf("a variant never stored: %d %s=%q", code, StaleHeader, hdr.Get(StaleHeader))
	}

	// The upstream gate full: tenant-a gets its copy, tenant-b the refusal.
	fail.Store(false)
	wait := background(c, http.MethodGet, base+"/hold")
	b.next(t)
	if code, _, hdr, body := get(t, c, base+"/page", "Host", "tenant-a.example"); code != 200 || body != "page of tenant-a.example" || hdr.Get(StaleHeader) != "full" {
		t.Fatalf("tenant-a at a full gate: %d %q %s=%q; want its copy, marked full", code, body, StaleHeader, hdr.Get(StaleHeader))
	}
	if code, rb, hdr, _ := get(t, c, base+"/page", "Host", "tenant-b.example"); code != 503 || rb.Reason != "full" || hdr.Get(StaleHeader) != "" {
		t.Fatalf("tenant-b at a full gate: %d %+v stale=%q; want the refusal", code, rb, hdr.Get(StaleHeader))
	}
	close(b.release)
	wait()
}

func TestStaleStorable(t *testing.T) {
	req := func(hdr ...string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	resp := func(hdr ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Add(hdr[i], hdr[i+1])
		}
		return &http.Response{StatusCode: 200, Header: h, ContentLength: 10}
	}
	for _, tc := range []struct {
		name string
		in   *http.Request
		resp *http.Response
		want bool
	}{
		{"plain", req(), resp(), true},
		{"vary on a header", req(), resp("Vary", "Accept-Encoding"), true},
		{"authorization", req("Authorization", "Bearer x"), resp("Cache-Control", "public"), false},
		{"cookie", req("Cookie", "s=1"), resp(), false},
		{"cookie, public answer", req("Cookie", "s=1"), resp("Cache-Control", "public, max-age=60"), true},
		{"set-cookie", req(), resp("Set-Cookie", "s=1"), false},
		{"private", req(), resp("Cache-Control", "max-age=60, Private"), false},
		{"private on a second line", req(), resp("Cache-Control", "max-age=60", "Cache-Control", "private"), false},
		{"no-store", req(), resp("Cache-Control", "no-store"), false},
		{"no-cache", req(), resp("Cache-Control", "no-cache"), false},
		{"vary star", req(), resp("Vary", "Accept-Encoding, *"), false},
		{"upgrade", req("Connection", "Upgrade", "Upgrade", "websocket"), resp(), false},
		{"too big", req(), &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 11}, false},
	} {
		if got := storable(tc.in, tc.resp, 10); got != tc.want {
			t.Errorf("%s: storable %v, want %v", tc.name, got, tc.want)
		}
	}
}

// malformedChunked is a request whose chunked body is malformed: a chunk
// size line that ends in a bare LF.
const malformedChunked = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\nhello\r\n0\r\n\r\n"

// TestClientFaultsNeverCountAgainstUpstream: malformed bodies, stalled
// bodies and clients that leave mid-body are answered 400, 408 and 499
// and never counted by the breaker, ejection or throttling, so 40 of
// them leave every other client served.
func TestClientFaultsNeverCountAgainstUpstream(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, BodyTimeout: 100 * time.Millisecond, EjectAfter: 3,
		Breaker: breaker.Config{MinCalls: 10, OpenFor: time.Hour}})
	base, c := front(t, p)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			resp, body := rawRequest(t, base, malformedChunked)
			var rb struct{ Error string }
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &rb) != nil || rb.Error != codeBadRequest {
				t.Errorf("malformed body %d: %d %q; want 400 {\"error\":%q}", i, resp.StatusCode, body, codeBadRequest)
			}
		})
	}
	wg.Wait()
	// A body that stalls past the body timeout: 408, with the contract.
	for _, raw := range []string{
		"PUT /small HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234",                    // buffered for retries
		"POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n0123456789", // streamed
	} {
		resp, body := rawRequest(t, base, raw)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"error":"REQUEST_TIMEOUT"`) || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("stalled body %q: %d %q; want 408 REQUEST_TIMEOUT in JSON", raw, resp.StatusCode, body)
		}
	}
	// Clients that leave mid-body.
	for range 5 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(conn, "POST /gone HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
		waitBusy(t, p)
		conn.Close()
		waitIdle(t, p, 5*time.Second)
	}
	waitIdle(t, p, 5*time.Second)
	st := p.State()
	if st.Breaker.State != "closed" || st.Breaker.WindowCalls != 0 {
		t.Fatalf("breaker %+v after client faults only: want closed, no call counted", st.Breaker)
	}
	if u := st.Upstreams[0]; u.Failures != 0 || u.Ejected != 0 || !u.Healthy {
		t.Fatalf("upstream %+v after client faults only: want no failure counted", u)
	}
	if n := p.Policy().Stats()[retry.EventThrottled]; n != 0 {
		t.Fatalf("%d requests throttled locally after client faults", n)
	}
	if n := completed(p, GateUpstream, admit.OutcomeDropped); n < 47 {
		t.Fatalf("%d client faults completed as dropped, want 47", n)
	}
	for range 20 {
		if code, _, _, body := get(t, c, base+"/"); code != 200 || body != "ok" {
			t.Fatalf("another client after 47 client faults: %d %q", code, body)
		}
	}
}

// TestStalledUpstreamBodyReleasesSlot: an upstream that sends its headers
// and then nothing is cut after the idle timeout: the slot is freed with
// outcome error, the instance and the breaker count the failure, and
// while it stalled /state showed the instance busy as the gate did.
func TestStalledUpstreamBodyReleasesSlot(t *testing.T) {
	stop, stalled := make(chan struct{}), make(chan struct{}, 1)
	defer close(stop)
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		readRequestHead(c)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
		stalled <- struct{}{}
		<-stop
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, UpstreamIdleTimeout: 150 * time.Millisecond, EjectAfter: 1, EjectFor: time.Hour,
		Breaker: breaker.Config{MinCalls: 1, OpenFor: time.Hour}})
	base, c := front(t, p)
	got := make(chan error, 1)
	go func() {
		resp, err := c.Get(base + "/stall")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		got <- err
	}()
	<-stalled // the instance was picked before the request reached it
	if st := p.State(); st.Upstream.Inflight != 1 || st.Upstreams[0].Inflight != 1 {
		t.Fatalf("while the body stalls: gate inflight %d, instance inflight %d; want both 1", st.Upstream.Inflight, st.Upstreams[0].Inflight)
	}
	if err := <-got; err == nil {
		t.Fatal("a stalled body reached the client whole")
	}
	waitIdle(t, p, 5*time.Second)
	st := p.State()
	if st.Upstreams[0].Inflight != 0 || st.Upstreams[0].Ejected != 1 {
		t.Fatalf("instance %+v after a stalled body: want it ejected, nothing in flight", st.Upstreams[0])
	}
	if st.Breaker.State != "open" {
		t.Fatalf("breaker %+v after a stalled body: want the failure counted (open at one call)", st.Breaker)
	}
	if n := completed(p, GateUpstream, admit.OutcomeError); n != 1 {
		t.Fatalf("stalled body completed as error %d times, want 1 (panic: %d)", n, completed(p, GateUpstream, admit.OutcomePanic))
	}
}

// TestUpstreamIdleCountsOnlyWaitsForUpstream: the idle timeout counts
// only time spent waiting for the upstream's next piece of body; time
// between reads (the proxy writing to a slow client) does not make a
// fast upstream look stalled. A wait longer than the timeout cuts the
// body, and the instance counts the failure.
func TestUpstreamIdleCountsOnlyWaitsForUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Second
		pl := newPool([]*url.URL{{Scheme: "http", Host: "x"}}, nil, 1, time.Hour, time.Now, nil)
		pl.idleTimeout = idle
		m := pl.pick()
		a := pl.newAttempt(t.Context(), m, false)
		a.gotHeaders()
		pr, pw := io.Pipe()
		stop := context.AfterFunc(a.ctx, func() { pr.CloseWithError(context.Cause(a.ctx)) }) // as the transport does
		defer stop()
		a.rc, a.status = pr, 200
		b := a // the answer's body
		third, wrote := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = pw.Write([]byte("chunk"))
			_, _ = pw.Write([]byte("chunk"))
			<-third
			time.Sleep(2 * idle) // the upstream stalls
			_, _ = pw.Write([]byte("chunk"))
		}()
		buf := make([]byte, 5)
		for i := range 2 {
			if _, err := io.ReadFull(b, buf); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			time.Sleep(10 * idle) // writing to a slow client
		}
		close(third)
		if _, err := io.ReadFull(b, buf); !errors.Is(err, errBodyIdle) {
			t.Fatalf("a wait of twice the idle timeout: %v; want %v", err, errBodyIdle)
		}
		b.Close()
		if st := pl.state()[0]; st.Failures != 0 || st.Ejected != 1 || st.Inflight != 0 {
			t.Fatalf("instance %+v after a stalled body: want it ejected (one failure ejects), nothing in flight", st)
		}
		pw.Close()
		<-wrote
	})
}

// TestCallDeadline: one total deadline bounds the call however many
// attempts it makes; each attempt's wait is cut to what is left, the
// upstream is told what is left, and the answer is 504.
func TestCallDeadline(t *testing.T) {
	// Both ways an attempt is timed: sluice's own client (socket
	// deadlines) and another Transport (the attempt's timer).
	for _, tc := range []struct {
		name      string
		transport func() http.RoundTripper
	}{
		{"sluice's client", func() http.RoundTripper { return nil }},
		{"net/http's transport", func() http.RoundTripper { return &http.Transport{} }},
	} {
		t.Run(tc.name, func(t *testing.T) { testCallDeadline(t, tc.transport) })
	}
}

func testCallDeadline(t *testing.T, transport func() http.RoundTripper) {
	var mu sync.Mutex
	var budgets []float64
	stop := make(chan struct{})
	defer close(stop)
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		v, _ := strconv.ParseFloat(req.Header.Get("Request-Timeout"), 64)
		mu.Lock()
		budgets = append(budgets, v)
		mu.Unlock()
		<-stop // never answers
	})
	// A second's call of 200 ms attempts: four or five fit (a stall of a
	// loaded machine can cost one), each told what is left.
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, HeaderTimeout: 200 * time.Millisecond, CallTimeout: time.Second,
		MaxAttempts: 10, NoBreaker: true, EjectAfter: -1, Transport: transport()})
	base, c := front(t, p)
	start := time.Now()
	code, _, _, body := get(t, c, base+"/slow")
	took := time.Since(start)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "UPSTREAM_TIMEOUT") {
		t.Fatalf("hung upstream: %d %q; want 504 UPSTREAM_TIMEOUT", code, body)
	}
	if took < 600*time.Millisecond || took > 4*time.Second { // it may stop early when a backoff does not fit
		t.Fatalf("the call took %v; want about the 1 s call timeout", took)
	}
	mu.Lock()
	seen := budgets
	mu.Unlock()
	if len(seen) < 2 || len(seen) > 5 {
		t.Fatalf("%d attempts (budgets %v); want 2 to 5 within 1 s of 200 ms each", len(seen), seen)
	}
	for i, b := range seen {
		if b <= 0 || b > 1 || (i > 0 && b >= seen[i-1]) {
			t.Fatalf("attempt budgets %v: want what is left of 1 s, shrinking", seen)
		}
	}

	// An attempt's own timeout longer than the call's: cut to the call's.
	p2 := mustNew(t, Config{Upstreams: []*url.URL{up}, HeaderTimeout: 3 * time.Second, CallTimeout: 300 * time.Millisecond,
		NoBreaker: true, EjectAfter: -1, Transport: transport()})
	base2, c2 := front(t, p2)
	start = time.Now()
	if code, _, _, _ := get(t, c2, base2+"/slow"); code != http.StatusGatewayTimeout {
		t.Fatalf("hung upstream, 3 s attempts in a 300 ms call: %d, want 504", code)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the call took %v: an attempt outlived the call's 300 ms", took)
	}
	waitIdle(t, p, 5*time.Second)
	waitIdle(t, p2, 5*time.Second)
}

// TestRequestTrailersReachUpstream: a chunked request's trailers reach
// the upstream with their values.
func TestRequestTrailersReachUpstream(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s checksum=%s", body, r.Trailer.Get("X-Checksum"))
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}})
	base, _ := front(t, p)
	resp, body := rawRequest(t, base, "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"+
		"5\r\nhello\r\n0\r\nX-Checksum: abc123\r\n\r\n")
	if resp.StatusCode != 200 || body != "hello checksum=abc123" {
		t.Fatalf("got %d %q; want the trailer's value upstream", resp.StatusCode, body)
	}
}

// TestAbortedAnswersOutcomes: an answer the upstream cuts short completes
// as error and one the client abandons as canceled, never as panic.
func TestAbortedAnswersOutcomes(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	up := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial")
		if req.URL.Path == "/cut" {
			return // close: the answer is cut short
		}
		<-stop // trickle nothing more until the client leaves
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxAttempts: 1, NoBreaker: true})
	base, c := front(t, p)
	resp, err := c.Get(base + "/cut")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("an answer cut short upstream reached the client whole")
	}
	waitIdle(t, p, 5*time.Second)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "GET /leave HTTP/1.1\r\nHost: x\r\n\r\n")
	waitBusy(t, p)
	time.Sleep(20 * time.Millisecond) // past the headers, into the body
	conn.Close()
	waitIdle(t, p, 5*time.Second)
	if e, cn, pn := completed(p, GateUpstream, admit.OutcomeError), completed(p, GateUpstream, admit.OutcomeCanceled),
		completed(p, GateUpstream, admit.OutcomePanic); e != 1 || cn != 1 || pn != 0 {
		t.Fatalf("outcomes: error %d, canceled %d, panic %d; want 1, 1, 0", e, cn, pn)
	}
}
