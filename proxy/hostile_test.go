package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// mustListenClosed returns a loopback address nobody listens on.
func mustListenClosed(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// rawUpstream accepts connections and hands each to serve.
func rawUpstream(t *testing.T, serve func(net.Conn)) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

func readRequestHead(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

func TestHostileUpstreamNeverLeaksSlot(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	cases := []struct {
		name  string
		serve func(net.Conn)
		want  int
	}{
		{"slow headers", func(c net.Conn) {
			defer c.Close()
			readRequestHead(c)
			select {
			case <-stop:
			case <-time.After(10 * time.Second):
			}
		}, http.StatusGatewayTimeout},
		{"garbage", func(c net.Conn) {
			defer c.Close()
			readRequestHead(c)
			_, _ = c.Write([]byte("\x00\x01 this is not HTTP\r\n\r\n"))
		}, http.StatusBadGateway},
		{"reset", func(c net.Conn) {
			readRequestHead(c)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}, http.StatusBadGateway},
		{"reset mid-body", func(c net.Conn) {
			readRequestHead(c)
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial"))
			time.Sleep(20 * time.Millisecond)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}, -1}, // headers were sent: the client sees the answer cut short
		{"close before answer", func(c net.Conn) {
			readRequestHead(c)
			c.Close()
		}, http.StatusBadGateway},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := rawUpstream(t, tc.serve)
			p := mustNew(t, Config{Upstreams: []*url.URL{up}, MaxInflight: 2, HeaderTimeout: 150 * time.Millisecond, MaxAttempts: 1, NoBreaker: true})
			base, c := front(t, p)
			for range 3 {
				resp, err := c.Get(base + "/")
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if tc.want < 0 {
					if err == nil {
						t.Fatal("an answer cut short upstream reached the client whole")
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tc.want {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
				}
			}
			waitIdle(t, p, 5*time.Second)
		})
	}
}

func TestHostileClientNeverLeaksSlot(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, BodyTimeout: 200 * time.Millisecond, SendTimeout: 200 * time.Millisecond})
	base, _ := front(t, p)
	addr := strings.TrimPrefix(base, "http://")

	t.Run("declared body never sent", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
		waitBusy(t, p)
		waitIdle(t, p, 5*time.Second) // the body timeout ends the call while the client stalls
	})
	t.Run("client leaves mid-body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n0123456789")
		waitBusy(t, p)
		c.Close()
		waitIdle(t, p, 5*time.Second)
	})
	t.Run("stalled reader", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		waitBusy(t, p)
		waitIdle(t, p, 5*time.Second) // never read: the send timeout cuts it off
	})
}

// waitBusy waits until the upstream gate holds a slot.
func waitBusy(t *testing.T, p *Proxy) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gateByName(p, GateUpstream).Stats().Admitted == 0 || gateByName(p, GateUpstream).InUse() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request never took a slot")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeepAliveOutlivesSendTimeout: the deadlines one request sets on the
// connection (body and send timeouts) do not cut a later request on the
// same keep-alive connection, whether it is proxied or refused.
func TestKeepAliveOutlivesSendTimeout(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, SendTimeout: 50 * time.Millisecond, BodyTimeout: 50 * time.Millisecond,
		Routes: []Route{{Name: "q", Quota: &RouteQuota{Rate: 0.001, Burst: 2}}}})
	base, _ := front(t, p)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, want := range []int{200, 200, 429} {
		if i > 0 {
			time.Sleep(150 * time.Millisecond) // past both timeouts of the request before
		}
		fmt.Fprintf(c, "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the same connection: %v", i, err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
}
