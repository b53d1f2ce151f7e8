package admit

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// The hold sum is whole nanoseconds: a sum past an int64 of them (292
// years of held slots, reached in months at high concurrency) saturates
// instead of wrapping negative.
func TestHoldSumsCannotOverflow(t *testing.T) {
	g, err := New(Config{Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		g.recordHold(time.Duration(math.MaxInt64), OutcomeOK)
	}
	s := g.Stats()
	if s.HoldTime != time.Duration(math.MaxInt64) || s.RecentHold <= 0 || s.HoldSamples != 4 {
		t.Errorf("hold time %v recent %v samples %d", s.HoldTime, s.RecentHold, s.HoldSamples)
	}
	if ra := g.retryAfter(ReasonFull, 1); ra != DefaultMaxRetryAfter {
		t.Errorf("retry after %v, want the cap", ra)
	}
}

// The fast completions move out of the state word before its field could
// overflow. With a tiny fold threshold, many folds happen under
// concurrency; the counts must stay exact and monotonic throughout.
func TestFoldKeepsCountsExact(t *testing.T) {
	g, err := New(Config{Capacity: 3, NoTiming: true, Kinds: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	g.foldAt = 16
	const workers, rounds = 4, 5000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := Kind((w + i) % 2 * (i % 3 / 2))
				p, err := g.TryAcquireFor(Request{Kind: k})
				if err != nil {
					continue
				}
				o := OutcomeOK
				if i%7 == 0 {
					o = OutcomeError
				}
				p.Done(o)
			}
		})
	}
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		var prev uint64
		for {
			select {
			case <-stop:
				sampled <- nil
				return
			default:
			}
			s := g.Stats()
			if s.Admitted < prev || s.Admitted != s.Completed.Total()+uint64(s.Inflight) {
				sampled <- errorf("admitted %d after %d; completed %d inflight %d", s.Admitted, prev, s.Completed.Total(), s.Inflight)
				return
			}
			prev = s.Admitted
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	s := g.Stats()
	if s.Offered != workers*rounds || s.InUse != 0 || s.Inflight != 0 {
		t.Fatalf("offered %d in use %d inflight %d", s.Offered, s.InUse, s.Inflight)
	}
	if g.folded.Load() == 0 || doneField(g.state.Load()) >= g.foldAt {
		t.Fatalf("no fold happened: folded %d, field %d", g.folded.Load(), doneField(g.state.Load()))
	}
}

type testError string

func (e testError) Error() string { return string(e) }

func errorf(format string, args ...any) error {
	return testError(fmt.Sprintf(format, args...))
}
