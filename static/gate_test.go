package static_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/static"
)

// The telling pair: with the only disk slot held, a cold file is refused
// and, at the same moment, a hot file is served. Either half alone cannot
// tell "hits bypass the gate" from "the gate is broken".
func TestHotServedWhileColdRefused(t *testing.T) {
	dir := writeTree(t, map[string]string{"hot.txt": "hot body\n", "cold.txt": "cold body\n", "range.txt": "range body\n"})
	s := serveDir(t, dir, static.Config{WorkLimit: 1})
	g := s.h.Gate()

	if r := s.get(t, "/hot.txt"); r.status != http.StatusOK || r.body != "hot body\n" {
		t.Fatalf("warming hot.txt: %d %q", r.status, r.body)
	}
	before := g.Stats()

	release := holdSlots(t, g)
	cold := s.get(t, "/cold.txt")
	hot := s.get(t, "/hot.txt")
	after := g.Stats()
	// A cold read through ServeContent (a range) is refused the same way.
	ranged := s.get(t, "/range.txt", "Range", "bytes=0-4")
	release()

	if ranged.status != http.StatusServiceUnavailable || ranged.header.Get("Content-Range") != "" {
		t.Errorf("cold range with the only slot held: %d %v, want 503 without Content-Range", ranged.status, ranged.header)
	}

	if cold.status != http.StatusServiceUnavailable {
		t.Errorf("cold file with the only slot held: status %d, want 503", cold.status)
	}
	if ra, err := strconv.Atoi(cold.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("cold refusal: Retry-After %q, want a positive integer", cold.header.Get("Retry-After"))
	}
	var body struct{ Error, Gate, Reason string }
	if err := json.Unmarshal([]byte(cold.body), &body); err != nil || body.Error != "BUSY" || body.Gate != "disk" || body.Reason != "full" {
		t.Errorf("cold refusal body %q (%v), want BUSY/disk/full", cold.body, err)
	}
	if cold.header.Get("Content-Type") != "application/json" || cold.header.Get("Etag") != "" || cold.header.Get("Last-Modified") != "" {
		t.Errorf("cold refusal headers describe the file: %v", cold.header)
	}
	if hot.status != http.StatusOK || hot.body != "hot body\n" {
		t.Errorf("hot file with the only slot held: %d %q, want 200 with its body", hot.status, hot.body)
	}
	if got := after.Rejected.Total() - before.Rejected.Total(); got != 1 {
		t.Errorf("refusals during the pair: %d, want exactly 1 (the cold file)", got)
	}
	if got := after.Offered - before.Offered - 1; got != 1 {
		t.Errorf("offered during the pair (besides the test's own slot): %d, want 1", got)
	}
	// And once the slot is back, the cold file is served.
	if r := s.get(t, "/cold.txt"); r.status != http.StatusOK || r.body != "cold body\n" {
		t.Errorf("cold file after release: %d %q", r.status, r.body)
	}
}

// Five different cold files in a row with one slot: each read must give
// its slot back, or the second is refused. (Five requests for the same file
// would pass on a leaking gate: after the first, all are hits.)
func TestSlotReleasedAfterEveryRead(t *testing.T) {
	files := map[string]string{}
	for i := range 5 {
		files[fmt.Sprintf("cold%d.txt", i)] = strings.Repeat(strconv.Itoa(i), 100+i)
	}
	s := serveDir(t, writeTree(t, files), static.Config{WorkLimit: 1})
	for i := range 5 {
		name := fmt.Sprintf("cold%d.txt", i)
		// Odd files with a range that covers them whole: the read goes
		// through ServeContent instead of the core's plain read.
		var hdr []string
		want := http.StatusOK
		if i%2 == 1 {
			hdr, want = []string{"Range", "bytes=0-"}, http.StatusPartialContent
		}
		if r := s.get(t, "/"+name, hdr...); r.status != want || r.body != files[name] {
			t.Fatalf("cold file %d of 5: status %d, body %d bytes", i+1, r.status, len(r.body))
		}
		if in := s.h.Gate().InUse(); in != 0 {
			t.Fatalf("after cold file %d: %d slots still held", i+1, in)
		}
	}
	st := s.h.Gate().Stats()
	if st.Admitted != 5 || st.Rejected.Total() != 0 || st.Completed[admit.OutcomeOK] != 5 {
		t.Errorf("stats after five cold reads: admitted %d, rejected %d, ok %d; want 5, 0, 5",
			st.Admitted, st.Rejected.Total(), st.Completed[admit.OutcomeOK])
	}
	if hits := s.h.Stats(); hits.Entries != 5 {
		t.Errorf("cache holds %d entries, want 5", hits.Entries)
	}
}

// Requests that never read file content never reach the gate.
func TestCheapAnswersNeverTouchTheGate(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"cold.txt":       "cold",
		"big.bin":        strings.Repeat("b", 5000),
		"dir/index.html": "<p>dir</p>",
		"noindex/a.txt":  "a",
		".secret":        "s",
		"locked/x.txt":   "x",
		"index.html":     "<p>root</p>",
	})
	if err := os.Chmod(filepath.Join(dir, "locked"), 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
	s := serveDir(t, dir, static.Config{WorkLimit: 1, MaxCachedFileSize: 1000})
	// Learn validators without a body (HEAD never reads).
	head := s.do(t, http.MethodHead, "/cold.txt")
	etag, lastMod := head.header.Get("Etag"), head.header.Get("Last-Modified")
	bigTag := s.do(t, http.MethodHead, "/big.bin").header.Get("Etag")
	if etag == "" || lastMod == "" || bigTag == "" {
		t.Fatalf("HEAD gave no validators: %v", head.header)
	}

	cases := []struct {
		name, method, path string
		hdr                []string
		want               int
	}{
		{"HEAD cold", http.MethodHead, "/cold.txt", nil, 200},
		{"HEAD stream", http.MethodHead, "/big.bin", nil, 200},
		{"HEAD index", http.MethodHead, "/dir/", nil, 200},
		{"304 If-None-Match", http.MethodGet, "/cold.txt", []string{"If-None-Match", etag}, 304},
		{"304 If-Modified-Since", http.MethodGet, "/cold.txt", []string{"If-Modified-Since", lastMod}, 304},
		{"304 stream", http.MethodGet, "/big.bin", []string{"If-None-Match", bigTag}, 304},
		{"412 If-Match", http.MethodGet, "/cold.txt", []string{"If-Match", `"other"`}, 412},
		{"416 range", http.MethodGet, "/cold.txt", []string{"Range", "bytes=100-200"}, 416},
		{"404 missing", http.MethodGet, "/missing.txt", nil, 404},
		{"404 dotfile", http.MethodGet, "/.secret", nil, 404},
		{"404 file as dir", http.MethodGet, "/cold.txt/", nil, 404},
		{"403 no index", http.MethodGet, "/noindex/", nil, 403},
		{"301 directory", http.MethodGet, "/dir", nil, 301},
		{"301 non-canonical", http.MethodGet, "//cold.txt", nil, 301},
		{"405 POST", http.MethodPost, "/cold.txt", nil, 405},
	}
	if os.Geteuid() != 0 { // root reads anything: no 403 to provoke
		cases = append(cases, struct {
			name, method, path string
			hdr                []string
			want               int
		}{"403 permission", http.MethodGet, "/locked/x.txt", nil, 403})
	}
	release := holdSlots(t, s.h.Gate()) // a request that did take a slot would now get 503
	defer release()
	offered := s.h.Gate().Stats().Offered
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.do(t, c.method, c.path, c.hdr...)
			if r.status != c.want {
				t.Errorf("%s %s: status %d, want %d (body %q)", c.method, c.path, r.status, c.want, r.body)
			}
			if got := s.h.Gate().Stats().Offered; got != offered {
				t.Errorf("%s %s reached the gate (offered %d -> %d)", c.method, c.path, offered, got)
			}
		})
	}
}

// A file over MaxCachedFileSize streams and, by default, is gated; it holds
// its slot for the whole stream.
func TestStreamHoldsSlotForItsDuration(t *testing.T) {
	big := strings.Repeat("0123456789", 20_000)
	dir := writeTree(t, map[string]string{"big.bin": big, "small.txt": "small"})
	slow := &slowFS{FS: os.DirFS(dir), match: "big", readGate: make(chan struct{}), stop: make(chan struct{})}
	s := serveDir(t, dir, static.Config{FS: slow, WorkLimit: 1, MaxCachedFileSize: 1024})
	t.Cleanup(slow.stopWaiting)

	// Refused while the only slot is taken.
	release := holdSlots(t, s.h.Gate())
	if r := s.get(t, "/big.bin"); r.status != http.StatusServiceUnavailable {
		t.Fatalf("stream with the only slot held: %d, want 503", r.status)
	}
	release()

	// Served while it holds the slot: a small cold file is refused meanwhile.
	slow.hold.Store(true)
	done := s.async(t, "/big.bin")
	slow.letOneRead(t) // the stream is inside its first Read
	if in := s.h.Gate().InUse(); in != 1 {
		t.Errorf("during the stream: %d slots in use, want 1", in)
	}
	if r := s.get(t, "/small.txt"); r.status != http.StatusServiceUnavailable {
		t.Errorf("small cold file during the stream: %d, want 503 (the stream holds the slot)", r.status)
	}
	slow.stopWaiting()
	r := <-done
	if r.status != http.StatusOK || r.body != big {
		t.Fatalf("stream: status %d, %d bytes, want 200 and %d bytes", r.status, len(r.body), len(big))
	}
	st := s.h.Gate().Stats()
	if k := st.Kinds[s.h.Gate().Kind(static.KindStream)]; k.Admitted != 1 || k.Rejected.Total() != 1 {
		t.Errorf("stream kind: admitted %d, rejected %d; want 1 and 1", k.Admitted, k.Rejected.Total())
	}
	if e := s.h.Stats().Entries; e != 0 {
		t.Errorf("a streamed file was cached (%d entries)", e)
	}
}

// With UngatedStreams, a large file streams without a slot.
func TestUngatedStreams(t *testing.T) {
	big := strings.Repeat("x", 10_000)
	s := serveDir(t, writeTree(t, map[string]string{"big.bin": big, "small.txt": "s"}),
		static.Config{WorkLimit: 1, MaxCachedFileSize: 1024, UngatedStreams: true})
	release := holdSlots(t, s.h.Gate())
	defer release()
	offered := s.h.Gate().Stats().Offered
	if r := s.get(t, "/big.bin"); r.status != http.StatusOK || r.body != big {
		t.Errorf("ungated stream with the slot held: %d (%d bytes), want 200", r.status, len(r.body))
	}
	if r := s.get(t, "/small.txt"); r.status != http.StatusServiceUnavailable {
		t.Errorf("small cold file with the slot held: %d, want 503 (reads stay gated)", r.status)
	}
	if got := s.h.Gate().Stats().Offered - offered; got != 1 {
		t.Errorf("offered %d, want 1 (the small file only)", got)
	}
}

// ScopeRequest is the bug the disk scope fixes: a hit is refused when the
// slot is taken.
func TestRequestScopeRefusesHits(t *testing.T) {
	s := serveDir(t, writeTree(t, map[string]string{"hot.txt": "hot"}), static.Config{WorkLimit: 1, Scope: static.ScopeRequest})
	if r := s.get(t, "/hot.txt"); r.status != 200 {
		t.Fatalf("warming: %d", r.status)
	}
	if r := s.get(t, "/missing"); r.status != 404 {
		t.Fatalf("missing: %d", r.status)
	}
	release := holdSlots(t, s.h.Gate())
	r := s.get(t, "/hot.txt")
	release()
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("request scope, hot file, slot held: %d, want 503 (the cliff)", r.status)
	}
	// Every request went through the gate, hit or 404, and only once each.
	st := s.h.Gate().Stats()
	if st.Offered != 4 || st.Kinds[s.h.Gate().Kind(static.KindRead)].Offered != 4 {
		t.Errorf("offered %d (read %d), want 4 (3 requests + the test's slot, all of kind read)", st.Offered, st.Kinds[s.h.Gate().Kind(static.KindRead)].Offered)
	}
}

// A queued read waits for a slot and gets it when one is released.
func TestQueuedReadGetsReleasedSlot(t *testing.T) {
	dir := writeTree(t, map[string]string{"a.txt": "aaa", "b.txt": "bbb"})
	slow := &slowFS{FS: os.DirFS(dir), match: "a.txt", readGate: make(chan struct{}), stop: make(chan struct{})}
	s := serveDir(t, dir, static.Config{FS: slow, WorkLimit: 1, Queue: 1, MaxWait: 5 * time.Second})
	t.Cleanup(slow.stopWaiting)
	slow.hold.Store(true)
	first := s.async(t, "/a.txt")
	eventually(t, "a.txt to hold the only slot, inside Read", func() bool { return slow.waiting.Load() == 1 })
	second := s.async(t, "/b.txt")
	eventually(t, "the second read to queue", func() bool { return s.h.Gate().Stats().Waiting == 1 })
	slow.stopWaiting()
	if r := <-first; r.status != 200 || r.body != "aaa" {
		t.Errorf("first: %d %q", r.status, r.body)
	}
	if r := <-second; r.status != 200 || r.body != "bbb" {
		t.Errorf("queued second: %d %q", r.status, r.body)
	}
	if st := s.h.Gate().Stats(); st.Admitted != 2 || st.Rejected.Total() != 0 {
		t.Errorf("admitted %d rejected %d, want 2 and 0", st.Admitted, st.Rejected.Total())
	}
}

// Shutdown: after Close the gate refuses with reason closed; hits still work.
func TestClosedGateRefusesReadsNotHits(t *testing.T) {
	dir := writeTree(t, map[string]string{"hot.txt": "hot", "cold.txt": "cold"})
	h, err := static.New(static.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := &site{h: h}
	s.srv = newServer(h)
	defer s.srv.Close()
	s.client = s.srv.Client()
	if r := s.get(t, "/hot.txt"); r.status != 200 {
		t.Fatal(r.status)
	}
	h.Gate().Close()
	if r := s.get(t, "/cold.txt"); r.status != 503 || !strings.Contains(r.body, `"closed"`) || !r.close {
		t.Errorf("cold after close: %d %q %v", r.status, r.body, r.header)
	}
	if r := s.get(t, "/hot.txt"); r.status != 200 || r.body != "hot" {
		t.Errorf("hot after close: %d %q", r.status, r.body)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
}

// lyingFS opens files whose Stat reports a size one byte larger than the
// file has, as if the file changed between the stat and the read.
type lyingFS struct{ fs.FS }

func (l lyingFS) Open(name string) (fs.File, error) {
	f, err := l.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return lyingFile{f}, nil
}

type lyingFile struct{ fs.File }

func (f lyingFile) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil || fi.IsDir() {
		return fi, err
	}
	return grownInfo{fi}, nil
}

type grownInfo struct{ fs.FileInfo }

func (g grownInfo) Size() int64 { return g.FileInfo.Size() + 1 }

// A file that changed while it was read is not served with wrong headers:
// the client gets a 500, the slot is released with outcome error, and
// nothing is cached.
func TestFileChangedDuringReadReleasesSlot(t *testing.T) {
	dir := writeTree(t, map[string]string{"f.txt": "body"})
	s := serveDir(t, dir, static.Config{FS: lyingFS{os.DirFS(dir)}, WorkLimit: 1})
	r := s.get(t, "/f.txt")
	if r.status != http.StatusInternalServerError || r.header.Get("Etag") != "" {
		t.Errorf("changed file: %d, Etag %q; want 500 without file headers", r.status, r.header.Get("Etag"))
	}
	st := s.h.Gate().Stats()
	if st.Completed[admit.OutcomeError] != 1 || st.InUse != 0 {
		t.Errorf("gate after a failed read: %d errors, %d in use; want 1 and 0", st.Completed[admit.OutcomeError], st.InUse)
	}
	if e := s.h.Stats().Entries; e != 0 {
		t.Errorf("%d entries cached after a failed read", e)
	}
}

// inUseAtWrite records how many disk slots are held each time the handler
// writes body bytes.
type inUseAtWrite struct {
	*httptest.ResponseRecorder
	g     *admit.Gate
	inUse []int64
}

func (w *inUseAtWrite) Write(b []byte) (int, error) {
	w.inUse = append(w.inUse, w.g.InUse())
	return w.ResponseRecorder.Write(b)
}

// A small cold file gives its slot back right after the read, before the
// response is written (a slow client does not hold the disk); a stream
// holds it while it writes.
func TestReadSlotReleasedBeforeResponseIsWritten(t *testing.T) {
	dir := writeTree(t, map[string]string{"small.txt": "small", "big.bin": strings.Repeat("b", 5000), "ranged.txt": "ranged"})
	h, err := static.New(static.Config{Root: dir, MaxCachedFileSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, c := range []struct {
		path    string
		wantUse int64
		rng     string
	}{{"/small.txt", 0, ""}, {"/big.bin", 1, ""}, {"/ranged.txt", 0, "bytes=1-"}} {
		w := &inUseAtWrite{ResponseRecorder: httptest.NewRecorder(), g: h.Gate()}
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.rng != "" {
			req.Header.Set("Range", c.rng) // a cold read through ServeContent
		}
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusPartialContent || len(w.inUse) == 0 {
			t.Fatalf("GET %s: %d, %d writes", c.path, w.Code, len(w.inUse))
		}
		for _, n := range w.inUse {
			if n != c.wantUse {
				t.Errorf("GET %s: %d slots held while writing the body, want %d", c.path, n, c.wantUse)
				break
			}
		}
	}
	checkInvariants(t, h.Gate())
}

// countingFS counts the opens of an FS.
type countingFS struct {
	fs.FS
	opens atomic.Int64
}

func (c *countingFS) Open(name string) (fs.File, error) {
	c.opens.Add(1)
	return c.FS.Open(name)
}

// While the disk gate is full, a cold read of a file recently opened is
// refused before it is opened again (the open's system calls are most of
// what a refusal costs); a file not known yet is opened and then refused;
// with a slot free, a known file that is gone is 404 without touching
// the gate.
func TestKnownFileRefusedBeforeItsOpen(t *testing.T) {
	dir := writeTree(t, map[string]string{"known.txt": "known", "other.txt": "other", "gone.txt": "gone"})
	cfs := &countingFS{FS: os.DirFS(dir)}
	s := serveDir(t, dir, static.Config{FS: cfs, WorkLimit: 1, CacheBytes: -1, Revalidate: time.Minute})
	g := s.h.Gate()
	for _, p := range []string{"/known.txt", "/gone.txt"} {
		if r := s.get(t, p); r.status != http.StatusOK {
			t.Fatalf("GET %s: %d", p, r.status)
		}
	}
	opens := cfs.opens.Load()
	release := holdSlots(t, g)
	before := g.Stats()
	known := s.get(t, "/known.txt")
	if known.status != http.StatusServiceUnavailable || !strings.Contains(known.body, `"reason":"full"`) {
		t.Errorf("known file with the gate full: %d %q, want the 503", known.status, known.body)
	}
	if got := cfs.opens.Load() - opens; got != 0 {
		t.Errorf("the known file was opened %d times before its refusal, want 0", got)
	}
	if other := s.get(t, "/other.txt"); other.status != http.StatusServiceUnavailable || cfs.opens.Load()-opens != 1 {
		t.Errorf("a file not known yet: %d after %d opens, want 503 after 1", other.status, cfs.opens.Load()-opens)
	}
	if after := g.Stats(); after.Rejected.Total()-before.Rejected.Total() != 2 {
		t.Errorf("refusals counted: %d, want 2", after.Rejected.Total()-before.Rejected.Total())
	}
	release()

	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	before = g.Stats()
	if r := s.get(t, "/gone.txt"); r.status != http.StatusNotFound {
		t.Errorf("a known file that is gone, slot free: %d, want 404", r.status)
	}
	if after := g.Stats(); after.Offered != before.Offered {
		t.Errorf("the 404 of a known file touched the gate: offered %d -> %d", before.Offered, after.Offered)
	}
	if r := s.get(t, "/known.txt"); r.status != http.StatusOK || r.body != "known" {
		t.Errorf("known file with the slot free: %d %q", r.status, r.body)
	}
}

// Config.Limit builds the disk gate with an adaptive limit that starts
// from WorkLimit, observes the reads beside Config.Observer, and is
// returned by Handler.Limit; without a gate it is an error.
func TestAdaptiveDiskGate(t *testing.T) {
	dir := writeTree(t, map[string]string{"a.txt": "a\n"})
	own := &countReads{}
	s := serveDir(t, dir, static.Config{WorkLimit: 12, CacheBytes: -1, Observer: own,
		Limit: &limit.Config{Law: &limit.AIMD{}, Min: 2, Max: 20}})
	a := s.h.Limit()
	if a == nil || a.State().Gate != static.GateName || a.Limit() != 12 || s.h.Gate().Capacity() != 12 {
		t.Fatalf("adaptive disk gate: limit %v, capacity %d; want one attached to %q starting at 12", a, s.h.Gate().Capacity(), static.GateName)
	}
	for range 3 {
		if r := s.get(t, "/a.txt"); r.status != http.StatusOK {
			t.Fatalf("GET: %d", r.status)
		}
	}
	if n := own.n.Load(); n != 3 {
		t.Errorf("Config.Observer saw %d completed reads, want 3 (the limit must not replace it)", n)
	}
	if s := serveDir(t, dir, static.Config{WorkLimit: 4}); s.h.Limit() != nil {
		t.Error("a fixed disk gate reports an adaptive limit")
	}
	if _, err := static.New(static.Config{FS: os.DirFS(dir), WorkLimit: -1, Limit: &limit.Config{}}); !errors.Is(err, static.ErrInvalidConfig) {
		t.Errorf("an adaptive limit without a gate: %v, want ErrInvalidConfig", err)
	}
}

// countReads counts the disk gate's completions.
type countReads struct{ n atomic.Int64 }

func (c *countReads) ObserveAdmission(admit.AdmissionEvent)   {}
func (c *countReads) ObserveCompletion(admit.CompletionEvent) { c.n.Add(1) }
