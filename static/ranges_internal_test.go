package static

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRangeLength(t *testing.T) {
	for _, c := range []struct {
		spec      string
		size      int64
		n         int64
		ok, valid bool
	}{
		{"0-0", 10, 1, true, true},
		{"2-", 10, 8, true, true},
		{"5-100", 10, 5, true, true},
		{"-3", 10, 3, true, true},
		{"-30", 10, 10, true, true},
		{"-0", 10, 0, false, true},
		{"10-", 10, 0, false, true},
		{"3-2", 10, 0, false, false},
		{"x-1", 10, 0, false, false},
		{"5", 10, 0, false, false},
		{"--1", 10, 0, false, false},
	} {
		n, ok, valid := rangeLength(c.spec, c.size)
		if n != c.n || ok != c.ok || valid != c.valid {
			t.Errorf("rangeLength(%q, %d) = %d, %v, %v; want %d, %v, %v", c.spec, c.size, n, ok, valid, c.n, c.ok, c.valid)
		}
	}
}

// FuzzLimitRanges: whatever the Range header, limitRanges never panics,
// and the reply http.ServeContent then writes is never larger than the
// file plus MaxRanges part headers, and never a 206 with an empty range.
func FuzzLimitRanges(f *testing.F) {
	for _, seed := range []string{"bytes=0-0", "bytes=-0", "bytes=0-1,-0", "bytes=0-,0-,0-", "bytes=1-1,3-3,5-5", "bytes=", "bytes=,,", "bytes=5-2", "items=0-1", "bytes=-00,-0"} {
		f.Add(seed, int64(11))
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if size < 0 || size > 1<<16 {
			return
		}
		content := bytes.Repeat([]byte("z"), int(size))
		req := httptest.NewRequest(http.MethodGet, "/f", nil)
		req.Header.Set("Range", header)
		rec := httptest.NewRecorder()
		if !limitRanges(rec, req, size, "text/plain") {
			http.ServeContent(rec, req, "f.txt", time.Time{}, bytes.NewReader(content))
		}
		if limit := size + MaxRanges*256 + 256; int64(rec.Body.Len()) > limit {
			t.Fatalf("Range %q on %d bytes: %d-byte reply, over %d", header, size, rec.Body.Len(), limit)
		}
		if cr := rec.Header().Get("Content-Range"); rec.Code == http.StatusPartialContent && cr != "" && strings.HasPrefix(cr, "bytes ") {
			var first, last, total int64
			if n, _ := sscanRange(cr, &first, &last, &total); n == 3 && last < first {
				t.Fatalf("Range %q: empty range %q", header, cr)
			}
		}
	})
}

// sscanRange parses "bytes a-b/n".
func sscanRange(s string, a, b, n *int64) (int, error) {
	return fmt.Sscanf(s, "bytes %d-%d/%d", a, b, n)
}
