package load

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// classServer answers by request number: every 10th a sluice-envelope 503,
// every 10th+1 a bare 429, every 10th+2 a 500, every 10th+3 a hijacked and
// closed connection (a transport error), the rest 200. It counts what it
// sent, so the driver's classes can be checked exactly.
type classServer struct {
	n                                  atomic.Int64
	ok, refused503, refused429, err500 atomic.Int64
	hungUp                             atomic.Int64
}

func (s *classServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	switch s.n.Add(1) % 10 {
	case 0:
		s.refused503.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"BUSY","gate":"disk","reason":"full"}`)
	case 1:
		s.refused429.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down")
	case 2:
		s.err500.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	case 3:
		s.hungUp.Add(1)
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	default:
		s.ok.Add(1)
		io.WriteString(w, "ok")
	}
}

func TestOutcomeClassesReconcileExactly(t *testing.T) {
	cs := &classServer{}
	srv := serve(t, cs.ServeHTTP)
	st, end := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: srv.URL + "/x", Method: "POST", Body: []byte("payload")}},
		Shape:   mustShape(t, 400, 500*time.Millisecond), Workers: 8,
	})
	if end != EndDone || len(st.Windows) != 1 {
		t.Fatalf("end %q, %d windows", end, len(st.Windows))
	}
	c := st.Windows[0].Counts
	if c.Scheduled != 200 || c.Dropped != 0 || c.Sent != 200 {
		t.Fatalf("scheduled %d sent %d dropped %d, want 200/200/0", c.Scheduled, c.Sent, c.Dropped)
	}
	// A non-idempotent POST is not retried by net/http, so every request the
	// server saw is one the driver sent.
	if got := cs.n.Load(); got != c.Sent {
		t.Errorf("server saw %d requests, driver sent %d", got, c.Sent)
	}
	if c.OK != cs.ok.Load() {
		t.Errorf("ok %d, server sent %d", c.OK, cs.ok.Load())
	}
	if c.Refused != cs.refused503.Load()+cs.refused429.Load() {
		t.Errorf("refused %d, server refused %d+%d", c.Refused, cs.refused503.Load(), cs.refused429.Load())
	}
	if c.HTTPError != cs.err500.Load() {
		t.Errorf("http_error %d, server sent %d 500s", c.HTTPError, cs.err500.Load())
	}
	if c.TransportError != cs.hungUp.Load() || c.TransportErrors[ErrKindEOF] != c.TransportError {
		t.Errorf("transport errors %d %v, server hung up %d", c.TransportError, c.TransportErrors, cs.hungUp.Load())
	}
	want := []Refusal{
		{Status: 429, Count: cs.refused429.Load()},
		{Status: 503, Gate: "disk", Reason: "full", Count: cs.refused503.Load()},
	}
	if fmt.Sprint(c.Refusals) != fmt.Sprint(want) {
		t.Errorf("refusals %+v, want %+v", c.Refusals, want)
	}
	if c.Status["200"] != c.OK || c.Status["503"] != cs.refused503.Load() || c.Status["500"] != c.HTTPError {
		t.Errorf("status %v", c.Status)
	}
	l := st.Windows[0].Latency
	if l.ResponseTime.Count != c.OK+c.Refused+c.HTTPError || l.OKResponseTime.Count != c.OK {
		t.Errorf("response time counts %d/%d", l.ResponseTime.Count, l.OKResponseTime.Count)
	}
	var tl Second
	for _, s := range st.Windows[0].Timeline {
		tl.Scheduled += s.Scheduled
		tl.OK += s.OK
		tl.Refused += s.Refused
		tl.Errors += s.Errors
	}
	if tl.Scheduled != 200 || tl.OK != c.OK || tl.Refused != c.Refused || tl.Errors != c.HTTPError+c.TransportError {
		t.Errorf("timeline %+v disagrees with counts %+v", tl, c)
	}
}

// blockServer holds every request until release is closed.
func blockServer(t *testing.T) (url string, got *atomic.Int64, release func()) {
	got = &atomic.Int64{}
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		select {
		case <-ch:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(release) // runs before srv.Close (cleanups are LIFO)
	return srv.URL, got, release
}

func TestDropsWithTinyQueue(t *testing.T) {
	url, got, release := blockServer(t)
	// 2 workers hold 2 requests at the server, 3 more wait in the queue; the
	// other 45 of the 50 arrivals find the queue full and are dropped.
	go func() { time.Sleep(400 * time.Millisecond); release() }()
	st, _ := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: url}}, Shape: mustShape(t, 200, 250*time.Millisecond),
		Workers: 2, QueueDepth: 3,
	})
	c := st.Windows[0].Counts
	if c.Scheduled != 50 || c.Sent != 5 || c.Dropped != 45 || c.DropReasons[DropQueueFull] != 45 {
		t.Fatalf("counts %+v: want 50 scheduled, 5 sent, 45 dropped (queue_full)", c)
	}
	if c.OK != 5 || got.Load() != 5 {
		t.Errorf("ok %d, server saw %d; want 5", c.OK, got.Load())
	}
	var dropped int64
	for _, s := range st.Windows[0].Timeline {
		dropped += s.Dropped
	}
	if dropped != 45 {
		t.Errorf("timeline drops %d", dropped)
	}
	if st.QueueDepth != 3 {
		t.Errorf("queue depth %d", st.QueueDepth)
	}
}

func TestDefaultQueueDepth(t *testing.T) {
	if got := DefaultQueueDepth(48, 1200, 100*time.Millisecond); got != 120 {
		t.Errorf("got %d, want 120", got)
	}
	if got := DefaultQueueDepth(48, 100, 100*time.Millisecond); got != 48 {
		t.Errorf("got %d, want 48 (workers)", got)
	}
	c := Config{Targets: []Target{{URL: "http://127.0.0.1:1/"}}, Shape: mustShape(t, 1000, time.Second)}
	d, err := c.withDefaults()
	if err != nil || d.QueueDepth != 500 || d.Workers != 64 {
		t.Errorf("defaults: depth %d workers %d err %v; want 500, 64", d.QueueDepth, d.Workers, err)
	}
}

func TestRequestShape(t *testing.T) {
	type seen struct {
		method, path, hdr, host, body string
		proto                         int
	}
	var mu sync.Mutex
	var got []seen
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("X-Test"), r.Host, string(b), r.ProtoMajor})
		mu.Unlock()
	})}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	h := http.Header{"X-Test": {"yes"}, "Host": {"example.test"}}
	for _, h2 := range []bool{false, true} {
		got = nil
		runOne(t, context.Background(), Config{
			Targets: []Target{{Method: "PUT", URL: base + "/a", Header: h, Body: []byte("abc")}, {URL: base + "/b"}},
			Shape:   mustShape(t, 100, 100*time.Millisecond), Workers: 2, HTTP2: h2,
		})
		mu.Lock()
		if len(got) != 10 {
			t.Fatalf("http2=%v: server saw %d requests", h2, len(got))
		}
		var a, b int
		for _, s := range got {
			want := 1
			if h2 {
				want = 2
			}
			if s.proto != want {
				t.Errorf("http2=%v: proto %d", h2, s.proto)
			}
			switch s.path {
			case "/a":
				a++
				if s.method != "PUT" || s.hdr != "yes" || s.body != "abc" || s.host != "example.test" {
					t.Errorf("request /a = %+v", s)
				}
			case "/b":
				b++
				if s.method != "GET" || s.body != "" {
					t.Errorf("request /b = %+v", s)
				}
			}
		}
		if a != 5 || b != 5 {
			t.Errorf("round robin split %d/%d", a, b)
		}
		mu.Unlock()
	}
}

func TestTransportErrorKinds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	st, _ := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: "http://" + addr + "/"}}, Shape: mustShape(t, 100, 100*time.Millisecond), Workers: 2,
	})
	c := st.Windows[0].Counts
	if c.TransportError != 10 || c.TransportErrors[ErrKindRefused] != 10 {
		t.Errorf("counts %+v, want 10 connection_refused", c)
	}
	if st.Windows[0].Latency.ResponseTime.Count != 0 {
		t.Error("transport errors must not enter the latency histograms")
	}
}

func TestTimeoutIsATransportError(t *testing.T) {
	url, _, _ := blockServer(t)
	st, _ := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: url}}, Shape: mustShape(t, 20, 100*time.Millisecond), Workers: 2,
		Timeout: 50 * time.Millisecond,
	})
	c := st.Windows[0].Counts
	if c.TransportErrors[ErrKindTimeout] != 2 || c.OK != 0 {
		t.Errorf("counts %+v, want 2 timeouts", c)
	}
}

func TestInterruptCountsUnfinishedAndCanceled(t *testing.T) {
	url, _, _ := blockServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	start := time.Now()
	st, end := runOne(t, ctx, Config{
		Targets: []Target{{URL: url}}, Shape: mustShape(t, 100, 2*time.Second), Workers: 3, QueueDepth: 100,
		Windows: 2,
	})
	if end != EndInterrupted || len(st.Windows) != 1 {
		t.Fatalf("end %q, %d windows; want interrupted after 1", end, len(st.Windows))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("interrupt took %v: in-flight requests were not cut", d)
	}
	c := st.Windows[0].Counts
	if c.Unfinished != 3 || c.TransportError != 0 {
		t.Errorf("unfinished %d transport %d, want the 3 in flight unfinished", c.Unfinished, c.TransportError)
	}
	if c.DropReasons[DropCanceled] == 0 || c.Scheduled < 10 || c.Scheduled > 25 {
		t.Errorf("counts %+v: want the queued arrivals dropped as canceled", c)
	}
}

func TestDrainTimeoutAborts(t *testing.T) {
	url, _, _ := blockServer(t)
	st, end := runOne(t, context.Background(), Config{
		Targets: []Target{{URL: url}}, Shape: mustShape(t, 50, 100*time.Millisecond), Workers: 2,
		DrainTimeout: 100 * time.Millisecond, Windows: 3,
	})
	if end != EndAborted || len(st.Windows) != 1 {
		t.Fatalf("end %q windows %d", end, len(st.Windows))
	}
	if c := st.Windows[0].Counts; c.Unfinished != 2 || c.Dropped != 3 {
		t.Errorf("counts %+v: want 2 unfinished, 3 dropped", c)
	}
}

func TestClosedLoopConcurrency(t *testing.T) {
	var inflight, peak atomic.Int64
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inflight.Add(-1)
	})
	st, _ := runOne(t, context.Background(), Config{Targets: []Target{{URL: srv.URL}}, Concurrency: 3, Duration: 200 * time.Millisecond})
	if peak.Load() != 3 {
		t.Errorf("peak concurrency %d, want 3", peak.Load())
	}
	c := st.Windows[0].Counts
	if c.Dropped != 0 || c.OK < 30 || st.Mode != "closed" || st.Concurrency != 3 {
		t.Errorf("step %+v counts %+v", st.Label, c)
	}
}

func TestConfigErrors(t *testing.T) {
	good := Target{URL: "http://127.0.0.1:1/"}
	for name, c := range map[string]Config{
		"no targets": {Shape: mustShape(t, 1, time.Second)},
		"no load":    {Targets: []Target{good}},
		"bad url":    {Targets: []Target{{URL: "::nope"}}, Shape: mustShape(t, 1, time.Second)},
		"bad pick":   {Targets: []Target{good}, Shape: mustShape(t, 1, time.Second), Pick: "random"},
		"negative":   {Targets: []Target{good}, Shape: mustShape(t, 1, time.Second), Workers: -1},
	} {
		if _, _, err := RunStep(context.Background(), c); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "load: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
}

func TestLoggerGetsWindowsAndAborts(t *testing.T) {
	url, _, _ := blockServer(t)
	var b strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return b.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	runOne(t, context.Background(), Config{
		Targets: []Target{{URL: url}}, Shape: mustShape(t, 50, 100*time.Millisecond), Workers: 2,
		DrainTimeout: 100 * time.Millisecond, Logger: logger,
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(b.String(), "did not drain") || !strings.Contains(b.String(), "window done") {
		t.Errorf("log:\n%s", b.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
