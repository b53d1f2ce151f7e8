package httpgate_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/testutil"
)

// protos are the wire protocols every integration test runs over.
var protos = []string{"http1", "h2c"}

// syncBuffer is a goroutine-safe log sink for http.Server.ErrorLog.
type syncBuffer = testutil.SyncBuffer

type testServer struct {
	URL    string
	Client *http.Client
	Log    *syncBuffer
}

// serve starts h on a real loopback socket speaking proto and returns a
// client that speaks the same.
func serve(t *testing.T, proto string, h http.Handler) *testServer {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	logs := &syncBuffer{}
	srv.Config.ErrorLog = log.New(logs, "", 0)
	var p http.Protocols
	tr := &http.Transport{MaxIdleConnsPerHost: 2000}
	switch proto {
	case "http1":
		p.SetHTTP1(true)
		tr.Protocols = &p
	case "h2c":
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 4000}
		var cp http.Protocols
		cp.SetUnencryptedHTTP2(true)
		tr.Protocols = &cp
	default:
		t.Fatalf("unknown proto %q", proto)
	}
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return &testServer{URL: srv.URL, Client: &http.Client{Transport: tr}, Log: logs}
}

func newGate(t *testing.T, cfg admit.Config) *admit.Gate {
	t.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newMW(t *testing.T, cfg httpgate.Config) *httpgate.Middleware {
	t.Helper()
	m, err := httpgate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually waits for state that another goroutine reaches.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, cond)
}

// checkInvariants asserts the gate's bookkeeping identities at rest.
func checkInvariants(t *testing.T, g *admit.Gate) admit.Stats {
	t.Helper()
	s := g.Stats()
	if s.Offered != s.Admitted+s.Rejected.Total()+uint64(s.Waiting) {
		t.Errorf("offered %d != admitted %d + rejected %d + waiting %d", s.Offered, s.Admitted, s.Rejected.Total(), s.Waiting)
	}
	if s.Admitted != s.Completed.Total()+uint64(s.Inflight) {
		t.Errorf("admitted %d != completed %d + inflight %d", s.Admitted, s.Completed.Total(), s.Inflight)
	}
	if s.Misuse != 0 {
		t.Errorf("misuse = %d: a permit was released twice", s.Misuse)
	}
	return s
}

func get(t *testing.T, ctx context.Context, ts *testServer, path string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	return resp, body.Bytes(), err
}

func copyString(w io.Writer, s string) (int64, error) { return io.Copy(w, strings.NewReader(s)) }
