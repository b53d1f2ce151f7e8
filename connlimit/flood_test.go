//go:build linux

package connlimit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The flood tests run the server in a child process (this test binary,
// re-executed) whose file-descriptor limit is lowered with Setrlimit, so
// EMFILE really happens there while the parent floods it from a process
// with the normal limit.
const (
	floodChildEnv   = "CONNLIMIT_FLOOD_CHILD"  // mode: "emfile" or "derived"
	floodNoFileEnv  = "CONNLIMIT_FLOOD_NOFILE" // soft RLIMIT_NOFILE for the child
	floodBackoffCap = 100 * time.Millisecond   // the child's MaxAcceptBackoff
	floodNoFile     = 64
)

// floodReport is what the child's /stats returns.
type floodReport struct {
	Stats        Stats
	InnerAccepts int64 // calls to the real listener's Accept
	OpenFDs      int   // descriptors open when the child started serving
}

// countingListener counts calls to the real Accept, to prove there is no
// spin.
type countingListener struct {
	net.Listener
	calls atomic.Int64
}

func (c *countingListener) Accept() (net.Conn, error) {
	c.calls.Add(1)
	return c.Listener.Accept()
}

// runFloodChild is the child's main: serve until stdin closes.
func runFloodChild(mode string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "flood child: "+format+"\n", args...)
		return 1
	}
	limit, err := strconv.ParseUint(os.Getenv(floodNoFileEnv), 10, 64)
	if err != nil {
		return fail("bad %s: %v", floodNoFileEnv, err)
	}
	lower := func() error {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return fmt.Errorf("getrlimit: %w", err)
		}
		rl.Cur = limit
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return fmt.Errorf("setrlimit: %w", err)
		}
		return nil
	}
	if mode != "emfile" {
		if err := lower(); err != nil {
			return fail("%v", err)
		}
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail("listen: %v", err)
	}
	counting := &countingListener{Listener: inner}
	cfg := Config{MaxAcceptBackoff: floodBackoffCap, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}
	switch mode {
	case "emfile":
		// Far above the fd limit, which is lowered only after New (New
		// refuses a MaxConns that does not fit): Accept must hit EMFILE,
		// as when something else uses the descriptors.
		cfg.MaxConns = 1000
	case "derived":
		cfg.Reserve = 24 // MaxConns = limit - 24
	default:
		return fail("unknown mode %q", mode)
	}
	l, err := New(counting, cfg)
	if err != nil {
		return fail("New: %v", err)
	}
	if mode == "emfile" {
		if err := lower(); err != nil {
			return fail("%v", err)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fail("list fds: %v", err)
	}
	openFDs := len(fds) - 1 // minus the directory being read

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(floodReport{Stats: l.Stats(), InnerAccepts: counting.calls.Load(), OpenFDs: openFDs})
	})
	srv := &http.Server{Handler: mux}
	l.ConfigureServer(srv)
	go func() { _ = srv.Serve(l) }()
	fmt.Printf("ADDR %s\n", l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// startFloodChild runs the child and returns its address; the child is
// stopped (stdin closed) and must exit 0 when the test ends.
func startFloodChild(t *testing.T, mode string) net.Addr {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodChildEnv+"="+mode, floodNoFileEnv+"="+strconv.Itoa(floodNoFile))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("flood child: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading child address: %v", err)
	}
	addr, err := net.ResolveTCPAddr("tcp", strings.TrimPrefix(strings.TrimSpace(line), "ADDR "))
	if err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	return addr
}

func (c *rawClient) report() floodReport {
	c.t.Helper()
	resp, body, err := c.get("/stats")
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /stats: %v %v", resp, err)
	}
	var r floodReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		c.t.Fatalf("decoding /stats %q: %v", body, err)
	}
	return r
}

// A flood far above the descriptor limit makes the child's Accept fail
// with EMFILE: the listener backs off instead of spinning, existing
// keep-alive connections keep being served, and once descriptors free up
// everything in the backlog is accepted.
// About 2 s: a child process with a lowered descriptor limit, a flood of
// 300 real connections, and half a second of serving through the shortage.
func TestFloodBeyondFDLimitBacksOffAndKeepsServing(t *testing.T) {
	addr := startFloodChild(t, "emfile")
	keepAlive := dial(t, addr)
	keepAlive.mustGet("/")

	const flood = 300
	start := time.Now()
	conns := make([]net.Conn, 0, flood)
	for range flood {
		c, err := net.DialTimeout("tcp", addr.String(), ioTimeout)
		if err != nil {
			t.Fatalf("flood dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()

	// The shortage lasts a while; the old connection is served throughout.
	var r floodReport
	for range 25 {
		keepAlive.mustGet("/")
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "EMFILE in the child", func() bool {
		r = keepAlive.report()
		return r.Stats.AcceptErrors[AcceptErrEMFILE] > 0
	})
	elapsed := time.Since(start)

	s := r.Stats
	errs := s.AcceptErrors[AcceptErrEMFILE] + s.AcceptErrors[AcceptErrENFILE] + s.AcceptErrors[AcceptErrNoMem] + s.AcceptErrors[AcceptErrOther]
	t.Logf("after %v: child started with %d fds, accepted %d, accept errors %v, back-offs %d, inner Accept calls %d",
		elapsed, r.OpenFDs, s.Accepted, s.AcceptErrors, s.Backoffs, r.InnerAccepts)
	if s.Accepted >= flood {
		t.Fatalf("child accepted %d of %d connections under a limit of %d descriptors: no shortage happened", s.Accepted, flood, floodNoFile)
	}
	if s.Backoffs != errs {
		t.Errorf("back-offs %d, accept errors %d: every temporary error must be followed by a pause", s.Backoffs, errs)
	}
	// One shortage (nothing is freed meanwhile): pauses of 5, 10, 20, 40, 80
	// ms, then the cap. A spinning loop would make thousands of calls.
	if limit := uint64(6 + elapsed/floodBackoffCap + 2); errs > limit {
		t.Errorf("%d accept errors in %v; with back-off at most %d: the accept loop spins", errs, elapsed, limit)
	}
	// Every inner Accept call is accounted for, plus perhaps one in
	// progress.
	if got, want := r.InnerAccepts, int64(s.Accepted+s.Rejected[ReasonMaxConns]+errs); got != want && got != want+1 {
		t.Errorf("inner Accept calls %d, want accepted+rejected+errors = %d (+1 if one is in progress)", got, want)
	}

	// Free the descriptors: the child recovers and drains the backlog.
	for _, c := range conns {
		_ = c.Close()
	}
	eventually(t, "the child to drain the backlog", func() bool {
		r = keepAlive.report()
		return r.Stats.Accepted == flood+1 && r.Stats.Open == 1
	})
	dial(t, addr).mustGet("/")
}

// With the default limit derived from the (lowered) descriptor limit, the
// same kind of flood is refused with 503s before descriptors run out:
// every client gets an answer and Accept never fails.
// Over a second: a child process with a lowered descriptor limit and a
// flood of real connections.
func TestFloodUnderDerivedLimitIsRefusedBeforeEMFILE(t *testing.T) {
	addr := startFloodChild(t, "derived")
	keepAlive := dial(t, addr)
	keepAlive.mustGet("/")
	maxConns := keepAlive.report().Stats.MaxConns
	if maxConns != floodNoFile-24 {
		t.Fatalf("child derived MaxConns %d, want %d from its lowered limit", maxConns, floodNoFile-24)
	}

	const flood = 150
	var (
		wg         sync.WaitGroup
		ok, busy   atomic.Int64
		errMu      sync.Mutex
		clientErrs []string
		accepted   = make(chan *rawClient, flood)
	)
	for range flood {
		wg.Go(func() {
			c := dial(t, addr)
			resp, body, err := c.get("/")
			switch {
			case err != nil:
				errMu.Lock()
				clientErrs = append(clientErrs, err.Error())
				errMu.Unlock()
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
				accepted <- c // keep it open: it holds a slot
			case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, `"max_conns"`):
				busy.Add(1)
				_ = c.conn.Close()
			default:
				errMu.Lock()
				clientErrs = append(clientErrs, resp.Status+" "+body)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(clientErrs) > 0 {
		t.Errorf("%d clients got no proper answer, e.g. %q", len(clientErrs), clientErrs[0])
	}
	if ok.Load() != int64(maxConns-1) || ok.Load()+busy.Load() != flood {
		t.Errorf("%d served, %d refused; want %d served (the limit minus the keep-alive) and the rest refused", ok.Load(), busy.Load(), maxConns-1)
	}
	r := keepAlive.report()
	t.Logf("child started with %d fds; stats %+v", r.OpenFDs, r.Stats)
	for kind, n := range r.Stats.AcceptErrors {
		if n != 0 {
			t.Errorf("%d accept errors of kind %s, want none under the derived limit", n, kind)
		}
	}
	if r.Stats.Rejected[ReasonMaxConns] != uint64(busy.Load()) || r.Stats.Open != maxConns {
		t.Errorf("child rejected %d with %d open; want %d rejected with %d open", r.Stats.Rejected[ReasonMaxConns], r.Stats.Open, busy.Load(), maxConns)
	}
}
