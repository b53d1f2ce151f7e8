package flow_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/flow"
	"pgregory.net/rapid"
)

// TestEmittedNeverExceedsRequested drives a stream with random requests
// (invalid ones included), receives and cancels, and after each step lets
// the producer run as far as it may (synctest.Wait). A model says what
// must have happened: the producer emitted exactly min(requested, n)
// values, in order, never more, and the stream ended once.
func TestEmittedNeverExceedsRequested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(rt *rapid.T) {
			n := rapid.IntRange(0, 20).Draw(rt, "n")
			vals := make([]int, n)
			for i := range vals {
				vals[i] = i
			}
			s := flow.FromSlice(context.Background(), vals)
			defer func() { s.Cancel(); <-s.Done() }()
			var requested int64
			var received []int
			canceled := false
			endedCtx := doneCtx
			for range rapid.IntRange(1, 30).Draw(rt, "ops") {
				switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
				case op <= 3:
					k := rapid.Int64Range(-1, 5).Draw(rt, "k")
					if rapid.IntRange(0, 20).Draw(rt, "unbounded") == 0 {
						k = flow.Unbounded
					}
					err := s.Request(k)
					if (err != nil) != (k <= 0) {
						rt.Fatalf("Request(%d) = %v", k, err)
					}
					if err == nil && !canceled && requested < int64(n) {
						requested += min(k, int64(n)-requested) // the model only needs up to n
					}
				case op <= 8:
					v, err := s.Recv(endedCtx)
					switch {
					case err == nil:
						if canceled || v != len(received) {
							rt.Fatalf("received %d after %v (canceled %v)", v, received, canceled)
						}
						received = append(received, v)
					case errors.Is(err, context.Canceled):
						if int64(len(received)) < min(requested, int64(n)) && !canceled {
							rt.Fatalf("nothing to receive after %d of %d requested", len(received), requested)
						}
					case err == io.EOF:
						if canceled || len(received) != n {
							rt.Fatalf("EOF after %d of %d", len(received), n)
						}
					case errors.Is(err, flow.ErrCanceled):
						if !canceled {
							rt.Fatal("ErrCanceled without Cancel")
						}
					default:
						rt.Fatalf("Recv: %v", err)
					}
				default:
					s.Cancel()
					if !s.Stats().Completed {
						canceled = true
					}
				}
				synctest.Wait()
				st := s.Stats()
				if st.Emitted > st.Requested {
					rt.Fatalf("emitted %d > requested %d", st.Emitted, st.Requested)
				}
				if !canceled && st.Emitted != min(requested, int64(n)) {
					rt.Fatalf("emitted %d, want min(requested %d, n %d)", st.Emitted, requested, n)
				}
				terminals := 0
				for _, b := range []bool{st.Completed, st.Canceled, st.Err != nil} {
					if b {
						terminals++
					}
				}
				if terminals > 1 || (terminals == 1) != st.Ended {
					rt.Fatalf("terminal state %+v", st)
				}
			}
		})
	})
}

// TestPipelineStagesRespectDemand: Buffer then Map then Overflow-free
// consumption with random sizes; at every stage a snapshot never shows
// more emitted than requested, and the values come through whole.
func TestPipelineStagesRespectDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(rt *rapid.T) {
			n := rapid.IntRange(0, 40).Draw(rt, "n")
			size := rapid.IntRange(1, 5).Draw(rt, "size")
			conc := rapid.IntRange(1, 4).Draw(rt, "concurrency")
			prefetch := rapid.IntRange(1, 4).Draw(rt, "prefetch")
			vals := make([]int, n)
			for i := range vals {
				vals[i] = i + 1
			}
			src := flow.FromSlice(context.Background(), vals)
			groups := flow.Buffer(src, size)
			sums := flow.Map(groups, conc, prefetch, func(ctx context.Context, g []int) (int, error) {
				s := 0
				for _, v := range g {
					s += v
				}
				return s, nil
			})
			defer func() { sums.Cancel(); <-sums.Done(); <-src.Done() }()
			total := 0
			for {
				if rapid.Bool().Draw(rt, "request") {
					_ = sums.Request(rapid.Int64Range(1, 3).Draw(rt, "k"))
				}
				synctest.Wait()
				for _, st := range []flow.Stats{src.Stats(), groups.Stats(), sums.Stats()} {
					if st.Emitted > st.Requested {
						rt.Fatalf("a stage emitted %d > requested %d", st.Emitted, st.Requested)
					}
				}
				if g, up := groups.Stats(), src.Stats(); up.Requested > g.Requested*int64(size) {
					rt.Fatalf("Buffer asked upstream for %d values for %d groups of %d", up.Requested, g.Requested, size)
				}
				v, err := sums.Recv(doneCtx)
				if err == io.EOF {
					break
				}
				if err == nil {
					total += v
				} else if !errors.Is(err, context.Canceled) {
					rt.Fatal(err)
				}
			}
			if total != n*(n+1)/2 {
				rt.Fatalf("sum %d, want %d", total, n*(n+1)/2)
			}
		})
	})
}

// inBubble hides *testing.T's Deadline from rapid, which must not call it
// inside a synctest bubble.
type inBubble struct{ *testing.T }

// doneCtx is an ended context: Recv with it takes what is ready and never
// waits.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// TestConcurrentRequestRecvCancel hammers one stream from several
// goroutines (requests, receives, a late cancel) and samples the
// invariants meanwhile; run with -race.
func TestConcurrentRequestRecvCancel(t *testing.T) {
	for round := range 20 {
		const n = 2000
		s := flow.FromSeq(context.Background(), func(yield func(int) bool) {
			for i := range n {
				if !yield(i) {
					return
				}
			}
		})
		var got sync.Map
		var received atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() { // sampler
			for {
				select {
				case <-stop:
					return
				default:
				}
				if st := s.Stats(); st.Emitted > st.Requested {
					t.Errorf("emitted %d > requested %d", st.Emitted, st.Requested)
					return
				}
			}
		})
		var consumers sync.WaitGroup
		for g := range 4 {
			consumers.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for {
					_ = s.Request(int64(rng.IntN(2))) // 0 is refused and adds nothing
					_ = s.Request(1)                  // so every Recv has a value coming
					v, err := s.Recv(context.Background())
					if err != nil {
						return
					}
					if _, dup := got.LoadOrStore(v, true); dup {
						t.Errorf("value %d received twice", v)
					}
					// At most 2 requested per value received: at n/10 the
					// producer cannot have finished, so Cancel is what ends it.
					if received.Add(1) == n/10 && round%2 == 0 {
						s.Cancel()
					}
				}
			})
		}
		consumers.Wait()
		close(stop)
		wg.Wait()
		<-s.Done()
		st := s.Stats()
		if round%2 == 1 && (!st.Completed || received.Load() != n) {
			t.Fatalf("round %d: completed %v, received %d of %d", round, st.Completed, received.Load(), n)
		}
		if round%2 == 0 && !st.Canceled {
			t.Fatalf("round %d: not canceled: %+v", round, st)
		}
	}
}

// TestMapUnderRealConcurrency: Map over thousands of values with real
// goroutines (no synctest), a consumer with a window, and a sampler that
// checks the prefetch and concurrency bounds while it runs.
func TestMapUnderRealConcurrency(t *testing.T) {
	const n, conc, prefetch = 5000, 4, 6
	var produced atomic.Int64
	up := flow.FromSeq(context.Background(), func(yield func(int) bool) {
		for i := range n {
			produced.Add(1)
			if !yield(i) {
				return
			}
		}
	})
	var inFlight, peak atomic.Int64
	s := flow.Map(up, conc, prefetch, func(ctx context.Context, v int) (int, error) {
		c := inFlight.Add(1)
		for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
		}
		defer inFlight.Add(-1)
		return v * 2, nil
	})
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if st := up.Stats(); st.Emitted > st.Requested {
				t.Errorf("upstream emitted %d > requested %d", st.Emitted, st.Requested)
				return
			}
		}
	})
	seen := make([]bool, n)
	for v, err := range s.All(context.Background(), 7) {
		if err != nil {
			t.Fatal(err)
		}
		if v%2 != 0 || seen[v/2] {
			t.Fatalf("value %d unexpected or seen twice", v)
		}
		seen[v/2] = true
	}
	close(stop)
	sampler.Wait()
	<-s.Done()
	<-up.Done()
	for i, ok := range seen {
		if !ok {
			t.Fatalf("value %d never came through", i)
		}
	}
	// Upstream was asked for the values taken plus the prefetch at most.
	if st := up.Stats(); st.Requested > n+prefetch || peak.Load() > conc {
		t.Fatalf("upstream requested %d for %d values (prefetch %d); peak concurrency %d of %d", st.Requested, n, prefetch, peak.Load(), conc)
	}
}
