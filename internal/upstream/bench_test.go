package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/upstream/upstreamtest"

	"github.com/sluicehq/sluice/internal/hfield"
)

func benchRoundTrip(b *testing.B, rt http.RoundTripper, method string, bodyLen int) {
	u := "http://" + upstreamtest.Canned(b, bodyLen) + "/bench/path?q=1"
	body := strings.Repeat("b", bodyLen)
	hdr := http.Header{"Accept": {"*/*"}, "User-Agent": {"bench"}, "X-Forwarded-For": {"10.0.0.1"}, "X-Request-Id": {"abc"}}
	b.ReportAllocs()
	for b.Loop() {
		var r io.Reader
		if bodyLen > 0 {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, u, r)
		req.Header = hdr
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// One small GET and one POST of 1 KiB, through this client and through
// net/http's Transport (compression off, as this client has it), to the
// same canned upstream on loopback.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name    string
		method  string
		bodyLen int
	}{{"GET", "GET", 0}, {"POST1KiB", "POST", 1 << 10}} {
		b.Run(tc.name+"/upstream", func(b *testing.B) {
			c := New(Config{})
			defer c.Close()
			benchRoundTrip(b, c, tc.method, tc.bodyLen)
		})
		b.Run(tc.name+"/nethttp", func(b *testing.B) {
			t := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128}
			defer t.CloseIdleConnections()
			benchRoundTrip(b, t, tc.method, tc.bodyLen)
		})
	}
}

// BenchmarkParseResponse parses a typical answer's head (nine fields)
// and a short one (three), into a Header and into a list (as a proxy's
// native path reads them: Limits.Answer).
func BenchmarkParseResponse(b *testing.B) {
	heads := map[string][]byte{
		"nine": []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 1234\r\n" +
			"Date: Tue, 01 Dec 2026 10:00:00 GMT\r\nCache-Control: max-age=60\r\nEtag: \"abc123\"\r\n" +
			"Last-Modified: Mon, 30 Nov 2026 10:00:00 GMT\r\nVary: Accept-Encoding\r\nServer: backend\r\nX-Request-Id: 7f3a\r\n\r\n"),
		"three": []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\nContent-Length: 3\r\n\r\n"),
	}
	for _, name := range []string{"nine", "three"} {
		for _, into := range []string{"header", "list"} {
			b.Run(name+"/"+into, func(b *testing.B) {
				var l *hfield.List
				if into == "list" {
					l = new(hfield.List)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := parseResponse(heads[name], l); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFieldsAdd adds a forwarded request's typical fields (the
// check of each against the client's own fields included).
func BenchmarkFieldsAdd(b *testing.B) {
	names := [...]string{"User-Agent", "Accept", "Accept-Encoding", "Accept-Language", "Cookie", "Referer", "X-Forwarded-For", "X-Request-Id"}
	var f Fields
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		f.Reset(buf)
		for _, n := range names {
			if err := f.Add(n, "value"); err != nil {
				b.Fatal(err)
			}
		}
	}
}
