package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/engine"
)

// backend is a real upstream on a loopback socket.
func backend(t *testing.T, h http.HandlerFunc) *url.URL {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	return u
}

// testEngine is the HTTP/1.1 front end front serves the proxy with:
// "net" (net/http) or "fast" (sluice's engine with the proxy's fast
// path). TestMain runs every test once per engine.
var testEngine = "net"

// front starts p behind a real listener, on the engine under test, and
// returns its base URL and a client that keeps no connections after the
// test.
func front(t *testing.T, p *Proxy) (string, *http.Client) {
	t.Helper()
	return frontOn(t, p, testEngine)
}

// frontOn is front on the named engine ("net" or "fast").
func frontOn(t *testing.T, p *Proxy, eng string) (string, *http.Client) {
	t.Helper()
	tr := &http.Transport{}
	closeGates := func() {
		for _, g := range p.Gates() {
			g.Close()
		}
		p.Close()
	}
	if eng == "fast" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		es := engine.New(engine.Config{Handler: p, Fast: p.FastPath(), FastBodies: true})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = es.Serve(l)
		}()
		t.Cleanup(func() {
			tr.CloseIdleConnections()
			es.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = es.Shutdown(ctx) // waits for the handlers still running
			<-done
			closeGates()
		})
		return "http://" + l.Addr().String(), &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	s := httptest.NewServer(p)
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.CloseClientConnections()
		s.Close()
		closeGates()
	})
	return s.URL, &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func mustNew(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type refusalBody struct {
	Error, Gate, Reason string
}

// get sends a request and returns the status, the refusal body if any and
// the response headers.
func do(t *testing.T, c *http.Client, req *http.Request) (int, refusalBody, http.Header, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rb refusalBody
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(body, &rb)
	}
	return resp.StatusCode, rb, resp.Header, string(body)
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, refusalBody, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, c, req)
}

// waitIdle fails the test unless every gate of p is back to no slot in
// use and nobody waiting within d.
func waitIdle(t *testing.T, p *Proxy, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		busy := ""
		for _, g := range p.Gates() {
			s := g.Stats()
			if s.InUse != 0 || s.Waiting != 0 {
				busy = g.Name()
			}
			if s.Offered != s.Admitted+s.Rejected.Total()+uint64(s.Waiting) {
				t.Fatalf("gate %s: offered %d != admitted %d + rejected %d + waiting %d", g.Name(), s.Offered, s.Admitted, s.Rejected.Total(), s.Waiting)
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate %s still holds a slot after %v: %+v", busy, d, gateByName(p, busy).Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func gateByName(p *Proxy, name string) *admit.Gate {
	for _, g := range p.Gates() {
		if g.Name() == name {
			return g
		}
	}
	return nil
}

// background sends req without judging the answer (the test judges the
// upstream's or the gate's view) and returns a wait for it to end.
func background(c *http.Client, method, u string, hdr ...string) (wait func()) {
	req, _ := http.NewRequest(method, u, nil)
	if method == http.MethodPost {
		req, _ = http.NewRequest(method, u, strings.NewReader("x"))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return func() { <-done }
}
