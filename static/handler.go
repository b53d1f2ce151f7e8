package static

import (
	"bytes"
	"embed"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/limit"
)

// Handler serves files with disk reads behind the "disk" gate. It is an
// http.Handler; all methods are safe for concurrent use. Create it with
// New and Close it when the server has stopped.
type Handler struct {
	// cur is the tree being served. For Config.Root it is replaced when
	// the root path comes to name another directory (followRoot).
	cur         atomic.Pointer[rootSnap]
	rootPath    string // Config.Root, "" otherwise
	rootChecked atomic.Int64
	rootMu      sync.Mutex      // serialises root swaps
	gate        *admit.Gate     // nil with WorkLimit < 0: no gate at all
	adaptive    *limit.Adaptive // nil without Config.Limit
	kindRead    admit.Kind
	kindStream  admit.Kind
	cache       *cache // nil when the cache is off
	maxCached   int64  // files up to this size are read whole; larger ones stream
	revalidate  time.Duration
	gateStreams bool
	scope       Scope
	dotfiles    bool
	log         *slog.Logger
	epoch       time.Time
	// hashETags holds content-hash ETags for the files of an embed.FS,
	// which have no modification time, by name. Read-only after New.
	hashETags map[string]string

	hdrAcceptRanges []string // shared, len == cap
	queue           int      // Config.Queue: the gate can make a read wait
	meta            *metaCache

	hits, misses atomic.Uint64
}

// New returns a Handler configured by cfg, or an error wrapping
// ErrInvalidConfig (or the error opening Config.Root).
func New(cfg Config) (*Handler, error) {
	h := &Handler{
		dotfiles:        cfg.Dotfiles,
		gateStreams:     !cfg.UngatedStreams,
		scope:           cfg.Scope,
		log:             cfg.Logger,
		epoch:           time.Now(),
		hdrAcceptRanges: []string{"bytes"},
		queue:           cfg.Queue,
		meta:            newMetaCache(),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Root == "" && cfg.FS == nil {
		return nil, fmt.Errorf("%w: Root or FS is required: the directory or the file system to serve", ErrInvalidConfig)
	}
	if cfg.Scope != ScopeDisk && cfg.Scope != ScopeRequest {
		return nil, fmt.Errorf("%w: unknown gate scope %d", ErrInvalidConfig, cfg.Scope)
	}
	if cfg.WorkLimit < 0 && cfg.Scope == ScopeRequest {
		return nil, fmt.Errorf("%w: ScopeRequest needs a gate (WorkLimit %d turns it off)", ErrInvalidConfig, cfg.WorkLimit)
	}
	if cfg.WorkLimit < 0 && cfg.Limit != nil {
		return nil, fmt.Errorf("%w: an adaptive Limit needs a gate (WorkLimit %d turns it off)", ErrInvalidConfig, cfg.WorkLimit)
	}
	if cfg.Queue < 0 {
		return nil, fmt.Errorf("%w: negative queue %d", ErrInvalidConfig, cfg.Queue)
	}
	cacheBytes := cfg.CacheBytes
	switch {
	case cacheBytes == 0:
		cacheBytes = DefaultCacheBytes
	case cacheBytes > 0:
	default:
		cacheBytes = 0
	}
	h.maxCached = cfg.MaxCachedFileSize
	switch {
	case h.maxCached == 0:
		h.maxCached = DefaultMaxCachedFileSize
	case h.maxCached < 0:
		h.maxCached = -1 // every file streams
	}
	if cacheBytes > 0 {
		h.maxCached = min(h.maxCached, cacheBytes)
		h.cache = newCache(cacheBytes)
	} else {
		// Without a cache, small files are still read whole (one gated
		// read, one Write), they are just not kept.
		h.maxCached = min(h.maxCached, DefaultMaxCachedFileSize)
	}
	h.revalidate = cfg.Revalidate
	if h.revalidate == 0 {
		h.revalidate = DefaultRevalidate
	}

	if cfg.WorkLimit >= 0 {
		maxWait := cfg.MaxWait
		if cfg.Queue == 0 {
			maxWait = 0 // documented as ignored without a queue
		}
		gate, adaptive, err := limit.NewGate(admit.Config{
			Name:       GateName,
			Capacity:   cfg.WorkLimit,
			MaxWaiters: cfg.Queue,
			MaxWait:    maxWait,
			Kinds:      []string{KindRead, KindStream},
			Observer:   cfg.Observer,
		}, cfg.Limit)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		h.gate, h.adaptive = gate, adaptive
		h.kindRead, h.kindStream = gate.Kind(KindRead), gate.Kind(KindStream)
	}

	switch {
	case cfg.Root != "":
		snap, err := openSnap(cfg.Root, 0)
		if err != nil {
			return nil, err
		}
		h.rootPath = cfg.Root
		h.cur.Store(snap)
	default:
		if e, ok := cfg.FS.(embed.FS); ok {
			var err error
			if h.hashETags, err = contentETags(e); err != nil {
				return nil, fmt.Errorf("static: hashing the embedded files: %w", err)
			}
		}
		h.cur.Store(&rootSnap{fsys: cfg.FS})
	}
	return h, nil
}

// Gate returns the "disk" gate, for metrics and state pages, or nil when
// Config.WorkLimit turned the gate off.
func (h *Handler) Gate() *admit.Gate { return h.gate }

// Limit returns the adaptive limit moving the disk gate (Config.Limit),
// for metrics and state pages, or nil when the capacity is fixed.
func (h *Handler) Limit() *limit.Adaptive { return h.adaptive }

// Close closes the gate (reads still in flight finish; new ones are
// refused with reason closed) and the root directory. Call it after the
// server has shut down.
func (h *Handler) Close() error {
	if h.gate != nil {
		h.gate.Close()
	}
	h.rootMu.Lock()
	defer h.rootMu.Unlock()
	if s := h.cur.Load(); s.root != nil {
		s.closeOnce.Do(func() { s.root.Close() })
	}
	return nil
}

// Stats is a snapshot of the cache's counters.
type Stats struct {
	Hits      uint64 // requests answered from memory
	Misses    uint64 // requests that found no fresh entry and went to disk metadata
	Evictions uint64 // entries dropped to make room
	Entries   int    // entries held
	Bytes     int64  // content bytes held
}

// Stats returns the cache's counters.
func (h *Handler) Stats() Stats {
	s := Stats{Hits: h.hits.Load(), Misses: h.misses.Load()}
	if h.cache != nil {
		s.Evictions = h.cache.evictions.Load()
		s.Entries, s.Bytes = h.cache.usage()
	}
	return s
}

// maxDiscardBody is the largest request body a GET or HEAD may carry; it
// is read and discarded before any slot is taken.
const maxDiscardBody = 64 << 10

// ServeHTTP answers GET and HEAD; other methods get 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody && !discardBody(w, r) {
		return
	}
	if h.scope == ScopeRequest {
		// The request-scoped bug, on purpose: the slot is taken before the cache is
		// looked up, so cache hits queue behind (or are refused by) disk work.
		var s slot
		var err error
		if s.p, err = h.gate.AcquireFor(r.Context(), admit.Request{Kind: h.kindRead}); err != nil {
			httpgate.WriteRefusal(w, r, err)
			return
		}
		defer s.release(admit.OutcomeOK)
		h.serve(w, r, true)
		return
	}
	h.serve(w, r, false)
}

// serve answers a GET or HEAD. reqHeld is true when the request already
// holds a slot (ScopeRequest), so the disk step must not take another.
// Decide's core answers what it can; serve continues from its lookup
// with the rest (conditions and ranges through http.ServeContent,
// redirects, streams).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, reqHeld bool) {
	var f found
	if reqHeld {
		f = h.lookup(r.URL.Path)
	} else {
		var a Answer
		a, f = h.decide(r.Context(), r.Method == http.MethodHead, r.URL.Path, netHeader(r.Header))
		if a.kind != AnswerPass {
			h.writeAnswer(w, r, a)
			return
		}
	}
	switch f.v {
	case pathBad:
		http.Error(w, "400 bad request: invalid path", http.StatusBadRequest)
		return
	case pathHidden:
		notFound(w)
		return
	case pathNonCanon:
		http.Redirect(w, r, canonicalURL(r.URL.Path, r.URL.RawQuery), http.StatusMovedPermanently)
		return
	}
	defer f.snap.release()
	if f.e != nil {
		h.hits.Add(1)
		h.serveEntry(w, r, f.e)
		return
	}
	h.misses.Add(1)
	h.serveDisk(w, r, f.snap, f.name, f.dirSlash, reqHeld)
}

// discardBody reads and drops a GET's or HEAD's body (it has no meaning
// for a file) before any slot is taken, so that net/http's own discard
// cannot block a response that holds one. The read runs under the
// server's body deadline (connlimit's BodyTimeout). A body that does not
// arrive gets 408, one over maxDiscardBody 413; both close the
// connection.
func discardBody(w http.ResponseWriter, r *http.Request) bool {
	n, err := io.CopyN(io.Discard, r.Body, maxDiscardBody+1)
	switch {
	case err == io.EOF:
		return true
	case err == nil || n > maxDiscardBody:
		w.Header().Set("Connection", "close")
		http.Error(w, "413 content too large: a GET or HEAD carries no body", http.StatusRequestEntityTooLarge)
	default:
		w.Header().Set("Connection", "close")
		http.Error(w, "408 request timeout: the declared body did not arrive", http.StatusRequestTimeout)
	}
	return false
}

// now is the monotonic time since the handler was made, in nanoseconds.
func (h *Handler) now() int64 { return int64(time.Since(h.epoch)) }

// fresh reports whether e may be served: it comes from the tree being
// served, and it was checked against the disk within the revalidation
// interval or a stat (never gated: no content is read) shows the same
// file. The same file means the same size, modification time, mode,
// device, inode and change time: a rename over it, a chmod, or a rewrite
// that restores the modification time all change the change time. A
// changed entry is dropped from the cache.
func (h *Handler) fresh(snap *rootSnap, e *entry, now int64) bool {
	if e.gen != snap.gen {
		h.cache.remove(e.key, e)
		return false
	}
	if h.revalidate > 0 && now-e.checked.Load() < int64(h.revalidate) {
		return true
	}
	fi, err := fs.Stat(snap.fsys, e.name)
	if err == nil && fi.Mode().IsRegular() && fi.Size() == e.size && fi.ModTime().Equal(e.modTime) && identOf(fi) == e.ident {
		e.checked.Store(now)
		return true
	}
	h.cache.remove(e.key, e)
	return false
}

// serveEntry answers from memory. A plain GET or HEAD (no Range, no
// condition) is written directly with the entry's prebuilt headers; the
// rest goes through http.ServeContent, which owns the precondition and
// range rules (RFC 9110 §13, §14).
func (h *Handler) serveEntry(w http.ResponseWriter, r *http.Request, e *entry) {
	if plain(netHeader(r.Header)) {
		h.writeEntry(w, r, e)
		return
	}
	hdr := w.Header()
	hdr["Content-Type"] = e.hdrType
	hdr["Accept-Ranges"] = h.hdrAcceptRanges
	if e.hdrModified != nil {
		hdr["Last-Modified"] = e.hdrModified
	}
	if e.hdrETag != nil {
		hdr["Etag"] = e.hdrETag
	}
	if limitRanges(w, r, e.size, e.hdrType[0]) {
		return
	}
	http.ServeContent(w, r, "", e.modTime, bytes.NewReader(e.data))
}

// serveDisk answers a request the cache could not: it opens the name
// (a metadata step, never gated: no content is read) and takes the size
// and validators from the open file, answers redirects, 404 and 403
// itself, and leaves the rest to http.ServeContent through a
// diskResponse, which takes the slot only if ServeContent decides to send
// a body. Opening first makes GET and HEAD agree on a file that cannot be
// read (403 for both), and ties the headers to the very file that is
// read.
func (h *Handler) serveDisk(w http.ResponseWriter, r *http.Request, snap *rootSnap, name string, dirSlash, reqHeld bool) {
	statAt := h.now()
	f, fi, name, res := h.open(snap, name, dirSlash)
	switch res {
	case openRedirect:
		http.Redirect(w, r, locationFor(r.URL.Path+"/", r.URL.RawQuery), http.StatusMovedPermanently)
		return
	case openNotFound:
		notFound(w)
		return
	case openForbidden:
		forbidden(w)
		return
	}

	d := &diskResponse{
		ResponseWriter: w,
		h:              h,
		r:              r,
		key:            r.URL.Path,
		name:           name,
		file:           f,
		fi:             fi,
		size:           fi.Size(),
		modTime:        fi.ModTime(),
		ident:          identOf(fi),
		gen:            snap.gen,
		etag:           h.etagFor(name, fi),
		ctype:          contentType(name),
		statAt:         statAt,
		stream:         fi.Size() > h.maxCached,
		reqHeld:        reqHeld,
	}
	defer d.finish()
	hdr := w.Header()
	hdr.Set("Content-Type", d.ctype)
	if d.etag != "" {
		hdr.Set("Etag", d.etag)
	}
	if limitRanges(w, r, d.size, d.ctype) {
		return
	}
	http.ServeContent(d, r, "", d.modTime, d)
}

// openStat opens name and stats the open file.
func openStat(fsys fs.FS, name string) (fs.File, fs.FileInfo, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func notFound(w http.ResponseWriter)  { http.Error(w, "404 page not found", http.StatusNotFound) }
func forbidden(w http.ResponseWriter) { http.Error(w, "403 forbidden", http.StatusForbidden) }

// etagFor is a strong validator: the modification time in nanoseconds and
// the size, in hex (nginx uses seconds; nanoseconds also catch two writes
// within one second). Files without a modification time use a content hash
// computed in New, if any.
func (h *Handler) etagFor(name string, fi fs.FileInfo) string {
	if t := fi.ModTime(); !t.IsZero() {
		return `"` + strconv.FormatInt(t.UnixNano(), 16) + "-" + strconv.FormatInt(fi.Size(), 16) + `"`
	}
	return h.hashETags[name]
}

// contentType maps the extension to a media type; unknown extensions get
// application/octet-stream (nginx's default_type). Content is never
// sniffed: sniffing needs a read, and a HEAD or a 304 must not read.
func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// contentETags hashes every regular file of fsys (an embed.FS: a small,
// immutable tree) into a strong ETag.
func contentETags(fsys fs.FS) (map[string]string, error) {
	tags := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := fsys.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		sum := fnv.New64a()
		if _, err := io.Copy(sum, f); err != nil {
			return err
		}
		tags[name] = `"h-` + strconv.FormatUint(sum.Sum64(), 16) + `"`
		return nil
	})
	return tags, err
}

// newEntry builds a cache entry and its prebuilt headers: net/http's
// header slices and, for front ends that write HTTP/1.1 themselves, the
// same fields rendered as lines.
func newEntry(key, name string, data []byte, fi fs.FileInfo, etag, ctype string, gen uint64, checked int64) *entry {
	e := &entry{
		key: key, name: name, data: data, size: int64(len(data)), modTime: fi.ModTime(), etag: etag,
		ident: identOf(fi), gen: gen,
		hdrType:   []string{ctype},
		hdrLength: []string{strconv.Itoa(len(data))},
	}
	wire := make([]byte, 0, 128)
	wire = append(wire, "Accept-Ranges: bytes\r\nContent-Length: "...)
	wire = strconv.AppendInt(wire, int64(len(data)), 10)
	wire = append(wire, "\r\nContent-Type: "...)
	wire = append(wire, ctype...)
	wire = append(wire, "\r\n"...)
	if etag != "" {
		e.hdrETag = []string{etag}
		wire = append(wire, "Etag: "...)
		wire = append(wire, etag...)
		wire = append(wire, "\r\n"...)
	}
	if !e.modTime.IsZero() {
		e.hdrModified = []string{e.modTime.UTC().Format(http.TimeFormat)}
		wire = append(wire, "Last-Modified: "...)
		wire = append(wire, e.hdrModified[0]...)
		wire = append(wire, "\r\n"...)
	}
	e.wire = wire
	e.checked.Store(checked)
	return e
}

func itoa(n int) string { return strconv.Itoa(n) }

// refuse writes a gate's refusal.
func refuse(w http.ResponseWriter, r *http.Request, err error) { httpgate.WriteRefusal(w, r, err) }
