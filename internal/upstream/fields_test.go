package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// Fields are written as the lines they were added as, checked when
// added: nothing that is not one valid field ever becomes a line.
func TestFieldsAdd(t *testing.T) {
	var f Fields
	buf := make([]byte, 0, 8) // too small: the lines grow out of it
	f.Reset(buf)
	if err := f.Add("X-As-Given", "  padded\t"); err != nil {
		t.Fatal(err)
	}
	if err := f.AddCanonical("x-LOWER-upper", "v"); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("X-Empty", ""); err != nil {
		t.Fatal(err)
	}
	want := "X-As-Given: padded\r\nX-Lower-Upper: v\r\nX-Empty: \r\n"
	if got := string(f.b); got != want {
		t.Fatalf("lines %q, want %q", got, want)
	}
	if f.Len() != len(want) {
		t.Fatalf("Len %d, want %d", f.Len(), len(want))
	}
	h := http.Header{"X-Empty": {"before"}}
	f.AddTo(h)
	if wh := (http.Header{"X-As-Given": {"padded"}, "X-Lower-Upper": {"v"}, "X-Empty": {"before", ""}}); !reflect.DeepEqual(h, wh) {
		t.Fatalf("AddTo gave %v, want %v", h, wh)
	}

	mark := f.Len()
	_ = f.Add("Request-Timeout", "1")
	f.Truncate(mark)
	_ = f.Add("Request-Timeout", "0.5")
	if got := string(f.b); got != want+"Request-Timeout: 0.5\r\n" {
		t.Fatalf("after Truncate: %q", got)
	}

	refused := map[string][2]string{
		"CRLF in a value":      {"X-A", "a\r\nX-Injected: 1"},
		"LF in a value":        {"X-A", "a\nGET /smuggled HTTP/1.1"},
		"CR in a value":        {"X-A", "a\rb"},
		"NUL in a value":       {"X-A", "a\x00b"},
		"space in a name":      {"X A", "b"},
		"colon in a name":      {"X:A", "b"},
		"empty name":           {"", "b"},
		"CRLF in a name":       {"X\r\nY", "b"},
		"Host":                 {"host", "evil"},
		"Content-Length":       {"Content-length", "1"},
		"Transfer-Encoding":    {"TRANSFER-ENCODING", "chunked"},
		"Trailer":              {"Trailer", "X"},
		"Connection":           {"connection", "close"},
		"non-ASCII in a name":  {"X-Ä", "b"},
		"a valid line in name": {"X: y\r\nZ", "b"},
	}
	for name, kv := range refused {
		for _, canonical := range []bool{false, true} {
			before := string(f.b)
			var err error
			if canonical {
				err = f.AddCanonical(kv[0], kv[1])
			} else {
				err = f.Add(kv[0], kv[1])
			}
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("%s (canonical %v): err %v, want ErrInvalidRequest", name, canonical, err)
			}
			if string(f.b) != before {
				t.Errorf("%s (canonical %v): the refused field was written: %q", name, canonical, f.b)
			}
		}
	}
}

// A request sent with Fields: the upstream reads its Header's fields
// and then the Fields in their order, each once, and no User-Agent the
// caller did not give.
func TestRoundTripFields(t *testing.T) {
	heads := make(chan string, 4)
	u := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				head.WriteString(line)
				if line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := newClient(t, Config{})
	send := func(f *Fields, hdr http.Header) string {
		t.Helper()
		r, _ := http.NewRequest("GET", "http://"+u.l.Addr().String()+"/p?q", nil)
		r.Header = hdr
		resp, err := c.RoundTripFields(r, f, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
		resp.Body.Close()
		return <-heads
	}
	var f Fields
	for _, kv := range [][2]string{{"X-B", "2"}, {"User-Agent", "ua/1"}, {"X-A", "1"}, {"X-B", "3"}} {
		if err := f.Add(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	host := u.l.Addr().String()
	got := send(&f, http.Header{"Request-Timeout": {"1.5"}, "Idempotency-Key": {"k"}})
	want := "GET /p?q HTTP/1.1\r\nHost: " + host + "\r\nIdempotency-Key: k\r\nRequest-Timeout: 1.5\r\n" +
		"X-B: 2\r\nUser-Agent: ua/1\r\nX-A: 1\r\nX-B: 3\r\n\r\n"
	if got != want {
		t.Errorf("head:\n%q\nwant\n%q", got, want)
	}
	// No fields at all, and no Header: still no default User-Agent.
	var none Fields
	if got, want := send(&none, nil), "GET /p?q HTTP/1.1\r\nHost: "+host+"\r\n\r\n"; got != want {
		t.Errorf("head:\n%q\nwant\n%q", got, want)
	}
	// Without Fields the default User-Agent is written, as before.
	if got := send(nil, nil); !strings.Contains(got, "User-Agent: Go-http-client/1.1\r\n") {
		t.Errorf("head without Fields lacks the default User-Agent:\n%q", got)
	}
}

// A request sent with its answer's read (no body, or one short enough
// to go with the head) that the socket does not take in one write
// reaches the upstream whole: what the direct write leaves goes through
// the connection's Write once the upstream reads. The client's send
// buffer is made small, so that this happens whatever the machine's
// defaults.
func TestRequestPastTheSendBuffer(t *testing.T) {
	u, got := recorder(t)
	c := newClient(t, Config{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			_ = nc.(*net.TCPConn).SetWriteBuffer(4096)
		}
		return nc, err
	}})
	body := strings.Repeat("0123456789", (maxInlineBody-1024)/10)
	long := strings.Repeat("v", 32<<10)
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"inline body", func() *http.Request {
			r, _ := http.NewRequest("PUT", "http://"+u.l.Addr().String()+"/b", strings.NewReader(body))
			return r
		}},
		{"long field, no body", func() *http.Request {
			r, _ := http.NewRequest("GET", "http://"+u.l.Addr().String()+"/f", nil)
			r.Header.Set("X-Long", long)
			return r
		}},
	} {
		resp, err := c.RoundTrip(tc.req())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		v := <-got
		if tc.name == "inline body" && (v.Body != body || v.BodyErr != "") {
			t.Errorf("%s: the upstream got %d bytes of %d (%s)", tc.name, len(v.Body), len(body), v.BodyErr)
		}
		if tc.name != "inline body" && v.Header.Get("X-Long") != long {
			t.Errorf("%s: the upstream got a field of %d bytes, want %d", tc.name, len(v.Header.Get("X-Long")), len(long))
		}
	}
}
