package proxy

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluicehq/sluice/retry"
)

// staleStore keeps the last good answer of each cacheable GET, bounded in
// entries (LRU) and in body size, for stale-if-error. golang-lru's Cache is
// safe for concurrent use; entries are immutable once stored.
//
// A copy is keyed by what the client asked for: the inbound request's
// scheme, host, path and query (never the outbound request, whose host is
// the upstream's and the same for every tenant), and, under that key, by
// the values of the request headers the answer's Vary names. Each key
// keeps its few newest variants.
type staleStore struct {
	cache    *lru.Cache[string, []*staleEntry]
	maxBytes int64
	maxAge   time.Duration
	now      func() time.Time
}

// maxVariants bounds the variants (Vary) kept per key.
const maxVariants = 4

type staleEntry struct {
	status int
	header http.Header
	body   []byte
	stored time.Time
	// vary are the request headers the answer varies on (canonical
	// names), varyVals the stored request's values of each.
	vary, varyVals []string
}

func newStaleStore(entries int, maxBytes int64, maxAge time.Duration, now func() time.Time) *staleStore {
	c, _ := lru.New[string, []*staleEntry](entries) // entries > 0, checked by New
	return &staleStore{cache: c, maxBytes: maxBytes, maxAge: maxAge, now: now}
}

// staleKey is the key of the inbound request r: scheme, host (lower case)
// and request URI.
func staleKey(r *http.Request) string {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return scheme + strings.ToLower(r.Host) + r.URL.RequestURI()
}

// storable says whether an answer to in (the inbound request) may be kept
// and served to other clients: a 200 to a GET without Authorization, and
// without Cookie unless the answer says it is public; an answer without
// Set-Cookie, without Vary: *, without a Cache-Control that forbids
// keeping it (no-store, no-cache, private); not an upgrade; small enough.
func storable(in *http.Request, resp *http.Response, maxBytes int64) bool {
	if in.Method != http.MethodGet || resp.StatusCode != http.StatusOK || resp.ContentLength > maxBytes {
		return false
	}
	if in.Header.Get("Authorization") != "" || resp.Header.Get("Set-Cookie") != "" || isUpgrade(in.Header) {
		return false
	}
	public := false
	for _, d := range directives(resp.Header.Values("Cache-Control")) {
		switch d {
		case "no-store", "no-cache", "private":
			return false
		case "public":
			public = true
		}
	}
	if in.Header.Get("Cookie") != "" && !public {
		return false // an answer to a request with cookies may be that user's own
	}
	return !slices.Contains(varyNames(resp.Header), "*")
}

// directives returns the lower-case names of the Cache-Control directives
// in vals ("max-age=60, Private" gives max-age, private).
func directives(vals []string) []string {
	var out []string
	for _, v := range vals {
		for d := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(d, "=")
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

// varyNames returns the canonical header names an answer's Vary lists
// ("*" as is), sorted, without duplicates.
func varyNames(h http.Header) []string {
	var names []string
	for _, v := range h.Values("Vary") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, http.CanonicalHeaderKey(name))
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// varyValues returns r's values of each header in names, one string per
// name.
func varyValues(r *http.Request, names []string) []string {
	vals := make([]string, len(names))
	for i, name := range names {
		vals[i] = strings.Join(r.Header.Values(name), ", ")
	}
	return vals
}

// capture tees a storable answer's body; it is stored once read to the
// end. in is the inbound request the answer is for.
func (s *staleStore) capture(in *http.Request, resp *http.Response) {
	if !storable(in, resp, s.maxBytes) {
		return
	}
	e := &staleEntry{status: resp.StatusCode, header: resp.Header.Clone()}
	e.header.Del("Date")
	e.vary = varyNames(resp.Header)
	e.varyVals = varyValues(in, e.vary)
	key := staleKey(in)
	resp.Body = &teeBody{rc: resp.Body, max: s.maxBytes, done: func(b []byte) {
		e.body = b
		e.stored = s.now()
		s.add(key, e)
	}}
}

// add stores e under key, in place of the variant with the same Vary
// values, newest first.
func (s *staleStore) add(key string, e *staleEntry) {
	old, _ := s.cache.Peek(key)
	vs := make([]*staleEntry, 0, min(len(old)+1, maxVariants))
	vs = append(vs, e)
	for _, o := range old {
		if len(vs) == maxVariants {
			break
		}
		if !slices.Equal(o.vary, e.vary) || !slices.Equal(o.varyVals, e.varyVals) {
			vs = append(vs, o)
		}
	}
	s.cache.Add(key, vs)
}

// get returns a stored answer for the inbound request r that is young
// enough and whose Vary headers r matches.
func (s *staleStore) get(r *http.Request) (*staleEntry, bool) {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || isUpgrade(r.Header) {
		return nil, false
	}
	vs, ok := s.cache.Get(staleKey(r))
	if !ok {
		return nil, false
	}
	now := s.now()
	for _, e := range vs {
		if now.Sub(e.stored) <= s.maxAge && slices.Equal(varyValues(r, e.vary), e.varyVals) {
			return e, true
		}
	}
	return nil, false
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
