package breaker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGroupIsolatesKeys: failures on one key open only that key's
// breaker; the same key always gets the same breaker, named after it.
func TestGroupIsolatesKeys(t *testing.T) {
	g, err := NewGroup(GroupConfig{Breaker: Config{Name: "api", MinCalls: 3}})
	if err != nil {
		t.Fatal(err)
	}
	bad, good := g.Get("a:1"), g.Get("b:2")
	if bad == good || g.Get("a:1") != bad || bad.Name() != "api/a:1" {
		t.Fatalf("breakers %p %p, name %q: want one per key, named api/<key>", bad, good, bad.Name())
	}
	feed(t, bad, 3, Failure, 0)
	if bad.State() != Open || good.State() != Closed {
		t.Fatalf("states %v %v, want open and closed", bad.State(), good.State())
	}
	if _, err := g.Get("b:2").Allow(); err != nil {
		t.Fatalf("healthy key refused: %v", err)
	}
	if _, err := g.Get("a:1").Allow(); !IsOpen(err) {
		t.Fatalf("failing key: %v, want a breaker refusal", err)
	}
	var keys []string
	for k := range g.All() {
		keys = append(keys, k)
	}
	if fmt.Sprint(keys) != "[a:1 b:2]" || g.Len() != 2 || g.Overflow() != nil {
		t.Fatalf("keys %v, len %d, overflow %v", keys, g.Len(), g.Overflow())
	}
}

// TestGroupBounded: beyond MaxKeys, keys share one overflow breaker; keys
// that have their own keep it.
func TestGroupBounded(t *testing.T) {
	var created []string
	g, err := NewGroup(GroupConfig{MaxKeys: 2, OnNew: func(k string, b *Breaker) { created = append(created, k+"="+b.Name()) }})
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Get("a"), g.Get("b")
	c, d := g.Get("c"), g.Get("d")
	if c != d || c == a || c == b || c != g.Overflow() || g.Len() != 2 {
		t.Fatalf("overflow keys got %p %p (overflow %p), len %d", c, d, g.Overflow(), g.Len())
	}
	if g.Get("a") != a {
		t.Fatal("a key lost its breaker")
	}
	if _, ok := g.Lookup("c"); ok {
		t.Fatal("an overflow key got its own breaker")
	}
	if fmt.Sprint(created) != "[a=breaker/a b=breaker/b other=breaker/other]" {
		t.Fatalf("OnNew saw %v", created)
	}
	if _, err := NewGroup(GroupConfig{MaxKeys: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MaxKeys -1: %v", err)
	}
	if _, err := NewGroup(GroupConfig{Breaker: Config{Probes: -1}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad breaker config: %v", err)
	}
}

// TestGroupConcurrentCreation: goroutines racing to create the same keys
// agree on one breaker per key, the group creates each exactly once
// (OnNew counts), never more than MaxKeys plus the overflow, and calls
// through them keep every breaker's invariants.
func TestGroupConcurrentCreation(t *testing.T) {
	const maxKeys, keys, workers = 20, 60, 8
	var mu sync.Mutex
	created := map[string]int{}
	g, err := NewGroup(GroupConfig{Breaker: Config{Name: "g", MinCalls: 5}, MaxKeys: maxKeys, OnNew: func(k string, b *Breaker) {
		mu.Lock()
		created[k]++
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	seen := make([][keys]*Breaker, workers)
	var calls atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for round := range 20 {
				for i := range keys {
					k := (i*7 + w*13 + round) % keys // each worker meets the keys in its own order
					b := g.Get(fmt.Sprint("k", k))
					if prev := seen[w][k]; prev != nil && prev != b {
						t.Errorf("key k%d changed breaker", k)
						return
					}
					seen[w][k] = b
					if c, err := b.Allow(); err == nil {
						calls.Add(1)
						c.Done(Result(k % 2)) // odd keys fail
					}
				}
			}
		})
	}
	wg.Wait()
	own := 0
	for k := range keys {
		b := seen[0][k]
		for w := range workers {
			if seen[w][k] != b {
				t.Fatalf("workers disagree on key k%d's breaker", k)
			}
		}
		if mine, ok := g.Lookup(fmt.Sprint("k", k)); ok {
			own++
			if mine != b || b.Name() != fmt.Sprint("g/k", k) {
				t.Fatalf("key k%d: own breaker %q differs from the one handed out", k, b.Name())
			}
		} else if b != g.Overflow() {
			t.Fatalf("key k%d has neither its own breaker nor the overflow", k)
		}
	}
	if own != maxKeys || g.Len() != maxKeys {
		t.Fatalf("%d keys with their own breaker (Len %d), want %d", own, g.Len(), maxKeys)
	}
	if len(created) != maxKeys+1 || created[OverflowName] != 1 {
		t.Fatalf("created %d breakers (%v), want %d keys + overflow", len(created), created, maxKeys)
	}
	for k, n := range created {
		if n != 1 {
			t.Fatalf("OnNew ran %d times for %q", n, k)
		}
	}
	var allowed uint64
	for _, b := range g.All() {
		allowed += b.Stats().Allowed
	}
	allowed += g.Overflow().Stats().Allowed
	if allowed != uint64(calls.Load()) {
		t.Fatalf("breakers allowed %d, callers made %d calls", allowed, calls.Load())
	}
}
