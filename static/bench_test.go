package static_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/static"
)

// discardWriter is a ResponseWriter that keeps nothing, with a header map
// cleared between requests, so the benchmark measures the handler, not
// the recorder.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

func benchHit(b *testing.B, h http.Handler, path string) {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // warm the cache
	if w.code != http.StatusOK && w.code != 0 {
		b.Fatalf("warm-up: %d", w.code)
	}
	b.ReportAllocs()
	b.SetBytes(int64(w.n))
	for b.Loop() {
		clear(w.h)
		w.code, w.n = 0, 0
		h.ServeHTTP(w, req)
	}
	if w.n == 0 {
		b.Fatal("no body written")
	}
}

// BenchmarkCacheHit is the path every hot request takes: path check, LRU
// lookup, freshness check, prebuilt headers, one Write.
func BenchmarkCacheHit(b *testing.B) {
	dir := writeTree(b, map[string]string{"page.html": strings.Repeat("<p>sluice</p>\n", 50)})
	h, err := static.New(static.Config{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	benchHit(b, h, "/page.html")
}

// BenchmarkCacheHitRange goes through http.ServeContent over the cached bytes.
func BenchmarkCacheHitRange(b *testing.B) {
	dir := writeTree(b, map[string]string{"page.html": strings.Repeat("<p>sluice</p>\n", 50)})
	h, err := static.New(static.Config{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/page.html", nil)
	req.Header.Set("Range", "bytes=0-99")
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// BenchmarkFileServer is the peer: net/http.FileServer on the same file
// (the OS page cache plays the role of our cache).
func BenchmarkFileServer(b *testing.B) {
	dir := writeTree(b, map[string]string{"page.html": strings.Repeat("<p>sluice</p>\n", 50)})
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	benchHit(b, http.FileServerFS(root.FS()), "/page.html")
}

// BenchmarkCacheHitUnderLazy is the hit path as `sluice serve` mounts it:
// inside httpgate's Lazy middleware (a per-request holder), which the
// static handler does not need (it records its own slot).
func BenchmarkCacheHitUnderLazy(b *testing.B) {
	dir := writeTree(b, map[string]string{"page.html": strings.Repeat("<p>sluice</p>\n", 50)})
	h, err := static.New(static.Config{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	mw, err := httpgate.New(httpgate.Config{})
	if err != nil {
		b.Fatal(err)
	}
	benchHit(b, mw.Lazy(h), "/page.html")
}
