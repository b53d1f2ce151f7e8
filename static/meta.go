package static

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// metaEntries bounds the files the handler remembers having opened.
const metaEntries = 4096

// metaCache remembers which paths were opened, recently, as small
// regular files that may be served (nginx's open_file_cache idea, for one
// use): while the disk gate is full, a cold read of such a path is
// refused before its open costs the system calls, as the read itself
// would be. An entry is trusted for the revalidation interval, like a
// cached file's content.
type metaCache struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, metaEntry] // guarded by mu
}

type metaEntry struct {
	gen     uint64 // the root snapshot it was opened from
	checked int64  // Handler.now() of the open
}

func newMetaCache() *metaCache {
	c := &metaCache{}
	c.lru, _ = simplelru.NewLRU[string, metaEntry](metaEntries, nil) // the error is only for a size <= 0
	return c
}

// known reports whether key was opened as a small regular file from
// snapshot gen within maxAge of now.
func (c *metaCache) known(key string, gen uint64, now, maxAge int64) bool {
	c.mu.Lock()
	e, ok := c.lru.Peek(key)
	c.mu.Unlock()
	return ok && e.gen == gen && now-e.checked < maxAge
}

// note records that key was opened as a small regular file.
func (c *metaCache) note(key string, gen uint64, now int64) {
	c.mu.Lock()
	c.lru.Add(key, metaEntry{gen, now})
	c.mu.Unlock()
}

// forget drops key (its open failed).
func (c *metaCache) forget(key string) {
	c.mu.Lock()
	c.lru.Remove(key)
	c.mu.Unlock()
}
