package breaker

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// GroupConfig configures a Group. The zero GroupConfig is a valid
// default: breakers with the zero Config, at most 64 upstreams with their
// own breaker.
type GroupConfig struct {
	// Breaker is every breaker's Config. Its Name names the group: the
	// breaker for key k is named Name + "/" + k (its refusals' Gate and its
	// metrics label), the overflow breaker Name + "/" + OverflowName.
	Breaker Config
	// MaxKeys bounds how many keys get a breaker of their own, so a client
	// that calls unboundedly many hosts keeps bounded memory and metrics.
	// Keys beyond it share one overflow breaker. 0 means 64; negative is an
	// error.
	MaxKeys int
	// OnNew is called once for every breaker the group creates (the
	// overflow breaker too, with key OverflowName), after it is created
	// and outside the group's lock; for example to log it
	// (promsluice.Metrics.Add of the group exports every breaker it has
	// without it). Nil means none. It may run concurrently for different
	// keys.
	OnNew func(key string, b *Breaker)
}

// OverflowName is the name suffix (and OnNew key) of a Group's overflow
// breaker.
const OverflowName = "other"

// Group keeps one Breaker per upstream, created on first use with the
// same Config, so that one failing upstream opens only its own breaker:
// a client that calls several hosts through one retry.Policy keeps
// calling the healthy ones. retry.Config.Breakers plugs a Group into the
// HTTP transport (keyed by the request's host) and grpcsluice's client
// (keyed by the connection's target).
//
// Create one with NewGroup; the zero Group is not usable. Safe for
// concurrent use. Get costs one atomic load and one map lookup for a key
// that has its breaker (the map is copied on every creation, which
// happens at most MaxKeys times); creating one takes a mutex.
type Group struct {
	cfg      Config
	max      int
	onNew    func(string, *Breaker)
	m        atomic.Pointer[map[string]*Breaker] // never written after Store
	overflow atomic.Pointer[Breaker]
	mu       sync.Mutex // serialises creation
}

// NewGroup returns an empty Group, or an error wrapping ErrInvalidConfig
// (for a bad MaxKeys or a Breaker config that New refuses).
func NewGroup(cfg GroupConfig) (*Group, error) {
	if cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("%w: MaxKeys %d", ErrInvalidConfig, cfg.MaxKeys)
	}
	if _, err := New(cfg.Breaker); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg.Breaker, max: cmp(cfg.MaxKeys, 64), onNew: cfg.OnNew}
	g.cfg.Name = cmp(g.cfg.Name, "breaker")
	g.m.Store(new(map[string]*Breaker))
	return g, nil
}

// Get returns key's breaker, creating it on first use; once MaxKeys keys
// have their own, any other key gets the shared overflow breaker. The
// same key always gets the same breaker.
func (g *Group) Get(key string) *Breaker {
	m := *g.m.Load()
	if b, ok := m[key]; ok {
		return b
	}
	if len(m) >= g.max {
		if o := g.overflow.Load(); o != nil {
			return o
		}
	}
	return g.create(key)
}

func (g *Group) create(key string) *Breaker {
	g.mu.Lock()
	m := *g.m.Load()
	if b, ok := m[key]; ok {
		g.mu.Unlock()
		return b
	}
	var b *Breaker
	newKey := key
	if len(m) >= g.max {
		if b = g.overflow.Load(); b != nil {
			g.mu.Unlock()
			return b
		}
		newKey = OverflowName
		b = g.newBreaker(newKey)
		g.overflow.Store(b)
	} else {
		b = g.newBreaker(key)
		m2 := make(map[string]*Breaker, len(m)+1)
		maps.Copy(m2, m)
		m2[key] = b
		g.m.Store(&m2)
	}
	g.mu.Unlock()
	if g.onNew != nil {
		g.onNew(newKey, b)
	}
	return b
}

func (g *Group) newBreaker(key string) *Breaker {
	cfg := g.cfg
	cfg.Name = g.cfg.Name + "/" + key
	b, _ := New(cfg) // NewGroup checked the config
	return b
}

// Lookup returns key's own breaker if it has one; it creates nothing.
func (g *Group) Lookup(key string) (*Breaker, bool) {
	b, ok := (*g.m.Load())[key]
	return b, ok
}

// Overflow returns the breaker shared by keys beyond MaxKeys, or nil if
// no such key was seen.
func (g *Group) Overflow() *Breaker { return g.overflow.Load() }

// Len returns how many keys have a breaker of their own (at most MaxKeys).
func (g *Group) Len() int { return len(*g.m.Load()) }

// All yields every key with a breaker of their own and its breaker, in
// key order, from a snapshot taken when iteration starts.
func (g *Group) All() iter.Seq2[string, *Breaker] {
	return func(yield func(string, *Breaker) bool) {
		m := *g.m.Load()
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
