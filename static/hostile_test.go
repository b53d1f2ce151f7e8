package static_test

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/static"
)

// ctimeOf returns a file's change time (Linux), or zero.
func ctimeOf(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}

// A rewrite that keeps the size and restores the modification time (what
// rsync -t or a careless deploy does) is noticed on the next
// revalidation: the change time moved. Before, size and mtime matched and
// the old content was served for ever.
func TestRevalidationNoticesRewriteWithRestoredMtime(t *testing.T) {
	dir := writeTree(t, map[string]string{"f.txt": "AAAA"})
	file := filepath.Join(dir, "f.txt")
	s := serveDir(t, dir, static.Config{Revalidate: -1})
	if r := s.get(t, "/f.txt"); r.body != "AAAA" {
		t.Fatalf("first read %q", r.body)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	before := ctimeOf(t, file)
	// The kernel's file clock ticks every few milliseconds: rewrite until
	// the change time moves, as it does for any rewrite later than that.
	for i := 0; ; i++ {
		if err := os.WriteFile(file, []byte("BBBB"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if ctimeOf(t, file) != before || i == 1000 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if got, _ := os.Stat(file); got.Size() != fi.Size() || !got.ModTime().Equal(fi.ModTime()) {
		t.Fatal("the rewrite did not keep size and modification time")
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		r := s.do(t, method, "/f.txt")
		if method == http.MethodGet && r.body != "BBBB" {
			t.Errorf("GET after a same-size rewrite with the mtime restored: %q, want BBBB", r.body)
		}
		if r.status != http.StatusOK {
			t.Errorf("%s: %d", method, r.status)
		}
	}
}

// A file made unreadable after it was cached is no longer served from the
// cache (its mode and change time moved), and an unreadable file gets the
// same 403 for GET and HEAD: before, GET said 500 and HEAD 200.
func TestPermissionChangesAreNoticedAndGETAndHEADAgree(t *testing.T) {
	dir := writeTree(t, map[string]string{"f.txt": "secret soon", "never.txt": "never readable"})
	file := filepath.Join(dir, "f.txt")
	s := serveDir(t, dir, static.Config{Revalidate: -1})
	if r := s.get(t, "/f.txt"); r.status != 200 {
		t.Fatalf("first read %d", r.status)
	}
	misses := s.h.Stats().Misses
	for _, p := range []string{file, filepath.Join(dir, "never.txt")} {
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(p, 0o644) })
	}
	if os.Geteuid() == 0 {
		// root reads anything: the changed mode must still drop the entry.
		s.get(t, "/f.txt")
		if got := s.h.Stats().Misses; got != misses+1 {
			t.Errorf("after chmod 000 the cached entry was served (misses %d -> %d); want it dropped and re-read", misses, got)
		}
		t.Skip("running as root: chmod 000 does not make files unreadable; checked only that the entry was dropped")
	}
	for _, path := range []string{"/f.txt", "/never.txt"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if r := s.do(t, method, path); r.status != http.StatusForbidden {
				t.Errorf("%s %s of an unreadable file: %d, want 403", method, path, r.status)
			}
		}
	}
}

// With dotfiles hidden, a symbolic link whose target is a dotfile, or
// lies in a dot directory, is hidden too: the rule applies to what is
// served, not only to the name asked for.
func TestSymlinkToDotfileIsHidden(t *testing.T) {
	dir := writeTree(t, map[string]string{".secret": "password", ".git/config": "[core]", "ok.txt": "fine"})
	for link, target := range map[string]string{"public.txt": ".secret", "repo": ".git", "alias.txt": "ok.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	hidden := serveDir(t, dir, static.Config{})
	for path, want := range map[string]int{"/public.txt": 404, "/repo/config": 404, "/alias.txt": 200, "/ok.txt": 200} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if r := hidden.do(t, method, path); r.status != want {
				t.Errorf("%s %s: %d, want %d", method, path, r.status, want)
			}
		}
	}
	shown := serveDir(t, dir, static.Config{Dotfiles: true})
	if r := shown.get(t, "/public.txt"); r.status != 200 || r.body != "password" {
		t.Errorf("with dotfiles served, the link: %d %q", r.status, r.body)
	}
}

// --root follows an atomic symlink swap of the root (the usual release
// pattern: ln -sfn new cur.tmp && mv -T cur.tmp cur): while releases are
// swapped under load, every request succeeds and every answer is one
// release's file whole, never stat from one and bytes from the other;
// after the last swap the new release is served, also once the old one is
// deleted. Before, the root was fixed at start, and deleting the old
// release turned every request into an error.
func TestRootFollowsSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	releases := map[string]map[string]string{
		"r1": {"a.txt": "release one: a", "b.txt": "release one: bbbbbbbbbbbb", "index.html": "<p>one</p>"},
		"r2": {"a.txt": "a from the second release", "b.txt": "two b", "index.html": "<p>release two</p>"},
	}
	valid := map[string]map[string]bool{}
	for rel, files := range releases {
		for name, content := range files {
			p := filepath.Join(base, rel, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if valid["/"+name] == nil {
				valid["/"+name] = map[string]bool{}
			}
			valid["/"+name][content] = true
		}
	}
	valid["/"] = valid["/index.html"]
	cur := filepath.Join(base, "cur")
	swap := func(rel string) {
		tmp := filepath.Join(base, "cur.tmp")
		if err := os.Symlink(filepath.Join(base, rel), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cur); err != nil {
			t.Fatal(err)
		}
	}
	swap("r1")
	s := serveDir(t, "", static.Config{Root: cur, Revalidate: -1})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	var served int
	for w := range 4 {
		wg.Go(func() {
			paths := []string{"/a.txt", "/b.txt", "/", "/index.html"}
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := paths[i%len(paths)]
				r, err := s.fetch(http.MethodGet, p)
				mu.Lock()
				served++
				switch {
				case err != nil:
					bad = append(bad, err.Error())
				case r.status != 200 || !valid[p][r.body]:
					bad = append(bad, fmt.Sprintf("GET %s: %d %q", p, r.status, r.body))
				}
				mu.Unlock()
			}
		})
	}
	for i := range 40 {
		swap([]string{"r2", "r1"}[i%2])
		time.Sleep(2 * time.Millisecond)
	}
	swap("r2")
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d of %d requests failed or mixed releases during the swaps, e.g. %v", len(bad), served, bad[:min(len(bad), 5)])
	}
	if err := os.RemoveAll(filepath.Join(base, "r1")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a.txt", "/b.txt", "/"} {
		want := releases["r2"][strings.TrimPrefix(p, "/")]
		if p == "/" {
			want = releases["r2"]["index.html"]
		}
		if r := s.get(t, p); r.status != 200 || r.body != want {
			t.Errorf("after the last swap and deleting the old release, GET %s: %d %q, want %q", p, r.status, r.body, want)
		}
	}
	t.Logf("%d requests during 41 swaps", served)
}

// Many ranges do not buy a reply larger than the file plus a few part
// headers (over MaxRanges, or overlapping, the whole file is sent once),
// and "bytes=-0" (a zero-length suffix) is 416. Before, 2,000 one-byte
// ranges of a 19 KB file got a 295 KB reply, and "bytes=-0" a 206 with
// Content-Range "bytes 11-10/11".
func TestRangesAreBounded(t *testing.T) {
	content := strings.Repeat("0123456789abcdefghi", 1000) // 19,000 bytes
	dir := writeTree(t, map[string]string{"f.txt": content, "small.txt": "hello world"})
	s := serveDir(t, dir, static.Config{})
	var many []string
	for i := range 2000 {
		many = append(many, fmt.Sprintf("%d-%d", 2*i, 2*i))
	}
	for _, round := range []string{"cold", "cached"} {
		t.Run(round, func(t *testing.T) {
			r := s.get(t, "/f.txt", "Range", "bytes="+strings.Join(many, ","))
			if r.status != 200 || len(r.body) != len(content) {
				t.Errorf("2000 ranges: %d, %d bytes; want 200 and the file once (%d bytes)", r.status, len(r.body), len(content))
			}
			r = s.get(t, "/f.txt", "Range", "bytes=0-,0-,0-")
			if r.status != 200 || len(r.body) != len(content) {
				t.Errorf("overlapping ranges: %d, %d bytes; want 200 and the file once", r.status, len(r.body))
			}
			r = s.get(t, "/f.txt", "Range", "bytes=0-0,5-5,10-10")
			if r.status != 206 || len(r.body) > 3+3*256 || !strings.HasPrefix(r.header.Get("Content-Type"), "multipart/byteranges") {
				t.Errorf("three ranges: %d, %d bytes, %q; want a small 206 multipart reply", r.status, len(r.body), r.header.Get("Content-Type"))
			}
			r = s.get(t, "/small.txt", "Range", "bytes=-0")
			if r.status != http.StatusRequestedRangeNotSatisfiable || r.header.Get("Content-Range") != "bytes */11" {
				t.Errorf("bytes=-0: %d, Content-Range %q; want 416 and bytes */11", r.status, r.header.Get("Content-Range"))
			}
			r = s.get(t, "/small.txt", "Range", "bytes=0-1,-0")
			if r.status != 206 || r.body != "he" || r.header.Get("Content-Range") != "bytes 0-1/11" {
				t.Errorf("bytes=0-1,-0: %d %q %q; want 206 \"he\" bytes 0-1/11", r.status, r.body, r.header.Get("Content-Range"))
			}
		})
	}
}

// WorkLimit < 0 (--work-limit off) means no gate at all: every read goes
// through at once, however many, and there is no gate to report.
func TestWorkLimitOffHasNoGate(t *testing.T) {
	files := map[string]string{}
	const n = 2 * static.DefaultWorkLimit
	for i := range n {
		files[fmt.Sprintf("f%d.txt", i)] = fmt.Sprintf("file %d", i)
	}
	dir := writeTree(t, files)
	slow := &slowFS{FS: os.DirFS(dir), match: "f", readGate: make(chan struct{}), stop: make(chan struct{})}
	h, err := static.New(static.Config{FS: slow, WorkLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if h.Gate() != nil {
		t.Fatalf("Gate() = %v, want nil with the gate off", h.Gate())
	}
	srv := newServer(h)
	s := &site{h: h, srv: srv, client: srv.Client(), dir: dir}
	t.Cleanup(func() { srv.Close(); h.Close() })
	t.Cleanup(slow.stopWaiting)
	slow.hold.Store(true)
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for i := range n {
		wg.Go(func() {
			r, err := s.fetch(http.MethodGet, fmt.Sprintf("/f%d.txt", i))
			if err != nil {
				t.Error(err)
			}
			statuses <- r.status
		})
	}
	eventually(t, fmt.Sprintf("%d cold reads in progress at once", n), func() bool { return slow.waiting.Load() == n })
	slow.stopWaiting()
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != 200 {
			t.Errorf("a read was answered %d with no gate", st)
		}
	}
}

// A download aborted mid-stream (the client closes after a few bytes) is
// recorded with outcome canceled, on the sendfile path too: the write
// error of sendfile is the only sign, and it was dropped.
func TestAbortedStreamIsCanceled(t *testing.T) {
	dir := writeTree(t, map[string]string{"big.bin": strings.Repeat("x", 16<<20)})
	s := serveDir(t, dir, static.Config{WorkLimit: 1})
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(bufio.NewReader(c), make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetLinger(0) // a reset, as a killed client sends
	c.Close()
	g := s.h.Gate()
	eventually(t, "the stream's slot to be released", func() bool { return g.Stats().Completed.Total() == 1 })
	if st := g.Stats(); st.Completed[admit.OutcomeCanceled] != 1 {
		t.Errorf("aborted stream completed %v, want outcome canceled", st.Completed)
	}
}

// A GET that declares a body and does not send it waits for it before
// touching the gate: a large file's stream slot is not held meanwhile, and
// once the body arrives the request is served. Before, net/http's discard
// of the body blocked with the stream's slot held.
func TestDeclaredBodyWaitsWithoutASlot(t *testing.T) {
	dir := writeTree(t, map[string]string{"big.bin": strings.Repeat("y", 2<<20), "small.txt": "small"})
	s := serveDir(t, dir, static.Config{WorkLimit: 1})
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
	time.Sleep(50 * time.Millisecond) // let the request reach the handler
	if r := s.get(t, "/small.txt"); r.status != 200 {
		t.Errorf("cold read while a body is awaited: %d, want 200 (no slot held)", r.status)
	}
	if in := s.h.Gate().InUse(); in != 0 {
		t.Errorf("%d slots held while the body is awaited", in)
	}
	io.WriteString(c, "12345")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || n != 2<<20 {
		t.Errorf("after the body: %d, %d bytes", resp.StatusCode, n)
	}
	// A body too large for a GET is refused, and the connection closed.
	c2, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "GET /small.txt HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 100<<10, strings.Repeat("z", 100<<10))
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp2, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusRequestEntityTooLarge || !resp2.Close {
		t.Errorf("GET with a 100 KiB body: %d close=%v, want 413 and Connection: close", resp2.StatusCode, resp2.Close)
	}
}

// deniedFS refuses to open one name, as the kernel does for a file
// without read permission (whatever the test's user id), while stat
// still works, as it does for such a file.
type deniedFS struct {
	fs.FS
	name string
}

func (d deniedFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(d.FS, name) }

func (d deniedFS) Open(name string) (fs.File, error) {
	if name == d.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.Open(name)
}

// A file that cannot be read gets the same answer, 403, for GET and HEAD,
// cached or not, on any user id. Before, GET said 500 and HEAD 200.
func TestUnreadableFileSameForGETAndHEAD(t *testing.T) {
	dir := writeTree(t, map[string]string{"locked.txt": "no", "big.bin": strings.Repeat("b", 2<<20)})
	for _, name := range []string{"locked.txt", "big.bin"} {
		s := serveDir(t, dir, static.Config{FS: deniedFS{os.DirFS(dir), name}})
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodGet} {
			if r := s.do(t, method, "/"+name); r.status != http.StatusForbidden {
				t.Errorf("%s /%s (unreadable): %d, want 403", method, name, r.status)
			}
		}
		if st := s.h.Gate().Stats(); st.Offered != 0 {
			t.Errorf("an unreadable file reached the gate %d times", st.Offered)
		}
	}
}

// A stream whose client stays connected but stops reading ends when the
// server's send deadline passes (set here as the server frame does); the
// slot is released with outcome canceled although the request's context
// was never canceled: the write error is the only sign. That holds on
// net/http, whose file copy (sendfile) bypasses the writer that cancels
// the context; sluice's engine cancels the context on any failed write,
// so there the outcome is checked but the context is not a witness.
// Over a second: real socket buffers fill with a 32 MiB file before the 300
// ms send deadline can pass.
func TestStalledStreamIsCanceled(t *testing.T) {
	dir := writeTree(t, map[string]string{"big.bin": strings.Repeat("s", 32<<20)})
	h, err := static.New(static.Config{Root: dir, WorkLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctxErr := make(chan error, 1)
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		h.ServeHTTP(w, r)
		ctxErr <- r.Context().Err()
	}))
	t.Cleanup(func() { srv.Close(); h.Close() })
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-ctxErr:
		if err != nil && testEngine == "net" {
			t.Fatalf("the request's context ended (%v): the test needs a client that stays", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after its write deadline")
	}
	st := h.Gate().Stats()
	if st.Completed[admit.OutcomeCanceled] != 1 || st.Inflight != 0 {
		t.Errorf("stalled stream: completed %v, inflight %d; want outcome canceled and the slot free", st.Completed, st.Inflight)
	}
}
