package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/server"
)

// testEngine is the engine the fixture serves HTTP/1.1 with; TestMain
// runs every test once per engine.
var testEngine server.Engine

func TestMain(m *testing.M) {
	os.Exit(testutil.RunOnEngines(m, func(e string) {
		var err error
		if testEngine, err = server.ParseEngine(e); err != nil {
			panic(err)
		}
	}))
}

type syncBuffer = testutil.SyncBuffer

// fixture is a running server with one gate "work" in front of a handler
// that holds its slot until told to finish.
type fixture struct {
	srv     *server.Server
	gate    *admit.Gate
	entered chan struct{}
	finish  chan struct{}
	cancel  context.CancelFunc
	served  chan error
	logs    *syncBuffer
	client  *http.Client
	base    string
	admin   string
}

func start(t *testing.T, gateCfg admit.Config, mutate func(*server.Config)) *fixture {
	t.Helper()
	gm := promsluice.NewMetrics()
	gateCfg.Name = "work"
	gateCfg.Observer = gm
	g, err := admit.New(gateCfg)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httpgate.New(httpgate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{gate: g, entered: make(chan struct{}, 100), finish: make(chan struct{}), served: make(chan error, 1), logs: &syncBuffer{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/cheap", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "cheap") })
	mux.Handle("/work", mw.Guard(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.entered <- struct{}{}
		select {
		case <-f.finish:
			io.WriteString(w, "finished")
		case <-r.Context().Done():
		}
	})))
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) { panic("handler exploded") })
	cfg := server.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Handler: mux, Gates: []*admit.Gate{g}, Metrics: gm,
		Conn:   connlimit.Config{MaxConns: 64},
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if cfg.TLSCertFile == "" && !cfg.H2C {
		cfg.Engine = testEngine // TLS and h2c are net/http's
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Listen(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f.srv, f.cancel = srv, cancel
	f.base = "http://" + srv.Addr().String()
	f.admin = "http://" + srv.AdminAddr().String()
	tr := &http.Transport{}
	f.client = &http.Client{Transport: tr}
	go func() { f.served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.finish:
		default:
			close(f.finish)
		}
		<-f.served
		tr.CloseIdleConnections()
	})
	return f
}

// stop cancels the server and returns what Serve returned.
func (f *fixture) stop() error {
	f.cancel()
	err := <-f.served
	f.served <- err // for Cleanup
	return err
}

type reply struct {
	status int
	header http.Header
	body   string
	close  bool
}

func (f *fixture) get(t *testing.T, url string) (reply, error) {
	t.Helper()
	resp, err := f.client.Get(url)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b), resp.Close}, err
}

func (f *fixture) mustGet(t *testing.T, url string) reply {
	t.Helper()
	r, err := f.get(t, url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r
}

// eventually waits for state that another goroutine reaches.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, cond)
}

func TestAdminEndpoints(t *testing.T) {
	f := start(t, admit.Config{Capacity: 4}, nil)
	if r := f.mustGet(t, f.base+"/cheap"); r.status != 200 || r.body != "cheap" {
		t.Fatalf("/cheap: %+v", r)
	}
	close(f.finish)
	if r := f.mustGet(t, f.base+"/work"); r.status != 200 || r.body != "finished" {
		t.Fatalf("/work: %+v", r)
	}

	if r := f.mustGet(t, f.admin+"/healthz"); r.status != 200 || r.body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz: %+v", r)
	}
	m := f.mustGet(t, f.admin+"/metrics")
	for _, want := range []string{
		"process_cpu_seconds_total",
		"go_goroutines",
		`sluice_admission_offered_total{gate="work",kind="default"} 1`,
		`sluice_admission_completed_total{gate="work",kind="default",outcome="ok"} 1`,
		`sluice_admission_hold_seconds_count{gate="work",kind="default"} 1`,
		"sluice_connections_open",
		`sluice_connections_rejected_total{reason="max_conns"} 0`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	var st server.State
	r := f.mustGet(t, f.admin+"/state")
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatalf("/state %q: %v", r.body, err)
	}
	if len(st.Gates) != 1 {
		t.Fatalf("/state gates: %+v", st.Gates)
	}
	gs := st.Gates[0]
	if gs.Gate != "work" || gs.Capacity != 4 || gs.Offered != 1 || gs.Admitted != 1 || gs.Completed["ok"] != 1 ||
		gs.Inflight != 0 || gs.Waiting != 0 || gs.Rejected["full"] != 0 || len(gs.Rejected) != admit.NumReasons-1 {
		t.Errorf("/state gate: %+v", gs)
	}
	if st.Connections.MaxConns != 64 || st.Connections.Accepted < 1 || st.Draining {
		t.Errorf("/state connections: %+v", st.Connections)
	}
	if err := f.stop(); err != nil {
		t.Errorf("Serve = %v", err)
	}
}

// TestSetGates: gates replaced while the server runs leave /state and
// /metrics, new ones join them and are the ones shutdown closes; the
// retired gate stays open for whatever still holds it.
func TestSetGates(t *testing.T) {
	f := start(t, admit.Config{Capacity: 4}, nil)
	extra, err := admit.New(admit.Config{Name: "extra", Capacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.SetGates([]*admit.Gate{extra, nil}); !errors.Is(err, server.ErrInvalidConfig) {
		t.Fatalf("SetGates with a nil gate: %v", err)
	}
	if err := f.srv.SetGates([]*admit.Gate{extra}); err != nil {
		t.Fatal(err)
	}
	var st server.State
	if err := json.Unmarshal([]byte(f.mustGet(t, f.admin+"/state").body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Gates) != 1 || st.Gates[0].Gate != "extra" || st.Gates[0].Capacity != 3 {
		t.Fatalf("/state gates after SetGates: %+v", st.Gates)
	}
	m := f.mustGet(t, f.admin+"/metrics").body
	if !strings.Contains(m, `sluice_admission_capacity{gate="extra"} 3`) || strings.Contains(m, `gate="work"`) {
		t.Fatalf("/metrics after SetGates:\n%s", m)
	}
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	if !extra.Closed() || f.gate.Closed() {
		t.Fatalf("after shutdown: the current gate closed %v, the retired one %v; want true and false", extra.Closed(), f.gate.Closed())
	}
}

// TestGracefulShutdown: on shutdown the admitted request completes with
// its full answer, the queued one is refused with reason closed, new
// connections are not accepted, and /healthz says draining meanwhile.
func TestGracefulShutdown(t *testing.T) {
	f := start(t, admit.Config{Capacity: 1, MaxWaiters: 4, MaxWait: -1}, func(c *server.Config) { c.ShutdownTimeout = 10 * time.Second })
	admitted := make(chan reply, 1)
	go func() { admitted <- f.mustGet(t, f.base+"/work") }()
	<-f.entered
	queued := make(chan reply, 1)
	go func() {
		r, err := f.get(t, f.base+"/work")
		if err != nil {
			r.body = err.Error()
		}
		queued <- r
	}()
	eventually(t, "the second request to queue", func() bool { return f.gate.Stats().Waiting == 1 })

	f.cancel() // shutdown begins

	var q reply
	select {
	case q = <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("the queued request was not refused when shutdown began")
	}
	if q.status != 503 || !q.close || !strings.Contains(q.body, `"reason":"closed"`) {
		t.Errorf("queued request: %+v, want 503 reason closed with Connection: close", q)
	}
	eventually(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if r := f.mustGet(t, f.admin+"/healthz"); r.status != 503 || r.body != `{"status":"draining"}`+"\n" {
		t.Errorf("/healthz while draining: %+v", r)
	}
	select {
	case err := <-f.served:
		f.served <- err // the cleanup waits for it
		t.Fatalf("Serve returned %v while admitted work was running", err)
	default:
	}

	close(f.finish)
	if a := <-admitted; a.status != 200 || a.body != "finished" {
		t.Errorf("admitted request: %+v, want its full answer", a)
	}
	if err := <-f.served; err != nil {
		t.Errorf("Serve = %v, want a clean shutdown", err)
	}
	f.served <- nil
	s := f.gate.Stats()
	if s.Completed[admit.OutcomeOK] != 1 || s.Rejected[admit.ReasonClosed] != 1 || s.Inflight != 0 || s.Waiting != 0 {
		t.Errorf("gate: completed %v rejected %v inflight %d waiting %d", s.Completed, s.Rejected, s.Inflight, s.Waiting)
	}
	if !strings.Contains(f.logs.String(), "shut down cleanly") {
		t.Errorf("log lacks the clean shutdown record:\n%s", f.logs)
	}
}

// TestShutdownTimeoutCutsShort: work that outlives the timeout is cut,
// and Serve and the log say what was cut.
func TestShutdownTimeoutCutsShort(t *testing.T) {
	f := start(t, admit.Config{Capacity: 1}, func(c *server.Config) { c.ShutdownTimeout = 50 * time.Millisecond })
	done := make(chan error, 1)
	go func() { _, err := f.get(t, f.base+"/work"); done <- err }()
	<-f.entered
	err := f.stop()
	var cut *server.CutShortError
	if !errors.As(err, &cut) || cut.Inflight["work"] != 1 || cut.OpenConns != 1 {
		t.Fatalf("Serve = %v, want a CutShortError with one slot and one connection", err)
	}
	if err := <-done; err == nil {
		t.Error("the cut request succeeded")
	}
	if !strings.Contains(f.logs.String(), "cut work short") || !strings.Contains(f.logs.String(), "gate_work.inflight=1") {
		t.Errorf("log does not report the cut:\n%s", f.logs)
	}
	eventually(t, "the cut handler to release", func() bool { return f.gate.Stats().Inflight == 0 })
}

// TestHealthzWhileMainSaturated: with every main connection taken and the
// gate full, the admin listener still answers at once.
func TestHealthzWhileMainSaturated(t *testing.T) {
	const maxConns = 4
	f := start(t, admit.Config{Capacity: maxConns}, func(c *server.Config) { c.Conn.MaxConns = maxConns })
	var wg sync.WaitGroup
	for range maxConns {
		wg.Go(func() { _, _ = f.get(t, f.base+"/work") })
	}
	for range maxConns {
		<-f.entered
	}
	// A further connection gets connlimit's canned refusal.
	c, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /cheap HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 503")) || !bytes.Contains(b, []byte("Connection: close")) {
		t.Errorf("over-limit connection got %q", b)
	}
	for range 20 {
		start := time.Now()
		if r := f.mustGet(t, f.admin+"/healthz"); r.status != 200 {
			t.Fatalf("/healthz under saturation: %+v", r)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("/healthz took %v under saturation", took)
		}
	}
	var st server.State
	r := f.mustGet(t, f.admin+"/state")
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Connections.Open != maxConns || st.Connections.Rejected["max_conns"] != 1 || st.Gates[0].Inflight != maxConns {
		t.Errorf("/state under saturation: %+v", st)
	}
	close(f.finish)
	wg.Wait()
}

// TestPanicIsLogged: net/http's panic report reaches the logger.
func TestPanicIsLogged(t *testing.T) {
	f := start(t, admit.Config{}, nil)
	if _, err := f.get(t, f.base+"/panic"); err == nil {
		t.Error("panicking handler answered")
	}
	eventually(t, "the panic to be logged", func() bool { return strings.Contains(f.logs.String(), "handler exploded") })
}

func TestListenErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	g, _ := admit.New(admit.Config{})
	tests := []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"bad addr", server.Config{Addr: "not an address", NoAdmin: true}, "main listener"},
		{"admin port in use", server.Config{Addr: "127.0.0.1:0", AdminAddr: busy.Addr().String()}, "admin listener"},
		{"nil gate", server.Config{Addr: "127.0.0.1:0", Gates: []*admit.Gate{g, nil}}, "Gates[1]"},
		{"bad conn config", server.Config{Addr: "127.0.0.1:0", Conn: connlimit.Config{MaxConns: -1}}, "MaxConns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := server.Listen(context.Background(), tt.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestListenReleasesPortsOnError: a failed Listen leaves nothing bound.
func TestListenReleasesPortsOnError(t *testing.T) {
	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	probe, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := probe.Addr().String()
	probe.Close()
	if _, err := server.Listen(context.Background(), server.Config{Addr: addr, AdminAddr: busy.Addr().String()}); err == nil {
		t.Fatal("Listen succeeded with the admin port taken")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("main port still bound after a failed Listen: %v", err)
	}
	l.Close()
}

func TestNoAdmin(t *testing.T) {
	s, err := server.Listen(context.Background(), server.Config{Addr: "127.0.0.1:0", NoAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.AdminAddr() != nil {
		t.Errorf("AdminAddr = %v with NoAdmin", s.AdminAddr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Serve(ctx); err != nil {
		t.Errorf("Serve = %v", err)
	}
	if err := s.Serve(ctx); err == nil {
		t.Error("second Serve succeeded")
	}
}

func TestOnShutdownHooksRun(t *testing.T) {
	var order []string
	var mu sync.Mutex
	hook := func(name string) func() {
		return func() { mu.Lock(); order = append(order, name); mu.Unlock() }
	}
	f := start(t, admit.Config{}, func(c *server.Config) { c.OnShutdown = []func(){hook("a"), hook("b")} })
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ",") != "a,b" {
		t.Errorf("hooks ran %v", order)
	}
	if !f.srv.Draining() {
		t.Error("not draining after shutdown")
	}
}

// TestCloseHijackedNotClean: connections the handler took over are closed
// at shutdown, after the drain, and a shutdown that cut some is not
// reported clean.
func TestCloseHijackedNotClean(t *testing.T) {
	var calls atomic.Int64
	f := start(t, admit.Config{}, func(c *server.Config) {
		c.CloseHijacked = func() int { calls.Add(1); return 2 }
	})
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	logs := f.logs.String()
	if calls.Load() != 1 || strings.Contains(logs, "shut down cleanly") || !strings.Contains(logs, "hijacked=2") {
		t.Fatalf("CloseHijacked called %d times; log:\n%s\nwant one call, the cut counted, no clean shutdown", calls.Load(), logs)
	}
}
