package static

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// rootSnap is one opening of the served tree. For Config.Root it is the
// directory the path resolved to when it was opened; a request pins the
// snapshot it starts with, so everything it stats, opens and reads comes
// from one release even while a deploy swaps a symbolic link.
type rootSnap struct {
	fsys  fs.FS
	root  *os.Root  // nil for Config.FS
	real  string    // the directory's real path ("" if unknown)
	ident fileIdent // the directory's identity, to notice a swap
	gen   uint64    // cache entries remember the snapshot they came from

	// refs counts the requests using the snapshot, plus one while it is
	// current; the root closes when it drops to zero.
	refs      atomic.Int64
	closeOnce sync.Once
}

// openSnap opens dir as a snapshot of generation gen.
func openSnap(dir string, gen uint64) (*rootSnap, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("static: open root: %w", err)
	}
	d, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("%w: root %q is not a readable directory", ErrInvalidConfig, dir)
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil || !fi.IsDir() {
		root.Close()
		return nil, fmt.Errorf("%w: root %q is not a readable directory", ErrInvalidConfig, dir)
	}
	s := &rootSnap{fsys: root.FS(), root: root, ident: identOf(fi), gen: gen}
	s.real, _ = realPath(d)
	s.refs.Store(1)
	return s, nil
}

// release drops one reference; the last closes the root.
func (s *rootSnap) release() {
	if s.root != nil && s.refs.Add(-1) <= 0 {
		s.closeOnce.Do(func() { s.root.Close() })
	}
}

// hiddenTarget reports whether the open file f, once every symbolic link
// is resolved, has a path component under the root that starts with "."
// (a link to a dotfile, or into a dot directory). Unknown paths are not
// hidden: the requested name was already checked.
func (s *rootSnap) hiddenTarget(f fs.File) bool {
	if s.real == "" {
		return false
	}
	var buf [1024]byte
	p, ok := appendRealPath(buf[:0], f)
	if !ok {
		if long, ok := realPath(f); ok {
			p = []byte(long)
		} else {
			return false
		}
	}
	return hiddenUnder(s.real, p)
}

// hiddenUnder reports whether p (a path the kernel resolved, so clean and
// absolute) is outside root, or has a component under it that starts
// with ".".
func hiddenUnder(root string, p []byte) bool {
	rel, ok := bytes.CutPrefix(p, []byte(root))
	if !ok {
		return true // outside the root: os.Root should have refused it
	}
	if !strings.HasSuffix(root, "/") {
		if len(rel) == 0 {
			return false // the root itself
		}
		if rel[0] != '/' {
			return true // a sibling that shares the root's name as a prefix
		}
		rel = rel[1:]
	}
	for len(rel) > 0 {
		if rel[0] == '.' {
			return true
		}
		i := bytes.IndexByte(rel, '/')
		if i < 0 {
			break
		}
		rel = rel[i+1:]
	}
	return false
}

// pin returns the current snapshot with a reference taken; release it
// when the request is done with the tree. For Config.Root it first
// notices a swapped root, at most once per revalidation interval.
func (h *Handler) pin(now int64) *rootSnap {
	if h.rootPath == "" {
		return h.cur.Load()
	}
	h.followRoot(now)
	for {
		s := h.cur.Load()
		if s.refs.Add(1) > 1 {
			return s
		}
		s.release() // retired and released meanwhile: take the new one
	}
}

// followRoot reopens Config.Root when the directory it names is no
// longer the one open (a symbolic link swapped by a deploy), at most
// once per revalidation interval. The old snapshot closes when its last
// request ends; cached entries from it are dropped on their next use.
func (h *Handler) followRoot(now int64) {
	last := h.rootChecked.Load()
	if h.revalidate > 0 && now-last < int64(h.revalidate) {
		return
	}
	if !h.rootChecked.CompareAndSwap(last, now) {
		return // another request is checking
	}
	fi, err := os.Stat(h.rootPath)
	if err != nil {
		h.log.Warn("static: root no longer readable; serving the last one opened", "root", h.rootPath, "err", err)
		return
	}
	h.rootMu.Lock()
	defer h.rootMu.Unlock()
	cur := h.cur.Load()
	if identOf(fi).sameFile(cur.ident) {
		return
	}
	next, err := openSnap(h.rootPath, cur.gen+1)
	if err != nil {
		h.log.Warn("static: root changed but cannot be opened; serving the last one opened", "root", h.rootPath, "err", err)
		return
	}
	h.cur.Store(next)
	cur.release()
	h.log.Info("static: root changed; serving the new directory", "root", h.rootPath, "generation", next.gen)
}
