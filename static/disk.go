package static

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/internal/diskio"
)

// slot records whether a request holds a disk slot, so that a release
// frees only what was taken: a request that was
// answered without the disk never gives back a slot it does not have.
type slot struct{ p admit.Permit }

// release ends the permit if one is held; it is safe to call on an empty
// slot and releases at most once.
func (s *slot) release(o admit.Outcome) {
	if s.p.Held() {
		s.p.Done(o)
	}
}

// errAborted is returned by writes after diskResponse answered with a
// refusal or an error instead of the file.
var errAborted = errors.New("static: response replaced by a refusal or an error")

// errChanged reports a file whose size changed between stat and read.
var errChanged = errors.New("static: file changed while it was read")

// diskResponse is both the ResponseWriter and the content that
// serveDisk hands to http.ServeContent. ServeContent decides the status
// from the request's headers and the file's metadata alone (Seek tells it
// the size without reading). Only when it commits to sending a body (it
// calls WriteHeader with 200 or 206 on a GET) does diskResponse take a
// disk slot and touch the file: so HEAD, 304, 412 and 416 never take one.
//
// A small file is then read whole, under the slot, which is released right
// after the read; the bytes go to the cache and to the client. A large
// file is opened and streamed; with gated streams the slot is held until
// ServeContent returns (finish). The file itself was opened (not read)
// by serveDisk.
type diskResponse struct {
	http.ResponseWriter
	h       *Handler
	r       *http.Request
	key     string // URL path (cache key)
	name    string // file name in the FS
	size    int64  // from stat
	modTime time.Time
	etag    string
	ctype   string
	ident   fileIdent
	gen     uint64 // root snapshot
	statAt  int64  // Handler.now() before the stat
	stream  bool   // larger than the cache's file limit
	reqHeld bool   // the request already holds a slot (ScopeRequest)
	file    fs.File
	fi      fs.FileInfo // from the stat of the open file

	slot      slot
	decided   bool  // WriteHeader was called
	failed    bool  // a refusal or an error was written instead of the file
	streaming bool  // the large file may be read (slot taken if gated)
	werr      error // the first write error: the client did not get it all

	off  int64  // read position, as ServeContent sees it
	data []byte // small file, once read
}

// WriteHeader takes the slot and reads or opens the file when a body is
// about to be sent; on refusal it writes the 503 instead.
func (d *diskResponse) WriteHeader(code int) {
	if d.decided {
		d.ResponseWriter.WriteHeader(code)
		return
	}
	d.decided = true
	if (code == http.StatusOK || code == http.StatusPartialContent) && d.r.Method != http.MethodHead {
		if !d.load() {
			return
		}
	}
	d.ResponseWriter.WriteHeader(code)
}

// load takes a slot right before the disk is read and reads the small
// file (releasing the slot right after) or readies the large one for
// streaming (keeping the slot until finish). It reports false after
// writing a refusal or an error in place of the file.
func (d *diskResponse) load() bool {
	needSlot := d.h.gate != nil && !d.reqHeld && (!d.stream || d.h.gateStreams)
	if needSlot {
		kind := d.h.kindRead
		if d.stream {
			kind = d.h.kindStream
		}
		var err error
		if d.slot.p, err = d.h.gate.AcquireFor(d.r.Context(), admit.Request{Kind: kind}); err != nil {
			d.abort()
			httpgate.WriteRefusal(d.ResponseWriter, d.r, err)
			return false
		}
	}
	if d.stream {
		if err := seekTo(d.file, d.off); err != nil {
			d.h.log.Warn("static: seek failed", "name", d.name, "err", err)
			d.abort()
			http.Error(d.ResponseWriter, "500 internal server error: file could not be read, retry", http.StatusInternalServerError)
			return false
		}
		d.streaming = true
		return true
	}
	data, err := readWhole(d.file, d.size)
	d.slot.release(outcomeOf(err))
	if err != nil {
		d.h.log.Warn("static: read failed", "name", d.name, "err", err)
		d.abort()
		http.Error(d.ResponseWriter, "500 internal server error: file could not be read, retry", http.StatusInternalServerError)
		return false
	}
	d.data = data
	d.h.cache.add(newEntry(d.key, d.name, data, d.fi, d.etag, d.ctype, d.gen, d.statAt))
	return true
}

// finish closes the file and releases the stream's slot, if held. A
// stream that did not reach its client whole (a write failed: the client
// left, or stopped reading past the send timeout; or the request was
// canceled) is recorded as canceled.
func (d *diskResponse) finish() {
	d.file.Close()
	o := admit.OutcomeOK
	if d.werr != nil || d.r.Context().Err() != nil {
		o = admit.OutcomeCanceled
	}
	d.slot.release(o)
}

// abort marks the response as replaced and removes the file headers
// ServeContent had set, so a refusal or an error is not described as
// the file.
func (d *diskResponse) abort() {
	d.failed = true
	hdr := d.ResponseWriter.Header()
	for _, k := range [...]string{"Content-Length", "Content-Range", "Content-Type", "Accept-Ranges", "Last-Modified", "Etag"} {
		delete(hdr, k)
	}
}

func (d *diskResponse) Write(b []byte) (int, error) {
	if !d.decided {
		d.WriteHeader(http.StatusOK)
	}
	if d.failed {
		return 0, errAborted
	}
	n, err := d.ResponseWriter.Write(b)
	d.noteErr(err)
	return n, err
}

// noteErr keeps the first write error, for finish.
func (d *diskResponse) noteErr(err error) {
	if err != nil && d.werr == nil {
		d.werr = err
	}
}

// ReadFrom lets ServeContent's copy of a single range reach the
// connection's sendfile for a streamed *os.File, and write a small file's
// bytes in one Write.
func (d *diskResponse) ReadFrom(src io.Reader) (int64, error) {
	if !d.decided {
		d.WriteHeader(http.StatusOK)
	}
	if d.failed {
		return 0, errAborted
	}
	if lr, ok := src.(*io.LimitedReader); ok && lr.R == io.Reader(d) {
		switch {
		case d.data != nil:
			end := min(d.off+lr.N, int64(len(d.data)))
			n, err := d.ResponseWriter.Write(d.data[d.off:end])
			d.off += int64(n)
			lr.N -= int64(n)
			d.noteErr(err)
			return int64(n), err
		case d.streaming:
			if rf, ok := d.ResponseWriter.(io.ReaderFrom); ok {
				// The write error of sendfile surfaces here and nowhere
				// else: ServeContent drops it.
				n, err := rf.ReadFrom(&io.LimitedReader{R: d.file, N: lr.N})
				d.off += n
				lr.N -= n
				d.noteErr(err)
				return n, err
			}
		}
	}
	return io.Copy(writerOnly{d}, src)
}

// Unwrap lets http.ResponseController reach the connection.
func (d *diskResponse) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// Read serves the content after load; before it (or after a refusal)
// there is nothing to read.
func (d *diskResponse) Read(p []byte) (int, error) {
	switch {
	case d.data != nil:
		if d.off >= int64(len(d.data)) {
			return 0, io.EOF
		}
		n := copy(p, d.data[d.off:])
		d.off += int64(n)
		return n, nil
	case d.streaming:
		n, err := d.file.Read(p)
		d.off += int64(n)
		return n, err
	}
	return 0, errAborted
}

// Seek moves the read position; before load it only records it.
func (d *diskResponse) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += d.off
	case io.SeekEnd:
		offset += d.size
	default:
		return 0, errors.New("static: seek: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("static: seek: negative position")
	}
	if d.streaming {
		if err := seekTo(d.file, offset); err != nil {
			return 0, err
		}
	}
	d.off = offset
	return offset, nil
}

// seekTo positions f at off; files that cannot seek are read forward.
func seekTo(f fs.File, off int64) error {
	if s, ok := f.(io.Seeker); ok {
		_, err := s.Seek(off, io.SeekStart)
		return err
	}
	if off == 0 {
		return nil
	}
	_, err := io.CopyN(io.Discard, f, off)
	return err
}

// readWhole reads an open file of the given size from its start. A file
// that is now shorter or longer than its stat said is an error
// (errChanged): its headers were already computed from the stat.
//
// It asks for one byte more than the stat said. A regular file answers a
// read short only at its end, so a read that comes back short with
// exactly size bytes in hand is the whole file, without a second read
// that would only find the end (on FUSE or a network filesystem, a round
// trip of its own). A reader that answers short before its end, with
// exactly the stat's size read so far, would hide bytes added since:
// the same as any server that reads what its stat said.
//
// An *os.File is read through diskio, which gives the scheduler's P to
// another thread before each read: a read from a slow disk blocks for
// milliseconds, and the runtime would otherwise notice only later.
func readWhole(f fs.File, size int64) ([]byte, error) {
	buf := make([]byte, size+1)
	var r io.Reader = f
	if of, ok := f.(*os.File); ok {
		r = diskio.Reader{File: of}
	}
	n := 0
	for {
		want := len(buf) - n
		m, err := r.Read(buf[n:])
		n += m
		switch {
		case int64(n) > size: // more than the stat said
			return nil, errChanged
		case err == io.EOF || (err == nil && m == 0):
			if int64(n) != size {
				return nil, errChanged
			}
			return buf[:size:size], nil
		case err != nil:
			return nil, err
		case m < want && int64(n) == size: // short: the end
			return buf[:size:size], nil
		}
	}
}

func outcomeOf(err error) admit.Outcome {
	if err != nil {
		return admit.OutcomeError
	}
	return admit.OutcomeOK
}

// writerOnly hides diskResponse's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }
