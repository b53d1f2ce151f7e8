package static_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/static"
)

// serveRec answers one GET through a recorder (no sockets: synctest's
// fake clock advances only while every goroutine of the bubble is blocked,
// and network I/O does not count as blocked).
func serveRec(h http.Handler, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A changed file is served from the cache at most Revalidate after the
// change, whether its size or only its modification time changed.
func TestChangedFileNotServedStaleBeyondRevalidate(t *testing.T) {
	dir := writeTree(t, map[string]string{"f.txt": "version 1"})
	file := filepath.Join(dir, "f.txt")
	synctest.Test(t, func(t *testing.T) {
		h, err := static.New(static.Config{Root: dir, Revalidate: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if body := serveRec(h, "/f.txt").Body.String(); body != "version 1" {
			t.Fatalf("first read: %q", body)
		}
		reads := h.Gate().Stats().Admitted

		// Size changes.
		if err := os.WriteFile(file, []byte("version 22"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		if body := serveRec(h, "/f.txt").Body.String(); body != "version 1" {
			t.Errorf("within the interval: %q, want the cached version 1", body)
		}
		time.Sleep(time.Second)
		if body := serveRec(h, "/f.txt").Body.String(); body != "version 22" {
			t.Errorf("after the interval: %q, want version 22", body)
		}

		// Same size, new modification time.
		if err := os.WriteFile(file, []byte("version 33"), 0o644); err != nil {
			t.Fatal(err)
		}
		later := time.Unix(2_000_000_000, 0)
		if err := os.Chtimes(file, later, later); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		if body := serveRec(h, "/f.txt").Body.String(); body != "version 33" {
			t.Errorf("after an mtime-only change: %q, want version 33", body)
		}
		// Unchanged: revalidation is one stat, no read.
		time.Sleep(10 * time.Second)
		serveRec(h, "/f.txt")
		if got := h.Gate().Stats().Admitted - reads; got != 2 {
			t.Errorf("disk reads after the first: %d, want 2 (one per change)", got)
		}
		if st := h.Stats(); st.Hits != 2 || st.Entries != 1 || st.Bytes != int64(len("version 33")) {
			t.Errorf("cache stats %+v, want 2 hits, 1 entry of %d bytes", st, len("version 33"))
		}
	})
}

// A deleted file stops being served once it is revalidated.
func TestDeletedFileDropped(t *testing.T) {
	dir := writeTree(t, map[string]string{"f.txt": "here"})
	h, err := static.New(static.Config{Root: dir, Revalidate: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if rec := serveRec(h, "/f.txt"); rec.Code != 200 {
		t.Fatal(rec.Code)
	}
	os.Remove(filepath.Join(dir, "f.txt"))
	if rec := serveRec(h, "/f.txt"); rec.Code != 404 {
		t.Errorf("deleted file with Revalidate<0: %d, want 404", rec.Code)
	}
	if st := h.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("cache after deletion: %+v", st)
	}
}

// The cache holds at most CacheBytes of content, evicting the least
// recently used file.
func TestCacheBoundedByBytes(t *testing.T) {
	files := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		files[n+".txt"] = strings.Repeat(n, 400)
	}
	s := serveDir(t, writeTree(t, files), static.Config{CacheBytes: 1000})
	s.get(t, "/a.txt")
	s.get(t, "/b.txt")
	s.get(t, "/a.txt") // a is now the most recent
	s.get(t, "/c.txt") // evicts b
	st := s.h.Stats()
	if st.Entries != 2 || st.Bytes != 800 || st.Evictions != 1 {
		t.Errorf("after 3 files of 400 bytes in 1000: %+v, want 2 entries, 800 bytes, 1 eviction", st)
	}
	reads := s.h.Gate().Stats().Admitted
	s.get(t, "/a.txt") // still cached
	if got := s.h.Gate().Stats().Admitted; got != reads {
		t.Errorf("recently used a.txt was evicted (%d reads -> %d)", reads, got)
	}
	s.get(t, "/b.txt") // evicted: read again
	if got := s.h.Gate().Stats().Admitted; got != reads+1 {
		t.Errorf("evicted b.txt: reads %d -> %d, want one more", reads, got)
	}
}

// With the cache off every GET reads the disk, under the gate.
func TestCacheOff(t *testing.T) {
	s := serveDir(t, writeTree(t, map[string]string{"f.txt": "body"}), static.Config{CacheBytes: -1})
	for range 3 {
		if r := s.get(t, "/f.txt"); r.status != 200 || r.body != "body" {
			t.Fatalf("%d %q", r.status, r.body)
		}
	}
	if st := s.h.Gate().Stats(); st.Admitted != 3 {
		t.Errorf("admitted %d, want 3", st.Admitted)
	}
	if st := s.h.Stats(); st.Entries != 0 || st.Hits != 0 {
		t.Errorf("cache off but %+v", st)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	file := filepath.Join(writeTree(t, map[string]string{"f": "x"}), "f")
	for name, cfg := range map[string]static.Config{
		"no gate, request scope": {WorkLimit: -1, Scope: static.ScopeRequest},
		"negative queue":         {Queue: -1},
		"unknown scope":          {Scope: 7},
		"huge work limit":        {WorkLimit: 1 << 30},
		"missing root":           {Root: filepath.Join(t.TempDir(), "nope")},
		"root is a file":         {Root: file},
	} {
		if h, err := static.New(cfg); err == nil {
			h.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := static.ParseScope("disk "); err == nil {
		t.Error(`ParseScope("disk ") accepted`)
	}
	for _, s := range []static.Scope{static.ScopeDisk, static.ScopeRequest} {
		if got, err := static.ParseScope(s.String()); err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v", s.String(), got, err)
		}
	}
}
