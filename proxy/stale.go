package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluicehq/sluice/retry"
)

// staleStore keeps the last good answer of each cacheable GET, bounded in
// entries (LRU) and in body size, for stale-if-error. golang-lru's Cache is
// safe for concurrent use; entries are immutable once stored.
type staleStore struct {
	cache    *lru.Cache[string, *staleEntry]
	maxBytes int64
	maxAge   time.Duration
	now      func() time.Time
}

type staleEntry struct {
	status int
	header http.Header
	body   []byte
	stored time.Time
}

func newStaleStore(entries int, maxBytes int64, maxAge time.Duration, now func() time.Time) *staleStore {
	c, _ := lru.New[string, *staleEntry](entries) // entries > 0, checked by New
	return &staleStore{cache: c, maxBytes: maxBytes, maxAge: maxAge, now: now}
}

func staleKey(r *http.Request) string { return r.Host + " " + r.URL.RequestURI() }

// storable: a GET without credentials answered 200, without Set-Cookie,
// Vary or a Cache-Control that forbids keeping it, small enough.
func (s *staleStore) storable(resp *http.Response) bool {
	req := resp.Request
	if req == nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return false
	}
	if req.Header.Get("Authorization") != "" || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Vary") != "" {
		return false
	}
	cc := strings.ToLower(resp.Header.Get("Cache-Control"))
	if strings.Contains(cc, "no-store") || strings.Contains(cc, "private") || strings.Contains(cc, "no-cache") {
		return false
	}
	return resp.ContentLength <= s.maxBytes
}

// capture tees a storable answer's body; it is stored once read to the end.
func (s *staleStore) capture(resp *http.Response) {
	if !s.storable(resp) {
		return
	}
	e := &staleEntry{status: resp.StatusCode, header: resp.Header.Clone()}
	e.header.Del("Date")
	resp.Body = &teeBody{rc: resp.Body, max: s.maxBytes, done: func(b []byte) {
		e.body = b
		e.stored = s.now()
		s.cache.Add(staleKey(resp.Request), e)
	}}
}

// get returns a stored answer for r that is young enough.
func (s *staleStore) get(r *http.Request) (*staleEntry, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, false
	}
	e, ok := s.cache.Get(staleKey(r))
	if !ok || s.now().Sub(e.stored) > s.maxAge {
		return nil, false
	}
	return e, true
}

func (e *staleEntry) age(now time.Time) string {
	return strconv.FormatInt(int64(max(0, now.Sub(e.stored))/time.Second), 10)
}

// write answers with the stored copy, marked.
func (e *staleEntry) write(w http.ResponseWriter, why string, now time.Time) {
	h := w.Header()
	for k, v := range e.header {
		h[k] = append([]string(nil), v...)
	}
	h.Set(StaleHeader, why)
	h.Set("Age", e.age(now))
	h.Set("Content-Length", strconv.Itoa(len(e.body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

// fill turns an upstream's error answer into the stored copy, marked.
func (e *staleEntry) fill(resp *http.Response, why string, now time.Time) {
	resp.StatusCode = e.status
	resp.Status = strconv.Itoa(e.status) + " " + http.StatusText(e.status)
	resp.Header = e.header.Clone()
	resp.Header.Set(StaleHeader, why)
	resp.Header.Set("Age", e.age(now))
	resp.Header.Del(retry.NoRetryHeader)
	resp.Body = io.NopCloser(bytes.NewReader(e.body))
	resp.ContentLength = int64(len(e.body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(e.body)))
}

// teeBody copies what is read, up to max bytes, and calls done with the
// copy when the body was read to its end without error.
type teeBody struct {
	rc   io.ReadCloser
	buf  bytes.Buffer
	max  int64
	over bool
	done func([]byte)
}

func (t *teeBody) Read(b []byte) (int, error) {
	n, err := t.rc.Read(b)
	if !t.over {
		if int64(t.buf.Len()+n) > t.max {
			t.over = true
			t.buf = bytes.Buffer{}
		} else {
			t.buf.Write(b[:n])
		}
	}
	if err == io.EOF && !t.over && t.done != nil {
		t.done(bytes.Clone(t.buf.Bytes()))
		t.done = nil
	}
	return n, err
}

func (t *teeBody) Close() error { return t.rc.Close() }
