package load

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer accepts connections on 127.0.0.1 and answers each request it
// reads (up to the blank line) by calling reply, which writes raw bytes and
// says whether to keep the connection open.
func rawServer(t *testing.T, reply func(n int, w io.Writer) (keep bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var n atomic.Int64
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					for { // the request head; bodies are not used here
						l, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if l == "\r\n" {
							break
						}
					}
					if !reply(int(n.Add(1)), c) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func h1Run(t *testing.T, url string, n int, cfg Config) Counts {
	t.Helper()
	cfg.Targets = []Target{{URL: url}}
	cfg.Shape = mustShape(t, float64(n)*10, 100*time.Millisecond)
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if !h1Eligible(cfg) {
		t.Fatal("not on the h1 client")
	}
	st, _ := runOne(t, context.Background(), cfg)
	return st.Windows[0].Counts
}

// Over a second under -race: a real driver run against a raw-socket server
// per framing.
func TestH1ResponseFraming(t *testing.T) {
	envelope := `{"error":"BUSY","gate":"disk","reason":"full"}`
	cases := map[string]struct {
		reply  string
		keep   bool
		status string
	}{
		"content-length":   {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", true, "200"},
		"chunked refusal":  {"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"err\r\n" + strings.ToUpper("29") + ";ext=1\r\n" + envelope[5:] + "\r\n0\r\nX-Trailer: y\r\n\r\n", true, "503"},
		"close-delimited":  {"HTTP/1.0 200 OK\r\n\r\nbody until close", false, "200"},
		"http/1.0 keep":    {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", true, "200"},
		"connection close": {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false, "200"},
		"interim 103":      {"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", true, "204"},
		"304 no body":      {"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", true, "304"},
		"big body":         {"HTTP/1.1 404 Not Found\r\nContent-Length: 20000\r\n\r\n" + strings.Repeat("x", 20000), true, "404"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			url := rawServer(t, func(n int, w io.Writer) bool {
				io.WriteString(w, c.reply)
				return c.keep
			})
			// The raw server answers at once: 2 s bounds (not the
			// 10 s + 5 s defaults) let a reply misframed into a wait end
			// the run soon, and are ample on a loaded machine.
			got := h1Run(t, url, 5, Config{Timeout: 2 * time.Second, DrainTimeout: 2 * time.Second})
			if got.Status[c.status] != 5 || got.Sent != 5 || got.TransportError != 0 {
				t.Fatalf("counts %+v, want 5 × %s", got, c.status)
			}
			if name == "chunked refusal" {
				if len(got.Refusals) != 1 || got.Refusals[0].Gate != "disk" || got.Refusals[0].Reason != "full" {
					t.Errorf("refusals %+v: the chunked envelope was not read whole", got.Refusals)
				}
			}
		})
	}
}

// Over a second under -race: a real driver run against a raw-socket server
// per malformed reply.
func TestH1MalformedResponses(t *testing.T) {
	for name, reply := range map[string]string{
		"not http":        "SMTP ready\r\n\r\n",
		"bad status":      "HTTP/1.1 2x0 OK\r\n\r\n",
		"bad length":      "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
		"two lengths":     "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"bad chunk":       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"header no colon": "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n",
		"short body":      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
	} {
		t.Run(name, func(t *testing.T) {
			url := rawServer(t, func(n int, w io.Writer) bool { io.WriteString(w, reply); return false })
			got := h1Run(t, url, 3, Config{})
			if got.TransportError != 3 || got.OK != 0 {
				t.Errorf("counts %+v, want 3 transport errors", got)
			}
		})
	}
}

// A server that closes each kept-alive connection after one answer without
// saying so: the next request on it finds it dead before any response
// byte, and is retried once on a fresh connection, like net/http does.
func TestH1RetriesStaleKeepAlive(t *testing.T) {
	url := rawServer(t, func(n int, w io.Writer) bool {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return false // close silently
	})
	got := h1Run(t, url, 6, Config{})
	if got.OK != 6 || got.TransportError != 0 {
		t.Errorf("counts %+v: stale connections must be retried", got)
	}
	// Not for a POST with a body: it may have been processed.
	cfg := Config{Targets: []Target{{URL: url, Method: "POST", Body: []byte("x")}}, Shape: mustShape(t, 60, 100*time.Millisecond), Workers: 1}
	st, _ := runOne(t, context.Background(), cfg)
	if c := st.Windows[0].Counts; c.OK == 0 || c.TransportError == 0 {
		t.Errorf("POST counts %+v: want some answered, some eof", c)
	}
}

func TestH1KeepAliveReusesConnections(t *testing.T) {
	var mu sync.Mutex
	remotes := map[string]int{}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		remotes[r.RemoteAddr]++
		mu.Unlock()
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", "10")
			return
		}
		w.(http.Flusher).Flush() // forces a chunked body
		io.WriteString(w, "ok")
	})
	got := h1Run(t, srv.URL, 20, Config{})
	if got.OK != 20 || len(remotes) != 1 {
		t.Errorf("ok %d over %d connections; want 20 over 1", got.OK, len(remotes))
	}
	remotes = map[string]int{}
	got = h1Run(t, srv.URL, 10, Config{DisableKeepAlives: true})
	if got.OK != 10 || len(remotes) != 10 {
		t.Errorf("no keep-alive: ok %d over %d connections; want 10 over 10", got.OK, len(remotes))
	}
	st, _ := runOne(t, context.Background(), Config{Targets: []Target{{URL: srv.URL, Method: "HEAD"}}, Shape: mustShape(t, 50, 100*time.Millisecond), Workers: 1})
	if c := st.Windows[0].Counts; c.OK != 5 || c.TransportError != 0 {
		t.Errorf("HEAD counts %+v", c)
	}
}

func TestH1Helpers(t *testing.T) {
	if n, ok := parseHex([]byte("1aF")); !ok || n != 0x1af {
		t.Errorf("parseHex = %d %v", n, ok)
	}
	if _, ok := parseHex([]byte("g")); ok {
		t.Error("parseHex accepted g")
	}
	if n, ok := parseDec([]byte("1234")); !ok || n != 1234 {
		t.Errorf("parseDec = %d %v", n, ok)
	}
	if !hasToken([]byte("keep-alive, Close"), "close") || hasToken([]byte("closed"), "close") {
		t.Error("hasToken")
	}
	if h1Eligible(Config{Targets: []Target{{URL: "https://h/"}}}) || h1Eligible(Config{Targets: []Target{{URL: "http://h/"}}, HTTP2: true}) {
		t.Error("https and HTTP/2 must use net/http")
	}
}
