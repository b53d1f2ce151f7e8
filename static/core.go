package static

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/sluicehq/sluice/admit"
)

// AnswerKind says what Decide answered.
type AnswerKind uint8

const (
	// AnswerPass: the core does not answer this request on its own (a
	// condition or a range, a redirect, a stream, a bad path, a method
	// other than GET and HEAD...); serve it with ServeHTTP.
	AnswerPass AnswerKind = iota
	// AnswerFile: 200 with the file's bytes (Header and Body); for HEAD
	// the same header lines without the body.
	AnswerFile
	// AnswerRefusal: the disk gate refused (Err, a *admit.RejectedError);
	// write it as httpgate.WriteRefusal would.
	AnswerRefusal
	// AnswerError: a plain-text error (Status 403, 404 or 500, Header and
	// Body as http.Error writes them).
	AnswerError
)

// An Answer is the core's decision for one request: what a front end
// writes. Header and Body are shared, immutable and valid as long as the
// Handler is: never modify them.
type Answer struct {
	kind   AnswerKind
	status int
	header []byte // rendered header lines, each ending in CRLF
	body   []byte
	err    error
	entry  *entry
}

// Kind returns what the core decided.
func (a Answer) Kind() AnswerKind { return a.kind }

// Status returns the answer's HTTP status (0 for AnswerPass).
func (a Answer) Status() int { return a.status }

// Header returns the answer's header lines, rendered for HTTP/1.1
// ("Name: value\r\n" each, Date and Connection left to the front end).
func (a Answer) Header() []byte { return a.header }

// Body returns the answer's body (the whole file for AnswerFile).
func (a Answer) Body() []byte { return a.body }

// Err returns the gate's refusal for AnswerRefusal, else nil.
func (a Answer) Err() error { return a.err }

// A HeaderSet tells whether a request carries a header field. Names are
// in canonical form ("If-None-Match"); implementations may match them
// ignoring case.
type HeaderSet interface {
	Has(name string) bool
}

// netHeader is an http.Header as a HeaderSet.
type netHeader http.Header

func (h netHeader) Has(name string) bool { return len(h[name]) > 0 }

// conditionalHeaders are the request fields that can change the status
// or the body of a file answer.
var conditionalHeaders = [...]string{"Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range"}

// plain reports whether a request has no field that can change the
// status or the body of a file answer.
func plain(h HeaderSet) bool {
	for _, name := range conditionalHeaders {
		if h.Has(name) {
			return false
		}
	}
	return true
}

// A Request is what Decide needs to know about a request, whatever
// front end parsed it. Decide does not keep its strings after it
// returns, so they may point into a buffer the caller reuses.
type Request struct {
	// Method is the request method ("GET").
	Method string
	// Path is the URL path, percent-decoded.
	Path string
	// Header tells which fields the request carries.
	Header HeaderSet
	// Context is the request's context: a queued read waits in the gate
	// under it, so it must end when the client goes away. Nil means the
	// front end has no such context; then a miss that could wait in the
	// gate's queue is AnswerPass.
	Context context.Context
}

// Decide is the engine-neutral core of the handler, shared by ServeHTTP
// and by front ends other than net/http: for a GET or HEAD carrying no
// body, it looks the file up in the cache and, for a plain request (no
// condition, no range) of a small file that missed it, opens the file,
// takes a disk slot right before the read and releases it right after.
// Everything else is AnswerPass, for ServeHTTP.
func (h *Handler) Decide(r Request) Answer {
	isHead := r.Method == http.MethodHead
	if !isHead && r.Method != http.MethodGet || h.scope == ScopeRequest {
		return Answer{}
	}
	a, f := h.decide(r.Context, isHead, r.Path, r.Header)
	if a.kind == AnswerPass && f.snap != nil {
		f.snap.release()
	}
	return a
}

// found is a path looked up for a request: resolvePath's verdict, the
// snapshot pinned for the request (release it), and the fresh cache
// entry, if any.
type found struct {
	name     string
	dirSlash bool
	v        pathVerdict
	snap     *rootSnap // nil unless v == pathOK
	e        *entry
	now      int64
}

// lookup resolves p and looks it up in the cache.
func (h *Handler) lookup(p string) found {
	name, dirSlash, v := resolvePath(p, h.dotfiles)
	f := found{name: name, dirSlash: dirSlash, v: v}
	if v != pathOK {
		return f
	}
	f.now = h.now()
	f.snap = h.pin(f.now)
	if e := h.cache.get(p); e != nil && h.fresh(f.snap, e, f.now) {
		f.e = e
	}
	return f
}

// decide is Decide, returning on AnswerPass what it looked up (its
// snapshot still pinned) so that ServeHTTP continues from there.
func (h *Handler) decide(ctx context.Context, isHead bool, p string, hdr HeaderSet) (Answer, found) {
	f := h.lookup(p)
	if f.v != pathOK || !plain(hdr) {
		return Answer{}, f
	}
	if f.e != nil {
		f.snap.release()
		h.hits.Add(1)
		return fileAnswer(f.e), found{}
	}
	if isHead || ctx == nil && h.gate != nil && h.queue > 0 {
		return Answer{}, f
	}
	a, ok := h.readPlain(ctx, p, f)
	if !ok {
		return Answer{}, f
	}
	f.snap.release()
	h.misses.Add(1)
	return a, found{}
}

// readPlain answers a plain GET that missed the cache: open (never
// gated), then a slot for the read of a small file, released right
// after it. ok is false when the file is for ServeHTTP after all (a
// directory without its slash, a stream).
//
// While the gate is full, a path recently opened as a small regular file
// is refused before the open: the read would be refused anyway, and the
// open's system calls are most of what a refusal costs. If a slot comes
// free between the check and the refusal, the read takes it before the
// open (and gives it back if the file is gone).
func (h *Handler) readPlain(ctx context.Context, p string, f found) (Answer, bool) {
	var s slot
	if h.gate != nil && h.queue == 0 && h.revalidate > 0 && h.gate.InUse() >= h.gate.Capacity() &&
		h.meta.known(p, f.snap.gen, f.now, int64(h.revalidate)) {
		var err error
		if s.p, err = h.gate.TryAcquireFor(admit.Request{Kind: h.kindRead}); err != nil {
			return Answer{kind: AnswerRefusal, status: refusalStatus(err), err: err}, true
		}
	}
	statAt := h.now()
	file, fi, name, res := h.open(f.snap, f.name, f.dirSlash)
	if res != openOK {
		s.release(admit.OutcomeOK)
		h.meta.forget(p)
	}
	switch res {
	case openNotFound:
		return errNotFound, true
	case openForbidden:
		return errForbidden, true
	case openRedirect:
		return Answer{}, false
	}
	if fi.Size() > h.maxCached {
		s.release(admit.OutcomeOK)
		file.Close()
		return Answer{}, false // streams go through ServeContent
	}
	if ctx == nil {
		ctx = context.Background() // the gate cannot wait (see Decide)
	}
	key := strings.Clone(p) // p may point into the caller's buffer
	h.meta.note(key, f.snap.gen, statAt)
	if h.gate != nil && !s.p.Held() {
		var err error
		if s.p, err = h.gate.AcquireFor(ctx, admit.Request{Kind: h.kindRead}); err != nil {
			file.Close()
			return Answer{kind: AnswerRefusal, status: refusalStatus(err), err: err}, true
		}
	}
	data, err := readWhole(file, fi.Size())
	s.release(outcomeOf(err))
	file.Close()
	if err != nil {
		h.log.Warn("static: read failed", "name", name, "err", err)
		return errReadFailed, true
	}
	name = strings.Clone(name)
	e := newEntry(key, name, data, fi, h.etagFor(name, fi), contentType(name), f.snap.gen, statAt)
	h.cache.add(e)
	return fileAnswer(e), true
}

func refusalStatus(err error) int {
	if re, ok := err.(*admit.RejectedError); ok && re.Reason() == admit.ReasonRate {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

func fileAnswer(e *entry) Answer {
	return Answer{kind: AnswerFile, status: http.StatusOK, header: e.wire, body: e.data, entry: e}
}

// openResult is what open found.
type openResult uint8

const (
	openOK        openResult = iota
	openNotFound             // 404
	openForbidden            // 403
	openRedirect             // a directory named without its "/": 301
)

// open opens name (a metadata step, never gated: no content is read)
// for a request, the index file for a directory URL, and applies the
// rules that do not depend on the request's headers: no listings (403),
// no file named as a directory (404), only regular files (403 for
// devices, sockets, pipes), no link to a dotfile (404). The file is open
// only with openOK.
func (h *Handler) open(snap *rootSnap, name string, dirSlash bool) (fs.File, fs.FileInfo, string, openResult) {
	f, fi, err := openStat(snap.fsys, name)
	if err != nil {
		return nil, nil, name, h.statResult(name, err)
	}
	if fi.IsDir() {
		f.Close()
		if !dirSlash { // "/docs" -> "/docs/", as nginx and FileServer do
			return nil, nil, name, openRedirect
		}
		name = path.Join(name, IndexFile)
		if f, fi, err = openStat(snap.fsys, name); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir()) {
			if f != nil {
				f.Close()
			}
			return nil, nil, name, openForbidden // a directory without an index: no listings
		} else if err != nil {
			return nil, nil, name, h.statResult(name, err)
		}
	} else if dirSlash {
		f.Close()
		return nil, nil, name, openNotFound // "/file.css/": a file is not a directory (nginx agrees)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, name, openForbidden // devices, sockets, pipes
	}
	if !h.dotfiles && snap.hiddenTarget(f) {
		f.Close()
		return nil, nil, name, openNotFound // a link to a dotfile is the dotfile
	}
	return f, fi, name, openOK
}

// statResult maps a failed lookup to 403 when permission is denied, else
// 404: a symbolic link that points outside the root, a name below a
// file and a name that does not exist all look the same to the client.
func (h *Handler) statResult(name string, err error) openResult {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return openForbidden
	case errors.Is(err, fs.ErrNotExist):
	default:
		h.log.Debug("static: stat failed", "name", name, "err", err)
	}
	return openNotFound
}

// Plain-text errors, rendered once: the bytes http.Error writes.
var (
	errNotFound   = textAnswer(http.StatusNotFound, "404 page not found")
	errForbidden  = textAnswer(http.StatusForbidden, "403 forbidden")
	errReadFailed = textAnswer(http.StatusInternalServerError, "500 internal server error: file could not be read, retry")
)

func textAnswer(status int, msg string) Answer {
	body := []byte(msg + "\n")
	hdr := "Content-Length: " + itoa(len(body)) + "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
	return Answer{kind: AnswerError, status: status, header: []byte(hdr), body: body}
}

// writeAnswer writes a decided answer through net/http.
func (h *Handler) writeAnswer(w http.ResponseWriter, r *http.Request, a Answer) {
	switch a.kind {
	case AnswerFile:
		h.writeEntry(w, r, a.entry)
	case AnswerRefusal:
		refuse(w, r, a.err)
	case AnswerError:
		http.Error(w, strings.TrimSuffix(string(a.body), "\n"), a.status)
	}
}

// writeEntry answers a plain GET or HEAD from memory with the entry's
// prebuilt headers.
func (h *Handler) writeEntry(w http.ResponseWriter, r *http.Request, e *entry) {
	hdr := w.Header()
	hdr["Content-Type"] = e.hdrType
	hdr["Accept-Ranges"] = h.hdrAcceptRanges
	if e.hdrModified != nil {
		hdr["Last-Modified"] = e.hdrModified
	}
	if e.hdrETag != nil {
		hdr["Etag"] = e.hdrETag
	}
	hdr["Content-Length"] = e.hdrLength
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(e.data)
	}
}
