package engine

import (
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// A connection whose reads never block (a client that pipelines, here
// a pipeline of requests that are all refused) yields its P after
// maxTurn answers, so admitted work waiting to run is not held behind
// the whole pipeline. On one P (GOMAXPROCS 1, where the order is the
// scheduler's and not chance) connection B's admitted request waits for
// its "upstream"; connection A sends its whole pipeline in one write,
// and A's first request releases B. B must answer within A's first
// two turns (the scheduler takes a yielded goroutine back first once in
// 61 rounds, so now and then A's first turn runs on), not after A's
// whole pipeline.
func TestPipelineYieldsToAdmittedWork(t *testing.T) {
	runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.SetDefaultGOMAXPROCS() })

	var (
		mu      sync.Mutex
		order   []byte // 'a' per refusal on A, 'B' for B's answer
		once    sync.Once
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	note := func(b byte) {
		mu.Lock()
		order = append(order, b)
		mu.Unlock()
	}
	refusal := admit.NewRejectedError("upstream", "default", admit.ReasonFull, 0, 0, time.Second)
	var refusals Refusals
	_, addr := serveEngine(t, Config{Fast: fastFunc(func(w *Response, r *Request) bool {
		if p, _ := r.Path(); p == "/admitted" {
			close(entered)
			<-release // the upstream's answer
			note('B')
			w.Write(200, []byte("Content-Length: 2\r\n"), []byte("ok"))
			return true
		}
		once.Do(func() { close(release) })
		note('a')
		refusals.Write(w, refusal)
		return true
	})})

	b := dialRaw(t, addr)
	if _, err := io.WriteString(b, "GET /admitted HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered
	a := dialRaw(t, addr)
	// The whole pipeline in one write, within the read buffer: A's
	// goroutine reads it at once and could answer all of it without
	// blocking.
	n := 8 * maxTurn
	pipeline := strings.Repeat("GET /r HTTP/1.1\r\nHost: x\r\n\r\n", n)
	if len(pipeline) > initialReadBuffer {
		t.Fatalf("the pipeline (%d bytes) does not fit one read", len(pipeline))
	}
	if _, err := io.WriteString(a, pipeline); err != nil {
		t.Fatal(err)
	}
	readAnswers(t, b, 1)
	readAnswers(t, a, n)
	mu.Lock()
	got := string(order)
	mu.Unlock()
	if i := strings.IndexByte(got, 'B'); i < 1 || i > 2*maxTurn {
		t.Fatalf("order of answers %q: B answered after %d of A's %d refusals, want 1 to %d (A's first two turns)", got, i, n, 2*maxTurn)
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// readAnswers reads n complete answers to GETs from c.
func readAnswers(t *testing.T, c net.Conn, n int) {
	t.Helper()
	methods := make([]string, n)
	for i := range methods {
		methods[i] = "GET"
	}
	var got strings.Builder
	buf := make([]byte, 4096)
	for len(readResponses(t, got.String(), methods...)) < n {
		m, err := c.Read(buf)
		got.Write(buf[:m])
		if err != nil {
			t.Fatalf("after %d answers: %v", strings.Count(got.String(), "HTTP/1.1 "), err)
		}
	}
}
