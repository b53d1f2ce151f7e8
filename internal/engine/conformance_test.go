package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpmatrix"
)

// view is what the echo handler saw of a request: the matrix compares
// it between the engine and net/http.
type view struct {
	Method, RequestURI, Path, RawQuery, Host, Proto string
	Header                                          http.Header
	Body                                            string
	BodyErr                                         bool
	ContentLength                                   int64
	TransferEncoding                                []string
	Close                                           bool
	Trailer                                         http.Header // after the body was read
}

// echo answers with the JSON view of the request, and records every
// request path it was called for.
type echo struct {
	mu   sync.Mutex
	seen []string
}

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.seen = append(e.seen, r.RequestURI)
	e.mu.Unlock()
	b, err := io.ReadAll(r.Body)
	v := view{r.Method, r.RequestURI, r.URL.Path, r.URL.RawQuery, r.Host, r.Proto, r.Header, string(b), err != nil,
		r.ContentLength, r.TransferEncoding, r.Close, r.Trailer}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
	}
	_ = json.NewEncoder(w).Encode(v)
}

func (e *echo) saw(uri string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.seen, uri)
}

// netServer serves h with net/http on a loopback listener.
func netServer(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}
	srv.SetKeepAlivesEnabled(true)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

// exchanged is what a raw exchange got back: the status of each answer
// (in order), the first answer's header and body.
type exchanged struct {
	statuses []int
	header   http.Header
	body     string
	close    bool // the last answer said Connection: close
}

func exchange(t testing.TB, addr, raw string, n int) exchanged {
	t.Helper()
	methods := make([]string, n)
	for i := range methods {
		methods[i] = http.MethodGet
	}
	if strings.HasPrefix(raw, "HEAD ") {
		methods[0] = http.MethodHead
	}
	rs := readResponses(t, rawExchange(t, addr, raw), methods...)
	var x exchanged
	for i, r := range rs {
		b, _ := io.ReadAll(r.Body)
		if i == 0 {
			x.header, x.body = r.Header, string(b)
		}
		x.statuses = append(x.statuses, r.StatusCode)
		x.close = r.Close
	}
	return x
}

// The request matrix: every request goes to the engine (through its
// net/http bridge, as serve's handlers see it) and to net/http, and the
// answers are diffed: the status of each answer, and for answers both
// gave, what the handler saw. Where the engine is stricter than net/http
// on purpose, the case says so (Net) and why (internal/httpmatrix
// holds the matrix; the proxy diffs its upstream's view with it too).
// Each request is sent twice to the engine: read the ordinary way, and
// read by the read loop (a loop FastHandler that passes every request
// on to the handler).
func TestConformanceMatrixAgainstNetHTTP(t *testing.T) {
	forEachReadPath(t, func(t *testing.T, path func(Config) Config) {
		conformanceMatrix(t, path)
	})
}

func conformanceMatrix(t *testing.T, path func(Config) Config) {
	ours, theirs := &echo{}, &echo{}
	_, eaddr := serveEngine(t, path(Config{Handler: ours, ReadHeaderTimeout: 5 * time.Second}))
	naddr := netServer(t, theirs)
	for _, c := range httpmatrix.Requests() {
		t.Run(c.Name, func(t *testing.T) {
			n := c.Answers()
			e := exchange(t, eaddr, c.Raw, n)
			nh := exchange(t, naddr, c.Raw, n)
			wantNet := c.NetStatuses()
			if !slices.Equal(e.statuses, c.Engine) {
				t.Errorf("engine answered %v, want %v", e.statuses, c.Engine)
			}
			if !slices.Equal(nh.statuses, wantNet) {
				t.Errorf("net/http answered %v; the matrix says %v (update the case if net/http changed)", nh.statuses, wantNet)
			}
			if c.Net != nil && c.Why == "" {
				t.Errorf("a difference from net/http needs its reason")
			}
			if len(e.statuses) == 1 && e.statuses[0] == 200 && slices.Equal(e.statuses, nh.statuses) && !strings.HasPrefix(c.Raw, "HEAD") && !strings.HasPrefix(c.Raw, "OPTIONS") {
				var ev, nv view
				if err := json.Unmarshal([]byte(e.body), &ev); err != nil {
					t.Fatalf("engine body %q: %v", e.body, err)
				}
				if err := json.Unmarshal([]byte(nh.body), &nv); err != nil {
					t.Fatalf("net/http body %q: %v", nh.body, err)
				}
				if fmt.Sprint(ev) != fmt.Sprint(nv) {
					t.Errorf("the handler saw different requests:\nengine   %+v\nnet/http %+v", ev, nv)
				}
			}
			if len(e.statuses) > 0 && e.statuses[len(e.statuses)-1] >= 400 && !e.close {
				t.Errorf("engine refusal %v without Connection: close: %v", e.statuses, e.header)
			}
		})
	}
}
