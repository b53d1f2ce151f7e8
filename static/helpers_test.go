package static_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/engine"
	"github.com/sluicehq/sluice/internal/staticfast"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/static"
)

// site is a served handler on a real loopback socket.
type site struct {
	h      *static.Handler
	srv    *testServer
	client *http.Client
	dir    string
}

// testEngine is the HTTP/1.1 front end the tests serve with ("net" or
// "fast"); TestMain runs every test once per engine.
var testEngine = "net"

// testServer is a handler served on a loopback socket by the engine
// under test: net/http's httptest.Server, or sluice's engine with
// static's fast path when the handler is a *static.Handler.
type testServer struct {
	URL      string
	Listener net.Listener
	close    func()
	client   *http.Client
}

func (s *testServer) Client() *http.Client { return s.client }

// Close stops the server after the requests in progress have finished.
func (s *testServer) Close() { s.close() }

func newServer(h http.Handler) *testServer {
	if testEngine == "net" {
		srv := httptest.NewServer(h)
		return &testServer{URL: srv.URL, Listener: srv.Listener, close: srv.Close, client: srv.Client()}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	cfg := engine.Config{Handler: h}
	if sh, ok := h.(*static.Handler); ok {
		cfg.Fast = staticfast.New(sh, staticfast.Config{})
	}
	es := engine.New(cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = es.Serve(l)
	}()
	tr := &http.Transport{}
	return &testServer{URL: "http://" + l.Addr().String(), Listener: l, client: &http.Client{Transport: tr}, close: func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if es.Shutdown(ctx) != nil {
			es.Close()
		}
		<-done
	}}
}

// writeTree creates files (name -> content) under a new temp directory.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// serveDir serves cfg (with Root = dir unless cfg.FS is set) on a real
// socket. Cleanup checks the gate's invariants after the server stopped.
func serveDir(t *testing.T, dir string, cfg static.Config) *site {
	t.Helper()
	if cfg.FS == nil && cfg.Root == "" {
		cfg.Root = dir
	}
	h, err := static.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(h)
	s := &site{h: h, srv: srv, client: srv.Client(), dir: dir}
	t.Cleanup(func() {
		srv.Close()
		checkInvariants(t, h.Gate())
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// checkInvariants asserts the gate's bookkeeping once nothing is in motion:
// nothing held or waiting, every admission completed once, no permit
// released twice.
func checkInvariants(t testing.TB, g *admit.Gate) admit.Stats {
	t.Helper()
	s := g.Stats()
	if s.Inflight != 0 || s.InUse != 0 || s.Waiting != 0 {
		t.Errorf("gate %s: inflight %d, in use %d, waiting %d after all work ended", s.Gate, s.Inflight, s.InUse, s.Waiting)
	}
	if s.Offered != s.Admitted+s.Rejected.Total() {
		t.Errorf("gate %s: offered %d != admitted %d + rejected %d", s.Gate, s.Offered, s.Admitted, s.Rejected.Total())
	}
	if s.Admitted != s.Completed.Total() {
		t.Errorf("gate %s: admitted %d != completed %d", s.Gate, s.Admitted, s.Completed.Total())
	}
	if s.Misuse != 0 {
		t.Errorf("gate %s: %d permits released more than once", s.Gate, s.Misuse)
	}
	return s
}

type response struct {
	status int
	header http.Header
	body   string
	close  bool // the server asked to close the connection
}

// do sends one request with the given header pairs ("Name", "value", ...).
func (s *site) do(t testing.TB, method, path string, hdr ...string) response {
	t.Helper()
	r, err := s.fetch(method, path, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fetch is do for goroutines other than the test's: it returns the error.
func (s *site) fetch(method, path string, hdr ...string) (response, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, s.srv.URL+path, nil)
	if err != nil {
		return response{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := *s.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading body: %w", method, path, err)
	}
	return response{resp.StatusCode, resp.Header, string(b), resp.Close}, nil
}

// async runs fetch on another goroutine; the channel yields the response
// (status 0 after reporting an error).
func (s *site) async(t *testing.T, path string) <-chan response {
	ch := make(chan response, 1)
	go func() {
		r, err := s.fetch(http.MethodGet, path)
		if err != nil {
			t.Error(err)
		}
		ch <- r
	}()
	return ch
}

func (s *site) get(t testing.TB, path string, hdr ...string) response {
	t.Helper()
	return s.do(t, http.MethodGet, path, hdr...)
}

// raw sends a request line verbatim over TCP (no client-side cleaning of
// the path) and returns the response.
func (s *site) raw(t testing.TB, target string) response {
	t.Helper()
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %q: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b), resp.Close}
}

// holdSlots takes every slot of the gate and returns a function that
// gives them back.
func holdSlots(t *testing.T, g *admit.Gate) func() {
	t.Helper()
	var permits []*admit.Permit
	for range g.Capacity() {
		p, err := g.TryAcquire()
		if err != nil {
			t.Fatalf("holding a slot: %v", err)
		}
		permits = append(permits, &p)
	}
	return func() {
		for _, p := range permits {
			p.Done(admit.OutcomeOK)
		}
	}
}

// slowFS wraps an FS: Stat is untouched (never gated, must stay fast);
// Open and Read of files whose name contains match pass through gate
// hooks, so tests can hold a read in the middle.
type slowFS struct {
	fs.FS
	match     string
	opened    chan string  // receives the name on each matching Open (if not nil)
	hold      atomic.Bool  // while true, each matching Read waits for a token on readGate
	waiting   atomic.Int32 // Reads waiting for a token now
	readGate  chan struct{}
	readDelay time.Duration
	stop      chan struct{} // closed by stopWaiting: reads stop waiting for tokens
	stopOnce  sync.Once
}

// stopWaiting lets every blocked and future Read through, so a failing
// test cannot leave a handler stuck. Register it with t.Cleanup after the
// server's own cleanup (cleanups run last-in first-out).
func (s *slowFS) stopWaiting() { s.stopOnce.Do(func() { close(s.stop) }) }

func (s *slowFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(s.FS, name) }

func (s *slowFS) Open(name string) (fs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil || !strings.Contains(name, s.match) {
		return f, err
	}
	if s.opened != nil {
		s.opened <- name
	}
	return &slowFile{File: f, fs: s}, nil
}

type slowFile struct {
	fs.File
	fs *slowFS
}

func (f *slowFile) Read(p []byte) (int, error) {
	if f.fs.hold.Load() {
		f.fs.waiting.Add(1)
		defer f.fs.waiting.Add(-1)
		select {
		case <-f.fs.readGate:
		case <-f.fs.stop:
		}
	}
	if f.fs.readDelay > 0 {
		time.Sleep(f.fs.readDelay)
	}
	return f.File.Read(p)
}

func (f *slowFile) Seek(off int64, whence int) (int64, error) {
	return f.File.(io.Seeker).Seek(off, whence)
}

// eventually waits for state that another goroutine reaches.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, cond)
}

func strconvItoa(n int) string { return fmt.Sprint(n) }

// letOneRead hands a token to a Read waiting in the slow FS, failing the
// test if no Read comes within 5 seconds.
func (s *slowFS) letOneRead(t *testing.T) {
	t.Helper()
	select {
	case s.readGate <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("no read reached the slow file system")
	}
}
