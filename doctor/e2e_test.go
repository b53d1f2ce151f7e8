package doctor_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/doctor"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/static"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// liveServer is a real sluice server (the server package, real sockets)
// whose one gate guards a handler that holds its slot until released.
type liveServer struct {
	gate    *admit.Gate
	admin   string
	base    string
	release chan struct{}
	client  *http.Client
	wg      sync.WaitGroup
}

// startServer starts the server; with hold false its work completes at once.
func startServer(t *testing.T, capacity int64, hold bool) *liveServer {
	t.Helper()
	gm := promsluice.NewMetrics()
	g, err := admit.New(admit.Config{Name: "upstream", Capacity: capacity, MaxWaiters: 100, MaxWait: -1, Observer: gm})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httpgate.New(httpgate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := &liveServer{gate: g, release: make(chan struct{}), client: &http.Client{Transport: &http.Transport{}}}
	h := mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold {
			select {
			case <-s.release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "done")
	}))
	srv, err := server.Listen(context.Background(), server.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Handler: h,
		Gates: []*admit.Gate{g}, Metrics: gm, Pprof: true, ShutdownTimeout: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.admin = "http://" + srv.AdminAddr().String()
	s.base = "http://" + srv.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		close(s.release)
		s.wg.Wait()
		cancel()
		<-served
		s.client.Transport.(*http.Transport).CloseIdleConnections()
	})
	return s
}

// send starts n requests that each wait for a slot, then hold it.
func (s *liveServer) send(n int) {
	for range n {
		s.wg.Go(func() {
			resp, err := s.client.Get(s.base + "/work")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// afterFirstState runs hook once, when the first /state answer has been
// read: between doctor's two readings.
type afterFirstState struct {
	base http.RoundTripper
	once sync.Once
	hook func()
}

func (a *afterFirstState) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if err == nil && r.URL.Path == "/state" {
		a.once.Do(a.hook)
	}
	return resp, err
}

// End to end: a real server whose two slots are held while its queue
// grows between doctor's readings. doctor must see the queue growing at
// capacity, the stall, and (from the goroutine profile) the callers
// waiting in the gate's queue.
func TestDoctorAgainstRealServer(t *testing.T) {
	s := startServer(t, 2, true)
	s.send(5) // 2 hold their slots, 3 queue
	testutil.Eventually(t, "2 inflight, 3 waiting", func() bool {
		st := s.gate.Stats()
		return st.Inflight == 2 && st.Waiting == 3
	})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &afterFirstState{base: tr, hook: func() {
		s.send(6)
		testutil.Eventually(t, "9 waiting", func() bool { return s.gate.Stats().Waiting == 9 })
	}}}
	d, err := doctor.Run(context.Background(), doctor.Config{Admin: s.admin, Interval: 50 * time.Millisecond, Pprof: true, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, f := range d.Findings {
		codes = append(codes, f.Code)
		if f.Code == doctor.CodeQueueGrowingAtCapacity && (f.Gate != "upstream" || f.Figures["waiting_before"] != 3 || f.Figures["waiting_after"] != 9 || f.Figures["capacity"] != 2) {
			t.Errorf("queue finding figures: %+v", f)
		}
	}
	for _, want := range []string{doctor.CodeQueueGrowingAtCapacity, doctor.CodeStalled, doctor.CodeGoroutinesInGateQueues} {
		if !slices.Contains(codes, want) {
			t.Errorf("findings %v lack %s", codes, want)
		}
	}
	if len(d.Gates) != 1 || d.Gates[0].Gate != "upstream" || d.Gates[0].Inflight != 2 || d.Gates[0].Waiting != 9 {
		t.Errorf("gates %+v", d.Gates)
	}
	var queued int
	for _, g := range d.Goroutines.Groups {
		if g.Where == doctor.WhereGateQueue {
			queued = g.Count
		}
	}
	if queued != 9 {
		t.Errorf("goroutines in gate queues: %d, want 9\n%+v", queued, d.Goroutines)
	}
	if d.Worst() != doctor.Critical {
		t.Errorf("worst %q, want critical", d.Worst())
	}
}

// A healthy server with traffic that completes yields no warning.
func TestDoctorHealthyRealServer(t *testing.T) {
	s := startServer(t, 4, false)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &afterFirstState{base: tr, hook: func() {
		for range 20 {
			resp, err := s.client.Get(s.base + "/work")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}}}
	d, err := doctor.Run(context.Background(), doctor.Config{Admin: s.admin, Interval: 10 * time.Millisecond, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if w := d.Worst(); w == doctor.Warn || w == doctor.Critical {
		t.Errorf("healthy server: %+v", d.Findings)
	}
	if len(d.Gates) != 1 || d.Gates[0].Completed == 0 {
		t.Errorf("gates %+v: want completions", d.Gates)
	}
}

func TestRunErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		cfg  doctor.Config
		want error
	}{
		{doctor.Config{}, doctor.ErrInvalidConfig},
		{doctor.Config{Admin: "ftp://x"}, doctor.ErrInvalidConfig},
		{doctor.Config{Admin: "127.0.0.1:1", Interval: -1}, doctor.ErrInvalidConfig},
		{doctor.Config{Admin: closed}, doctor.ErrUnreachable},
	} {
		if _, err := doctor.Run(context.Background(), c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%+v: err %v, want %v", c.cfg, err, c.want)
		}
	}
	// A canceled context ends the wait between the readings.
	s := startServer(t, 1, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := doctor.Run(ctx, doctor.Config{Admin: s.admin, Interval: time.Hour}); !errors.Is(err, context.Canceled) && !errors.Is(err, doctor.ErrUnreachable) {
		t.Errorf("canceled: %v", err)
	}
}

// End to end: a real static server whose gated streams of a large file go
// to two clients that never read (their small receive buffers fill and
// the server's sendfile waits to write). Both slots stay held and nothing
// completes; doctor must name slow clients, from the goroutines writing
// to them, instead of a hang, a deadlock or a leak.
func TestDoctorNamesSlowClients(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: nothing much on disk
		t.Fatal(err)
	}
	f.Close()
	h, err := static.New(static.Config{Root: dir, WorkLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv, err := server.Listen(context.Background(), server.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Handler: h, Gates: []*admit.Gate{h.Gate()}, Pprof: true, ShutdownTimeout: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		cancel()
		<-served
	}()
	for range 2 {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: slow\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "both slots held by the streams", func() bool { return h.Gate().Stats().Inflight == 2 })
	d, err := doctor.Run(context.Background(), doctor.Config{Admin: "http://" + srv.AdminAddr().String(), Interval: 200 * time.Millisecond, Pprof: true})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, f := range d.Findings {
		codes = append(codes, f.Code)
	}
	if !slices.Contains(codes, doctor.CodeSlowClients) || slices.Contains(codes, doctor.CodeStalled) {
		t.Errorf("findings %v: want slow_clients and no stall", codes)
	}
	writers := 0
	for _, g := range d.Goroutines.Groups {
		if g.Where == doctor.WhereClientWrite {
			writers = g.Count
		}
	}
	if writers < 2 {
		t.Errorf("%d goroutines writing to clients, want the 2 streams\n%+v", writers, d.Goroutines.Groups)
	}
}

// End to end: a retry policy exported by promsluice on a real server's
// admin listener. Between doctor's readings every call meets a failing
// upstream and is retried to its fourth attempt: doctor reads the
// policy's attempts and retries from /metrics and finds 4 attempts per
// original.
func TestDoctorFindsRetryAmplificationOnPromsluice(t *testing.T) {
	gm := promsluice.NewMetrics()
	g, err := admit.New(admit.Config{Name: "upstream", Capacity: 4, Observer: gm})
	if err != nil {
		t.Fatal(err)
	}
	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: 10, MinPerSecond: 1000, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := retry.New(retry.Config{Name: "payments", MaxAttempts: 4, Budget: budget, NoThrottle: true,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := gm.Add(g, pol); err != nil {
		t.Fatal(err)
	}
	calls := func(n int, o retry.Outcome) {
		for range n {
			if _, err := pol.Do(context.Background(), true, func(int, retry.Timeout) retry.Outcome { return o }); err != nil {
				t.Error(err)
			}
		}
	}
	srv, err := server.Listen(context.Background(), server.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Handler: http.NotFoundHandler(),
		Gates: []*admit.Gate{g}, Metrics: gm, ShutdownTimeout: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() { cancel(); <-served }()

	calls(100, retry.Outcome{Accepted: true}) // before: one attempt per call
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &afterFirstState{base: tr, hook: func() { calls(50, retry.Outcome{Retryable: true}) }}}
	d, err := doctor.Run(context.Background(), doctor.Config{Admin: "http://" + srv.AdminAddr().String(), Interval: 20 * time.Millisecond, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Findings {
		if f.Code == doctor.CodeRetriesAmplifying {
			if f.Figures["attempts_per_original"] != 4 || f.Figures["ratio_before"] != 1 {
				t.Errorf("retry finding: %+v; want 4 attempts per original, 1 before", f)
			}
			return
		}
	}
	t.Errorf("no %s finding in %+v", doctor.CodeRetriesAmplifying, d.Findings)
}
