// Package static serves files with the one expensive step — reading a
// file from disk — behind an admission gate, and everything else
// (cache hits, HEAD, 304, 404, 403, redirects) without it.
//
// # Usage
//
//	h, err := static.New(static.Config{Root: "/srv/www", WorkLimit: 16})
//	if err != nil { ... }
//	defer h.Close()
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h}
//	// h.Gate() feeds metrics and /state; h.Stats() reports the cache.
//
// Serve it behind send and body timeouts (package server, or connlimit's
// ConfigureServer): without them a client that stops reading keeps a
// stream, and its slot, for ever.
//
// # The problem it fixes
//
// A static server whose work limit counted requests instead of disk reads
// took the slot before the cache was looked
// up, so once concurrency passed the limit (16) requests for files already
// in memory — nearly all of them — were refused with 503, and throughput
// collapsed on a server with an idle disk (docs/benchmarks.md measures
// it). The gate meant to bound concurrent disk reads
// was bounding concurrent requests.
//
// # Goals
//
//   - A slot is taken right before the disk is read and released right
//     after. A request that does not read the disk never touches the gate:
//     its counters (offered, admitted, rejected) do not move.
//   - A request releases only the slot it took (slot.release checks that
//     a permit is held), exactly once.
//   - Large files stream. A stream is a disk read spread over time, so by
//     default it holds a slot for its whole duration (see the trade-off).
//   - Correct HTTP for files; no path leaves the root.
//   - The cache-hit path is as cheap as a map lookup and a Write.
//
// # Parts
//
// resolvePath turns a URL path into a name for an fs.FS, refusing ".."
// (400), NUL and backslashes (400), hiding dotfiles (404) and redirecting
// non-canonical paths ("//", "/./") to their cleaned form. The name is
// then opened through os.Root (Config.Root), which refuses absolute names,
// ".." and symbolic links that lead outside the directory, so the path
// check is the first of two walls.
//
// A byte-bounded LRU (hashicorp/golang-lru's simplelru under one mutex,
// with its own byte count) holds the content of files up to
// MaxCachedFileSize, with the response headers prebuilt. An entry is
// served without looking at the disk for Revalidate after it was last
// checked; after that, one stat (never gated: it reads no content)
// confirms it is the same file, or drops the entry. Size and
// modification time are not enough: a rewrite can keep the size and
// restore the mtime, and a chmod changes neither. So the device, inode,
// change time (which the kernel sets on every write, chmod or utimes and
// which cannot be set back) and mode are compared too.
//
// The served tree is a snapshot: Config.Root as opened, pinned by each
// request from its first stat to its last read, so one response never
// mixes two releases. The root path is looked up again once per
// Revalidate; when it names another directory (a deploy swapped a
// symbolic link) that one is opened and becomes current, entries from
// the old one are dropped on use, and the old directory is closed when
// its last request ends.
//
// A cache miss opens the file (a metadata step, not gated), takes size
// and validators from the open file (so GET and HEAD agree on a file that
// cannot be opened: 403 for both, and the headers describe the very file
// that is read), and is answered by http.ServeContent, which owns the
// rules for conditional requests and ranges, over a diskResponse: a value
// that is both the ResponseWriter and the content. limitRanges bounds
// what a Range header can cost first (at most MaxRanges ranges, no
// overlaps, "bytes=-0" is 416). ServeContent decides the status from
// headers and the stat alone; only when it commits to sending a body
// (WriteHeader 200 or 206 on a GET) does diskResponse take the slot and
// open the file. That is where "a HEAD or a 304 never takes a slot" comes
// from, without a second copy of the precondition logic. A plain GET or
// HEAD on a cached file skips ServeContent and writes the prebuilt headers
// directly; conditional and range requests on cached files go through
// ServeContent over a bytes.Reader.
//
// # Where the slot is taken
//
//	request ─ resolvePath ─┬─ 400 / 404 (hidden) / 301 (non-canonical)
//	                       ├─ cache hit, fresh ──────────────── 200/206/304 from memory
//	                       └─ stat ─┬─ 404 / 403 / 301 (directory without "/")
//	                                └─ ServeContent ─┬─ HEAD, 304, 412, 416: headers only
//	                                                 └─ body: ▶ slot ▶ read (≤ MaxCachedFileSize) ◀ release
//	                                                          ▶ slot ▶ stream ... ◀ release at the end
//
// The read under the slot is made so that a slow disk stalls only the
// request that waits for it: a file from os.Root is read through
// internal/diskio, which answers from the page cache when it can and
// otherwise hands the goroutine's P to another thread before the read
// blocks. Without that, a 20 ms read on a server with one P stopped every
// other request until the runtime's monitor noticed, which at 50 times
// a slow disk's capacity halved what the disk served. A small file is
// read in one call that asks for a byte more than its stat said: a short
// answer is its end, so no second read goes to the disk to find it.
//
// Config.Scope = ScopeRequest moves the slot to the top of ServeHTTP, in
// front of the cache: the request-scoped bug, kept so that its cliff can be
// measured and its tests can tell the two apart.
//
// # Trade-off: streams hold a slot
//
// A file larger than MaxCachedFileSize is never cached, so every request
// for it reads the disk, for as long as the client takes to receive it.
// Gating streams (the default) bounds concurrent disk work, including the
// case where slow clients hold many streams open; the price is that a few
// slow downloads can occupy every slot and turn small cold reads away with
// 503 until they end. UngatedStreams removes that price and the bound.
// The only request removed from the gate is the cache hit: streams stay
// gated by default. Operators who serve large
// files to slow clients should raise WorkLimit or set a Queue and MaxWait,
// or ungate streams and bound connections instead (package connlimit).
package static
