package admit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

// TestStatsNeverGoBackwards hammers a gate from several goroutines (mixed
// kinds and weights, queueing, cancellation, timeouts, every outcome) while
// another samples Stats as fast as it can. Every counter, per gate and per
// kind, must be at least what the previous snapshot said, none may be
// absurdly large (a wrapped or negative value), every snapshot must keep
// the invariants (they hold at every instant, not only when quiet), and
// slots in use never exceed the capacity. The first kind ("a") is never
// used, so a count derived for it from the others would show up at once.
// About 6 s under -race: six goroutines run 1,500 rounds each on every
// configuration while Stats is sampled without pause.
func TestStatsNeverGoBackwards(t *testing.T) {
	for _, cfg := range []admit.Config{
		{Capacity: 4, MaxWaiters: 8, MaxWait: 2 * time.Millisecond, Kinds: []string{"a", "b", "c"}},
		{Capacity: 4, MaxWaiters: 8, MaxWait: 2 * time.Millisecond, Kinds: []string{"a", "b", "c"}, NoTiming: true},
		{Capacity: 3, Kinds: []string{"a", "b", "c"}, SampleEvery: 1},
	} {
		t.Run(fmt.Sprintf("queue=%d,timed=%v", cfg.MaxWaiters, !cfg.NoTiming), func(t *testing.T) {
			stress(t, cfg, []admit.Kind{1, 2}, false)
		})
	}
	// Classes, shares and the other disciplines: every request draws a
	// class, and the per-class counts must keep up too.
	shares := admit.ClassShares{admit.ClassSheddable: 0.25, admit.ClassCriticalPlus: 0.25}
	for _, d := range []admit.Discipline{admit.DisciplineFIFO, admit.DisciplineLIFO, admit.DisciplineCoDel} {
		t.Run("classes,"+d.String(), func(t *testing.T) {
			stress(t, admit.Config{
				Capacity:   4,
				MaxWaiters: 6,
				MaxWait:    2 * time.Millisecond,
				Kinds:      []string{"a", "b"},
				Queueing:   admit.Queueing{Discipline: d, ClassShares: shares, ClassAging: time.Millisecond, CoDelTarget: 100 * time.Microsecond, CoDelInterval: time.Millisecond},
			}, []admit.Kind{0, 1}, true)
		})
	}
	// The fast path (first kind, one slot) and the others mixed.
	t.Run("fast+slow", func(t *testing.T) {
		stress(t, admit.Config{Capacity: 3, MaxWaiters: 4, MaxWait: time.Millisecond, Kinds: []string{"a", "b"}}, []admit.Kind{0, 1}, false)
	})
}

func stress(t *testing.T, cfg admit.Config, kinds []admit.Kind, classes bool) {
	g := mustGate(t, cfg)
	const workers, rounds = 6, 1500
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		wg.Go(func() {
			for i := range rounds {
				k := kinds[rng.IntN(len(kinds))]
				n := 1 + rng.Int64N(2)
				if k == 0 {
					n = 1
				}
				var cl admit.Class
				if classes {
					cl = admit.Class(rng.IntN(admit.NumClasses))
				}
				var p admit.Permit
				var err error
				switch rng.IntN(3) {
				case 0:
					p, err = g.TryAcquireFor(admit.Request{Kind: k, Weight: n, Class: cl})
				case 1:
					ctx, cancel := context.WithCancel(context.Background())
					if i%5 == 0 {
						cancel()
					}
					p, err = g.AcquireFor(ctx, admit.Request{Kind: k, Weight: n, Class: cl})
					cancel()
				default:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(500))*time.Microsecond)
					p, err = g.AcquireFor(ctx, admit.Request{Kind: k, Weight: n, Class: cl})
					cancel()
				}
				if err == nil {
					if rng.IntN(4) == 0 {
						time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
					}
					p.Done(admit.Outcome(rng.IntN(admit.NumOutcomes)))
				}
			}
		})
	}
	var prev admit.Stats
	snapshots := 0
	var fail string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			s := g.Stats()
			snapshots++
			if msg := backwards(prev, s, cfg.Capacity); msg != "" && fail == "" {
				fail = fmt.Sprintf("snapshot %d: %s", snapshots, msg)
			}
			prev = s
		}
	}()
	wg.Wait()
	stop.Store(true)
	<-done
	if fail != "" {
		t.Fatal(fail)
	}
	s := g.Stats()
	checkInvariants(t, s)
	if s.InUse != 0 || s.Inflight != 0 || s.Waiting != 0 || s.Offered != workers*rounds {
		t.Fatalf("after the hammer: in use %d inflight %d waiting %d offered %d", s.InUse, s.Inflight, s.Waiting, s.Offered)
	}
	t.Logf("%d snapshots, offered %d admitted %d", snapshots, s.Offered, s.Admitted)
}

// backwards describes the first way s is not a valid successor of prev.
func backwards(prev, s admit.Stats, capacity int64) string {
	const absurd = 1 << 40
	if s.InUse > capacity || s.InUse < 0 || s.Inflight < 0 || s.Waiting < 0 {
		return fmt.Sprintf("in use %d (capacity %d), inflight %d, waiting %d", s.InUse, capacity, s.Inflight, s.Waiting)
	}
	if s.Offered != s.Admitted+s.Rejected.Total()+uint64(s.Waiting) || s.Admitted != s.Completed.Total()+uint64(s.Inflight) {
		return fmt.Sprintf("invariants broken mid-flight: %+v", s)
	}
	type pair struct {
		name      string
		old, next uint64
	}
	var pairs []pair
	add := func(name string, old, next uint64) { pairs = append(pairs, pair{name, old, next}) }
	add("offered", prev.Offered, s.Offered)
	add("admitted", prev.Admitted, s.Admitted)
	add("misuse", prev.Misuse, s.Misuse)
	for r := range admit.NumReasons {
		add(fmt.Sprintf("rejected[%s]", admit.Reason(r)), prev.Rejected[r], s.Rejected[r])
	}
	for o := range admit.NumOutcomes {
		add(fmt.Sprintf("completed[%s]", admit.Outcome(o)), prev.Completed[o], s.Completed[o])
	}
	for i, k := range s.Kinds {
		if k.Inflight < 0 || k.Waiting < 0 {
			return fmt.Sprintf("kind %s: inflight %d waiting %d", k.Kind, k.Inflight, k.Waiting)
		}
		if k.Offered != k.Admitted+k.Rejected.Total()+uint64(k.Waiting) || k.Admitted != k.Completed.Total()+uint64(k.Inflight) {
			return fmt.Sprintf("kind %s: invariants broken mid-flight: %+v", k.Kind, k)
		}
		var p admit.KindStats
		if i < len(prev.Kinds) {
			p = prev.Kinds[i]
		}
		add(k.Kind+".offered", p.Offered, k.Offered)
		add(k.Kind+".admitted", p.Admitted, k.Admitted)
		for r := range admit.NumReasons {
			add(fmt.Sprintf("%s.rejected[%s]", k.Kind, admit.Reason(r)), p.Rejected[r], k.Rejected[r])
		}
		for o := range admit.NumOutcomes {
			add(fmt.Sprintf("%s.completed[%s]", k.Kind, admit.Outcome(o)), p.Completed[o], k.Completed[o])
		}
	}
	var classInUse int64
	for c, cs := range s.Classes {
		if cs.InUse < 0 || cs.InUse > capacity || cs.Waiting < 0 {
			return fmt.Sprintf("class %v: in use %d waiting %d", admit.Class(c), cs.InUse, cs.Waiting)
		}
		classInUse += cs.InUse
		add(fmt.Sprintf("class %v admitted", admit.Class(c)), prev.Classes[c].Admitted, cs.Admitted)
		for r := range admit.NumReasons {
			add(fmt.Sprintf("class %v rejected[%s]", admit.Class(c), admit.Reason(r)), prev.Classes[c].Rejected[r], cs.Rejected[r])
		}
	}
	if classInUse != s.InUse {
		return fmt.Sprintf("classes hold %d slots, the gate %d", classInUse, s.InUse)
	}
	for _, c := range pairs {
		if c.next < c.old || c.next > absurd {
			return fmt.Sprintf("%s went from %d to %d", c.name, c.old, c.next)
		}
	}
	return ""
}
