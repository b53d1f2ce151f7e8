package flow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/flow"
)

// counting is a source of 1..n that counts the values it computes and
// notes whether it was stopped early.
type counting struct {
	produced  atomic.Int64
	cancelled atomic.Bool
}

func (c *counting) seq(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := 1; i <= n; i++ {
			c.produced.Add(1)
			if !yield(i) {
				c.cancelled.Store(true)
				return
			}
		}
	}
}

func recvN[T any](t *testing.T, s *flow.Stream[T], n int) []T {
	t.Helper()
	var got []T
	for range n {
		v, err := s.Recv(context.Background())
		if err != nil {
			t.Fatalf("Recv after %d values: %v", len(got), err)
		}
		got = append(got, v)
	}
	return got
}

// nothingReady asserts that Recv has nothing to return now.
func nothingReady[T any](t *testing.T, s *flow.Stream[T]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v, err := s.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv = %v, %v; want nothing emitted", v, err)
	}
}

// TestDemandRequestThenCancel: initial demand 0, request 2, then 3, then
// cancel. Only the five requested values are produced.
func TestDemandRequestThenCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &counting{}
		s := flow.FromSeq(context.Background(), src.seq(10))
		synctest.Wait()
		if n := src.produced.Load(); n != 0 {
			t.Fatalf("produced=%d with no demand", n)
		}
		nothingReady(t, s)
		if err := s.Request(2); err != nil {
			t.Fatal(err)
		}
		if got := recvN(t, s, 2); fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("got %v, want [1 2]", got)
		}
		synctest.Wait()
		if n := src.produced.Load(); n != 2 {
			t.Fatalf("produced=%d after request(2)", n)
		}
		if err := s.Request(3); err != nil {
			t.Fatal(err)
		}
		if got := recvN(t, s, 3); fmt.Sprint(got) != "[3 4 5]" {
			t.Fatalf("got %v, want [3 4 5]", got)
		}
		synctest.Wait()
		s.Cancel()
		<-s.Done()
		st := s.Stats()
		report := fmt.Sprintf("requested=%d produced=%d cancelled=%v", st.Requested, src.produced.Load(), src.cancelled.Load() && st.Canceled)
		if report != "requested=5 produced=5 cancelled=true" {
			t.Fatalf("%s, want requested=5 produced=5 cancelled=true", report)
		}
		if _, err := s.Recv(context.Background()); !errors.Is(err, flow.ErrCanceled) {
			t.Fatalf("Recv after Cancel = %v, want ErrCanceled", err)
		}
	})
}

// TestBufferTranslatesDemand: 2 groups of 4 cost 8 upstream values.
func TestBufferTranslatesDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &counting{}
		up := flow.FromSeq(context.Background(), src.seq(100))
		groups := flow.Buffer(up, 4)
		synctest.Wait()
		if up.Stats().Requested != 0 {
			t.Fatalf("upstream requested %d before any demand", up.Stats().Requested)
		}
		if err := groups.Request(2); err != nil {
			t.Fatal(err)
		}
		got := recvN(t, groups, 2)
		synctest.Wait()
		st := up.Stats()
		report := fmt.Sprintf("requested_groups=%d upstream_elements=%d", groups.Stats().Requested, st.Emitted)
		if report != "requested_groups=2 upstream_elements=8" || st.Requested != 8 || src.produced.Load() != 8 {
			t.Fatalf("%s (upstream requested %d, produced %d), want requested_groups=2 upstream_elements=8", report, st.Requested, src.produced.Load())
		}
		if fmt.Sprint(got) != "[[1 2 3 4] [5 6 7 8]]" {
			t.Fatalf("groups = %v", got)
		}
		groups.Cancel()
		<-groups.Done()
		<-up.Done()
		if !up.Stats().Canceled {
			t.Fatal("canceling the groups did not cancel upstream")
		}
	})
}

func TestBufferEmitsTheShortLastGroup(t *testing.T) {
	s := flow.Buffer(flow.FromSlice(context.Background(), []int{1, 2, 3, 4, 5}), 2)
	var got [][]int
	for g, err := range s.All(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, g)
	}
	if fmt.Sprint(got) != "[[1 2] [3 4] [5]]" {
		t.Fatalf("groups = %v", got)
	}
	<-s.Done()
}

// TestOverflowFailsAfterBufferedValues: a buffer of 2 in front of an
// upstream asked for everything, with no downstream demand yet. The third
// value overflows; upstream stops; the two buffered values are still
// delivered, then the error.
func TestOverflowFailsAfterBufferedValues(t *testing.T) {
	src := &counting{}
	up := flow.FromSeq(context.Background(), src.seq(1000))
	s := flow.Overflow(up, 2, flow.OverflowFail)
	<-up.Done() // the overflow stopped the source
	if err := s.Request(2); err != nil {
		t.Fatal(err)
	}
	got := recvN(t, s, 2)
	_, err := s.Recv(context.Background())
	var oe *flow.OverflowError
	overflow := errors.As(err, &oe) && errors.Is(err, flow.ErrOverflow)
	report := fmt.Sprintf("buffer_capacity=%d upstream_unbounded=%v overflow=%v", oe.Capacity, up.Stats().Requested == flow.Unbounded, overflow)
	if report != "buffer_capacity=2 upstream_unbounded=true overflow=true" {
		t.Fatalf("%s (err %v)", report, err)
	}
	if fmt.Sprint(got) != "[1 2]" || src.produced.Load() != 3 || !src.cancelled.Load() {
		t.Fatalf("delivered %v, produced %d, source stopped %v; want [1 2], 3, true", got, src.produced.Load(), src.cancelled.Load())
	}
	<-s.Done()
}

func TestOverflowWhenFull(t *testing.T) {
	for _, tc := range []struct {
		whenFull flow.WhenFull
		want     string
	}{
		{flow.DropOldest, "[4 5]"},
		{flow.DropLatest, "[1 2]"},
	} {
		t.Run(tc.whenFull.String(), func(t *testing.T) {
			up := flow.FromSlice(context.Background(), []int{1, 2, 3, 4, 5})
			s := flow.Overflow(up, 2, tc.whenFull)
			<-up.Done() // all five arrived while nothing was requested downstream
			var got []int
			for v, err := range s.All(context.Background(), 10) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, v)
			}
			if fmt.Sprint(got) != tc.want || s.Stats().Dropped != 3 {
				t.Fatalf("got %v, dropped %d; want %s, 3", got, s.Stats().Dropped, tc.want)
			}
			<-s.Done()
		})
	}
}

func TestRequestMustBePositive(t *testing.T) {
	s := flow.FromSlice(context.Background(), []int{1})
	defer func() { s.Cancel(); <-s.Done() }()
	for _, n := range []int64{0, -1} {
		if err := s.Request(n); !errors.Is(err, flow.ErrInvalidDemand) {
			t.Fatalf("Request(%d) = %v, want ErrInvalidDemand", n, err)
		}
	}
	if st := s.Stats(); st.Requested != 0 || st.Ended {
		t.Fatalf("an invalid request changed the stream: %+v", st)
	}
}

// TestEmitNeverExceedsDemand: the producer emits exactly what was
// requested, never more, even when it has more to give.
func TestEmitNeverExceedsDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := flow.FromSlice(context.Background(), []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		for _, n := range []int64{0, 1, 3, 2} {
			if n > 0 {
				if err := s.Request(n); err != nil {
					t.Fatal(err)
				}
			}
			synctest.Wait() // the producer is blocked: it has emitted all it may
			st := s.Stats()
			if st.Emitted != st.Requested {
				t.Fatalf("after requesting %d in all: emitted %d", st.Requested, st.Emitted)
			}
		}
		s.Cancel()
	})
}

func TestTerminalSignalsAreExclusive(t *testing.T) {
	ctx := context.Background()
	t.Run("completed", func(t *testing.T) {
		s := flow.FromSlice(ctx, []int{1})
		_ = s.Request(5)
		<-s.Done()
		s.Cancel() // after completion: changes nothing
		if v, err := s.Recv(ctx); v != 1 || err != nil {
			t.Fatalf("Recv = %v, %v; want the value emitted before completion", v, err)
		}
		if _, err := s.Recv(ctx); err != io.EOF {
			t.Fatalf("Recv = %v, want io.EOF", err)
		}
		if st := s.Stats(); !st.Completed || st.Canceled || st.Err != nil {
			t.Fatalf("stats %+v, want completed only", st)
		}
	})
	t.Run("failed", func(t *testing.T) {
		boom := errors.New("boom")
		s := flow.New(ctx, func(ctx context.Context, e *flow.Emitter[int]) error {
			if err := e.Emit(1); err != nil {
				return err
			}
			return boom
		})
		_ = s.Request(5)
		<-s.Done()
		s.Cancel()
		if v, err := s.Recv(ctx); v != 1 || err != nil {
			t.Fatalf("Recv = %v, %v; want the value emitted before the error", v, err)
		}
		if _, err := s.Recv(ctx); !errors.Is(err, boom) {
			t.Fatalf("Recv = %v, want boom", err)
		}
		if st := s.Stats(); st.Completed || st.Canceled || !errors.Is(st.Err, boom) {
			t.Fatalf("stats %+v, want failed only", st)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		var returned atomic.Value
		s := flow.New(ctx, func(ctx context.Context, e *flow.Emitter[int]) error {
			_ = e.Emit(1)
			<-ctx.Done()
			err := errors.New("producer error after cancel")
			returned.Store(err)
			return err
		})
		_ = s.Request(1)
		s.Cancel()
		<-s.Done()
		if returned.Load() == nil {
			t.Fatal("producer did not return")
		}
		if _, err := s.Recv(ctx); !errors.Is(err, flow.ErrCanceled) {
			t.Fatalf("Recv = %v, want ErrCanceled (buffered values are released)", err)
		}
		if st := s.Stats(); !st.Canceled || st.Completed || st.Err != nil || st.Buffered != 0 {
			t.Fatalf("stats %+v, want canceled only, nothing buffered", st)
		}
	})
}

func TestMapBoundsConcurrencyAndPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &counting{}
		up := flow.FromSeq(context.Background(), src.seq(100))
		release := make(chan struct{})
		var running, peak atomic.Int64
		s := flow.Map(up, 3, 5, func(ctx context.Context, v int) (int, error) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-release
			running.Add(-1)
			return v * 10, nil
		})
		synctest.Wait()
		if st := up.Stats(); st.Requested != 5 || running.Load() != 0 {
			t.Fatalf("before demand: upstream requested %d, running %d; want the prefetch (5) and no work", st.Requested, running.Load())
		}
		_ = s.Request(10)
		synctest.Wait()
		if running.Load() != 3 {
			t.Fatalf("running %d with demand 10, want the concurrency bound 3", running.Load())
		}
		if st := up.Stats(); st.Requested != 8 || st.Emitted != 8 {
			t.Fatalf("upstream requested %d emitted %d, want 3 taken + 5 prefetched = 8", st.Requested, st.Emitted)
		}
		close(release)
		got := recvN(t, s, 10)
		synctest.Wait()
		if st := s.Stats(); st.Emitted != 10 || peak.Load() != 3 {
			t.Fatalf("emitted %d, peak concurrency %d; want 10 and 3", st.Emitted, peak.Load())
		}
		var sum int
		for _, v := range got {
			sum += v
		}
		if sum != 550 { // 10*(1+...+10), in any order
			t.Fatalf("results %v", got)
		}
		s.Cancel()
		<-s.Done()
		<-up.Done()
	})
}

// TestMapComputesOnlyWhatWasRequested: with demand 1 and 4 workers, one
// value is worked on, not four.
func TestMapComputesOnlyWhatWasRequested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		s := flow.Map(flow.FromSeq(context.Background(), (&counting{}).seq(100)), 4, 8, func(ctx context.Context, v int) (int, error) {
			calls.Add(1)
			return v, nil
		})
		_ = s.Request(1)
		synctest.Wait()
		if calls.Load() != 1 {
			t.Fatalf("f called %d times for a demand of 1", calls.Load())
		}
		s.Cancel()
	})
}

func TestMapErrorFailsTheStream(t *testing.T) {
	boom := errors.New("boom")
	up := flow.FromSeq(context.Background(), (&counting{}).seq(100))
	s := flow.Map(up, 2, 2, func(ctx context.Context, v int) (int, error) {
		if v == 3 {
			return 0, boom
		}
		return v, nil
	})
	var err error
	for _, err = range s.All(context.Background(), 100) {
	}
	if !errors.Is(err, boom) {
		t.Fatalf("last = %v, want boom", err)
	}
	<-s.Done()
	<-up.Done()
}

func TestAllStopsEarlyAndCancels(t *testing.T) {
	src := &counting{}
	s := flow.FromSeq(context.Background(), src.seq(1000))
	var got []int
	for v, err := range s.All(context.Background(), 2) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
		if len(got) == 3 {
			break
		}
	}
	<-s.Done()
	if fmt.Sprint(got) != "[1 2 3]" || !s.Stats().Canceled || !src.cancelled.Load() || src.produced.Load() > 5 {
		t.Fatalf("got %v, canceled %v, produced %d", got, s.Stats().Canceled, src.produced.Load())
	}
}

// broker is a fake message source with acknowledgements: it counts what
// it delivered and what was acknowledged.
type broker struct {
	mu               sync.Mutex
	delivered, acked int
	nacked           int
	maxUnacked       int
	workDone         map[int]bool
	ackedBeforeDone  int
}

func (b *broker) source(ctx context.Context, n int) *flow.Stream[int] {
	return flow.New(ctx, func(ctx context.Context, e *flow.Emitter[int]) error {
		for i := range n {
			if err := e.Emit(i); err != nil {
				return err
			}
			b.mu.Lock()
			b.delivered++
			b.maxUnacked = max(b.maxUnacked, b.delivered-b.acked-b.nacked)
			b.mu.Unlock()
		}
		return nil
	})
}

func TestConsumeAcksOnlyWhenWorkIsDone(t *testing.T) {
	b := &broker{workDone: map[int]bool{}}
	s := b.source(context.Background(), 200)
	fail := errors.New("cannot process")
	err := flow.Consume(context.Background(), s, flow.ConsumeConfig{MaxUnacked: 4, Workers: 3},
		func(ctx context.Context, v int) error {
			b.mu.Lock()
			b.workDone[v] = true
			b.mu.Unlock()
			if v%10 == 0 {
				return fail
			}
			return nil
		},
		func(v int, err error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !b.workDone[v] {
				b.ackedBeforeDone++
			}
			if err != nil {
				b.nacked++
			} else {
				b.acked++
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acked != 180 || b.nacked != 20 || b.ackedBeforeDone != 0 {
		t.Fatalf("acked %d nacked %d (acked before the work was done: %d), want 180, 20, 0", b.acked, b.nacked, b.ackedBeforeDone)
	}
	// The producer counts a delivery just after Emit returns, so the
	// count it sees may include one value already acknowledged: +1.
	if b.maxUnacked > 4+1 {
		t.Fatalf("up to %d delivered and unacknowledged, want at most 4", b.maxUnacked)
	}
	if st := s.Stats(); st.Emitted-int64(b.acked+b.nacked) != 0 || st.Requested > int64(200+4) {
		t.Fatalf("stream stats %+v", st)
	}
}

func TestConsumeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := flow.FromSeq(context.Background(), (&counting{}).seq(1_000_000))
	var n atomic.Int64
	err := flow.Consume(ctx, s, flow.ConsumeConfig{MaxUnacked: 2}, func(context.Context, int) error {
		if n.Add(1) == 10 {
			cancel()
		}
		return nil
	}, func(int, error) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume = %v, want context.Canceled", err)
	}
	<-s.Done()
	if got := n.Load(); got < 10 || got > 12 {
		t.Fatalf("worked on %d values after canceling at 10", got)
	}
}
