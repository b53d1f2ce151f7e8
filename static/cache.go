package static

import (
	"io/fs"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// entry is one file's content in memory, with the response headers it
// needs prebuilt so that a cache hit formats nothing. Everything but
// checked is immutable once the entry is in the cache; header slices are
// shared by every response that serves the entry and have len == cap, so
// a later Header().Add copies instead of writing into them.
type entry struct {
	key     string // the URL path it answers
	name    string // the file it was read from (index.html resolved)
	data    []byte
	size    int64
	modTime time.Time
	ident   fileIdent // inode, device, change time and mode when read
	gen     uint64    // the root snapshot it was read from
	// checked is when the file's size, modification time and identity
	// were last confirmed on disk, in nanoseconds since the handler's
	// epoch.
	checked atomic.Int64

	etag string // "" when the file has neither a modification time nor a hash

	hdrType, hdrLength, hdrModified, hdrETag []string
	wire                                     []byte // the same fields as header lines, for Answer.Header
}

// fileIdent is what tells two versions of a file apart beyond size and
// modification time (see identOf). Zero fields are unknown and compare
// equal.
type fileIdent struct {
	dev, ino uint64
	ctime    int64 // change time, Unix ns
	mode     fs.FileMode
}

// sameFile reports whether two identities name the same file (device and
// inode), whatever its content.
func (a fileIdent) sameFile(b fileIdent) bool { return a.dev == b.dev && a.ino == b.ino }

// cache is a byte-bounded LRU of entries.
//
// It uses simplelru, the unsynchronised core of hashicorp/golang-lru,
// under its own mutex, rather than lru.Cache: the byte accounting (add,
// then evict the oldest until the total fits) must happen under the same
// lock as the list operations, and every variant of the library counts
// entries, not bytes. The entry-count limit is set out of reach so that
// only bytes bound the cache.
type cache struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[string, *entry] // guarded by mu
	bytes int64                          // guarded by mu; sum of len(data)
	limit int64

	evictions atomic.Uint64
}

func newCache(limit int64) *cache {
	c := &cache{limit: limit}
	// The error is only for a size <= 0.
	c.lru, _ = simplelru.NewLRU(math.MaxInt, func(_ string, e *entry) {
		c.bytes -= e.size
		c.evictions.Add(1)
	})
	return c
}

// get returns the entry for key and marks it recently used, or nil.
func (c *cache) get(key string) *entry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	e, _ := c.lru.Get(key)
	c.mu.Unlock()
	return e
}

// add stores e, replacing any entry for the same key, then evicts the least
// recently used entries until the content fits in the limit.
func (c *cache) add(e *entry) {
	if c == nil || e.size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Remove(e.key) { // the callback subtracts its bytes
		c.evictions.Add(^uint64(0)) // a replacement is not an eviction
	}
	c.lru.Add(e.key, e)
	c.bytes += e.size
	for c.bytes > c.limit {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// remove drops key if it still maps to e (a newer entry stays).
func (c *cache) remove(key string, e *entry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if cur, ok := c.lru.Peek(key); ok && cur == e {
		c.lru.Remove(key)
		c.evictions.Add(^uint64(0)) // stale, not evicted for room
	}
	c.mu.Unlock()
}

// usage returns the entries and bytes held.
func (c *cache) usage() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
