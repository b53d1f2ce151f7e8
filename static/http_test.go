package static_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/demosite"
	"github.com/sluicehq/sluice/static"
)

// Conditional and range requests give the same status, body and range
// headers as net/http.FileServer on the same files, whether the file is
// cold (first request), hot (in the cache), or streamed (over the cache's
// size limit).
func TestRangesAndConditionalsMatchFileServer(t *testing.T) {
	content := "0123456789abcdefghijklmnopqrstuvwxyz"
	dir := writeTree(t, map[string]string{"f.txt": content})
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(dir+"/f.txt", mtime, mtime); err != nil {
		t.Fatal(err)
	}
	ref := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer ref.Close()
	refSite := &site{srv: &testServer{URL: ref.URL, Listener: ref.Listener, close: ref.Close, client: ref.Client()}, client: ref.Client()}

	// Our ETag differs from FileServer's (it has none); learn ours and use
	// it where a case needs the current validator.
	probe := serveDir(t, dir, static.Config{})
	etag := probe.do(t, http.MethodHead, "/f.txt").header.Get("Etag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	lm := mtime.Format(http.TimeFormat)
	before := mtime.Add(-time.Hour).Format(http.TimeFormat)

	cases := []struct {
		name    string
		hdr     []string
		ours    []string // replaces hdr for our server when validators differ
		want    int
		withRef bool // FileServer must agree
	}{
		{"plain", nil, nil, 200, true},
		{"first bytes", []string{"Range", "bytes=0-4"}, nil, 206, true},
		{"suffix", []string{"Range", "bytes=-3"}, nil, 206, true},
		{"open end", []string{"Range", "bytes=30-"}, nil, 206, true},
		{"past end", []string{"Range", "bytes=100-"}, nil, 416, true},
		{"malformed range", []string{"Range", "bytes=x-y"}, nil, 416, true},
		{"two ranges", []string{"Range", "bytes=0-1,5-6"}, nil, 206, false}, // multipart boundary is random
		{"If-Modified-Since equal", []string{"If-Modified-Since", lm}, nil, 304, true},
		{"If-Modified-Since before", []string{"If-Modified-Since", before}, nil, 200, true},
		{"If-Unmodified-Since before", []string{"If-Unmodified-Since", before}, nil, 412, true},
		{"If-None-Match star", []string{"If-None-Match", "*"}, nil, 304, true},
		{"If-None-Match current", nil, []string{"If-None-Match", etag}, 304, false},
		{"If-None-Match other", []string{"If-None-Match", `"nope"`}, nil, 200, true},
		{"If-Match other", []string{"If-Match", `"nope"`}, nil, 412, true},
		{"If-Range current date", []string{"Range", "bytes=0-4", "If-Range", lm}, nil, 206, true},
		{"If-Range old date", []string{"Range", "bytes=0-4", "If-Range", before}, nil, 200, true},
		{"If-Range current etag", nil, []string{"Range", "bytes=0-4", "If-Range", etag}, 206, false},
		{"If-Range other etag", nil, []string{"Range", "bytes=0-4", "If-Range", `"nope"`}, 200, false},
	}
	modes := []struct {
		name string
		cfg  static.Config
		warm bool
	}{
		{"cold", static.Config{}, false},
		{"hot", static.Config{}, true},
		{"stream", static.Config{MaxCachedFileSize: 8}, false},
	}
	for _, m := range modes {
		s := serveDir(t, dir, m.cfg)
		if m.warm {
			s.get(t, "/f.txt")
		}
		for _, c := range cases {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				if !m.warm { // every case starts cold
					s = serveDir(t, dir, m.cfg)
				}
				hdr := c.hdr
				if c.ours != nil {
					hdr = c.ours
				}
				got := s.get(t, "/f.txt", hdr...)
				if got.status != c.want {
					t.Fatalf("status %d, want %d (body %q)", got.status, c.want, got.body)
				}
				if got.status == 200 && got.body != content {
					t.Errorf("200 body %q", got.body)
				}
				if got.status == 206 && !strings.HasPrefix(got.header.Get("Content-Type"), "multipart/byteranges") {
					if !strings.Contains(content, got.body) || got.header.Get("Content-Range") == "" {
						t.Errorf("206 body %q, Content-Range %q", got.body, got.header.Get("Content-Range"))
					}
				}
				if got.status == 206 && c.name == "two ranges" && (!strings.Contains(got.body, "01") || !strings.Contains(got.body, "56")) {
					t.Errorf("multipart body lacks its parts: %q", got.body)
				}
				// A 304 carries the ETag; ServeContent then leaves Last-Modified
				// out (RFC 9110 §15.4.5 lets it), as FileServer does.
				if got.status == 304 && got.header.Get("Etag") != etag {
					t.Errorf("304 Etag %q, want %q", got.header.Get("Etag"), etag)
				}
				if got.status == 200 {
					if got.header.Get("Etag") != etag || got.header.Get("Last-Modified") != lm {
						t.Errorf("validators: Etag %q Last-Modified %q, want %q %q", got.header.Get("Etag"), got.header.Get("Last-Modified"), etag, lm)
					}
				}
				if !c.withRef {
					return
				}
				want := refSite.get(t, "/f.txt", c.hdr...)
				if got.status != want.status || got.body != want.body ||
					got.header.Get("Content-Range") != want.header.Get("Content-Range") ||
					got.header.Get("Content-Length") != want.header.Get("Content-Length") {
					t.Errorf("differs from FileServer:\n ours %d %q range %q len %q\n  ref %d %q range %q len %q",
						got.status, got.body, got.header.Get("Content-Range"), got.header.Get("Content-Length"),
						want.status, want.body, want.header.Get("Content-Range"), want.header.Get("Content-Length"))
				}
			})
		}
	}
}

func TestHeadersAndDirectories(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"index.html":      "<p>home</p>",
		"style.css":       "body{}",
		"data.unknownext": "??",
		"docs/index.html": "<p>docs</p>",
		"empty/.keep":     "",
		"sp ace/a b.txt":  "spaced",
		"empty.txt":       "",
	})
	s := serveDir(t, dir, static.Config{})
	for _, warm := range []bool{false, true} {
		for _, c := range []struct {
			path, ctype, body string
		}{
			{"/", "text/html; charset=utf-8", "<p>home</p>"},
			{"/index.html", "text/html; charset=utf-8", "<p>home</p>"},
			{"/style.css", "text/css; charset=utf-8", "body{}"},
			{"/data.unknownext", "application/octet-stream", "??"},
			{"/docs/", "text/html; charset=utf-8", "<p>docs</p>"},
			{"/sp%20ace/a%20b.txt", "text/plain; charset=utf-8", "spaced"},
			{"/empty.txt", "text/plain; charset=utf-8", ""},
		} {
			r := s.get(t, c.path)
			if r.status != 200 || r.body != c.body || r.header.Get("Content-Type") != c.ctype {
				t.Errorf("warm=%v GET %s: %d %q %q, want 200 %q %q", warm, c.path, r.status, r.header.Get("Content-Type"), r.body, c.ctype, c.body)
			}
			if r.header.Get("Content-Length") != strconvItoa(len(c.body)) || r.header.Get("Accept-Ranges") != "bytes" {
				t.Errorf("warm=%v GET %s: Content-Length %q Accept-Ranges %q", warm, c.path, r.header.Get("Content-Length"), r.header.Get("Accept-Ranges"))
			}
			head := s.do(t, http.MethodHead, c.path)
			if head.status != 200 || head.body != "" || head.header.Get("Content-Length") != r.header.Get("Content-Length") || head.header.Get("Etag") != r.header.Get("Etag") {
				t.Errorf("warm=%v HEAD %s: %d body %q len %q etag %q", warm, c.path, head.status, head.body, head.header.Get("Content-Length"), head.header.Get("Etag"))
			}
		}
	}
	for _, c := range []struct{ path, loc string }{
		{"/docs", "/docs/"},
		{"/docs?x=1", "/docs/?x=1"},
		{"/sp%20ace", "/sp%20ace/"},
		{"//docs/", "/docs/"},
		{"/./style.css", "/style.css"},
		{"/docs//", "/docs/"},
	} {
		r := s.raw(t, c.path)
		if r.status != http.StatusMovedPermanently || r.header.Get("Location") != c.loc {
			t.Errorf("GET %s: %d Location %q, want 301 %q", c.path, r.status, r.header.Get("Location"), c.loc)
		}
	}
	if r := s.get(t, "/empty/"); r.status != http.StatusForbidden {
		t.Errorf("directory without index: %d, want 403", r.status)
	}
	if r := s.do(t, http.MethodPost, "/"); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}

// TestEmbeddedSite: an embed.FS (here the CLI's demo site) is served with
// content-hash ETags, since its files have no modification time.
func TestEmbeddedSite(t *testing.T) {
	s := serveDir(t, "", static.Config{FS: demosite.FS()})
	home := s.get(t, "/")
	if home.status != 200 || !strings.Contains(home.body, "sluice") || home.header.Get("Etag") == "" {
		t.Errorf("demo /: %d etag %q", home.status, home.header.Get("Etag"))
	}
	if r := s.get(t, "/", "If-None-Match", home.header.Get("Etag")); r.status != 304 {
		t.Errorf("demo / with its ETag: %d, want 304", r.status)
	}
	if r := s.get(t, "/docs"); r.status != 301 || r.header.Get("Location") != "/docs/" {
		t.Errorf("demo /docs: %d %q", r.status, r.header.Get("Location"))
	}
	if r := s.get(t, "/img/sluice.png"); r.status != 200 || r.header.Get("Content-Type") != "image/png" || !strings.HasPrefix(r.body, "\x89PNG") {
		t.Errorf("demo image: %d %q", r.status, r.header.Get("Content-Type"))
	}
	if r := s.get(t, "/style.css"); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/css") {
		t.Errorf("demo css: %d %q", r.status, r.header.Get("Content-Type"))
	}
	large := s.get(t, "/large.txt")
	if large.status != 200 || int64(len(large.body)) <= static.DefaultMaxCachedFileSize {
		t.Errorf("demo large.txt: %d, %d bytes, want 200 and more than %d", large.status, len(large.body), static.DefaultMaxCachedFileSize)
	}
	st := s.h.Gate().Stats()
	if k := st.Kinds[s.h.Gate().Kind(static.KindStream)]; k.Admitted != 1 {
		t.Errorf("large.txt streams: %d stream admissions, want 1", k.Admitted)
	}
	if r := s.get(t, "/missing.html"); r.status != 404 {
		t.Errorf("demo missing: %d", r.status)
	}
}

// TestZeroConfigRefused: a Config naming nothing to serve is an error
// naming the fields, not a site nobody asked for.
func TestZeroConfigRefused(t *testing.T) {
	h, err := static.New(static.Config{})
	if !errors.Is(err, static.ErrInvalidConfig) || !strings.Contains(err.Error(), "Root or FS is required") || h != nil {
		t.Fatalf("New(Config{}) = %v, %v; want ErrInvalidConfig naming Root and FS", h, err)
	}
}
