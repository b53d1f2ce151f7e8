package engine

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestBridgeServesAHandler(t *testing.T) {
	_, addr := serveEngine(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Path", r.URL.Path)
		io.WriteString(w, "hello "+r.Method)
	})})
	resp, err := http.Get("http://" + addr + "/a/b?c=d")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello GET" || resp.Header.Get("X-Path") != "/a/b" || resp.ContentLength != 9 {
		t.Fatalf("got %d %q %v", resp.StatusCode, b, resp.Header)
	}
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	_, addr := serveEngine(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	})})
	raw := rawExchange(t, addr, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	rs := readResponses(t, raw, "GET", "GET", "GET")
	if len(rs) != 3 {
		t.Fatalf("%d responses in %q", len(rs), raw)
	}
	for i, r := range rs {
		b, _ := io.ReadAll(r.Body)
		if want := "/" + string(rune('1'+i)); string(b) != want {
			t.Errorf("response %d: %q, want %q", i, b, want)
		}
	}
	if !strings.Contains(raw, "Connection: close") {
		t.Errorf("last answer lacks Connection: close: %q", raw)
	}
}

// The parser on a typical browser-like head allocates nothing.
func BenchmarkParseHead(b *testing.B) {
	raw := []byte("GET /assets/app.css?v=3 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/css,*/*;q=0.1\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.5\r\n" +
		"Connection: keep-alive\r\nReferer: https://example.com/\r\nCookie: session=abc123; theme=dark\r\n\r\n")
	var h head
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := parseHead(raw, &h); err != nil {
			b.Fatal(err)
		}
	}
}

// net/http's reading of the same head, for scale.
func BenchmarkParseHeadNetHTTP(b *testing.B) {
	raw := "GET /assets/app.css?v=3 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/css,*/*;q=0.1\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.5\r\n" +
		"Connection: keep-alive\r\nReferer: https://example.com/\r\nCookie: session=abc123; theme=dark\r\n\r\n"
	r := strings.NewReader(raw)
	br := bufio.NewReader(r)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		r.Reset(raw)
		br.Reset(r)
		if _, err := http.ReadRequest(br); err != nil {
			b.Fatal(err)
		}
	}
}
