package pool_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/sluicehq/sluice/internal/testutil"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/pool"
)

// latch is a task that says when it starts and then holds its worker
// until released: the pool's state is known while tests look at it.
type latch struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	ran     atomic.Int32
}

// newLatch returns a closed latch that t's clean-up opens, so a test that
// fails early does not leave its pool's Shutdown waiting.
func newLatch(t *testing.T) *latch {
	l := &latch{started: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(l.open)
	return l
}

// open lets the task finish; opening twice is fine.
func (l *latch) open() { l.once.Do(func() { close(l.release) }) }

func (l *latch) Run(ctx context.Context) error {
	if l.ran.Add(1) == 1 {
		close(l.started)
	}
	<-l.release
	return nil
}

// counted is a task that records whether it ran or was dropped.
type counted struct {
	ran, dropped atomic.Int32
	dropErr      error
	mu           sync.Mutex
}

func (c *counted) Run(ctx context.Context) error { c.ran.Add(1); return nil }
func (c *counted) Drop(err error) {
	c.mu.Lock()
	c.dropErr = err
	c.mu.Unlock()
	c.dropped.Add(1)
}

func newPool(t *testing.T, cfg pool.Config) *pool.Pool {
	t.Helper()
	p, err := pool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown in cleanup: %v", err)
		}
	})
	return p
}

type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// errorer reports through Errorf, for goroutines other than the test's.
type errorer struct{ *testing.T }

func (e errorer) Fatalf(format string, args ...any) { e.Errorf(format, args...) }

// checkInvariants asserts the two equations every Stats snapshot keeps.
func checkInvariants(t fataler, s pool.Stats) {
	t.Helper()
	if s.Offered != s.Admitted+s.Rejected.Total() {
		t.Fatalf("offered %d != admitted %d + rejected %d", s.Offered, s.Admitted, s.Rejected.Total())
	}
	if s.Admitted != s.Completed.Total()+uint64(s.Queued)+uint64(s.Running) {
		t.Fatalf("admitted %d != completed %d + queued %d + running %d", s.Admitted, s.Completed.Total(), s.Queued, s.Running)
	}
}

func wantReason(t *testing.T, err error, want admit.Reason) {
	t.Helper()
	var rej *admit.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("err = %v, want a *admit.RejectedError with reason %s", err, want)
	}
	if rej.Reason() != want {
		t.Fatalf("reason = %s, want %s", rej.Reason(), want)
	}
	if !errors.Is(err, admit.ErrRejected) {
		t.Fatalf("errors.Is(%v, admit.ErrRejected) = false", err)
	}
	if errors.Is(err, admit.ErrClosed) != (want == admit.ReasonClosed) {
		t.Fatalf("errors.Is(%v, admit.ErrClosed) = %v, want %v", err, !(want == admit.ReasonClosed), want == admit.ReasonClosed)
	}
}

// TestBoundedTableRowByRow: core 1, max 2, queue 1, Abort. The first task
// starts the core worker, the second takes the one queue place, the third
// finds the queue full and starts the extra worker, the fourth is refused.
func TestBoundedTableRowByRow(t *testing.T) {
	p := newPool(t, pool.Config{Name: "bounded", Core: 1, Max: 2, Queue: 1})
	ctx := context.Background()
	tasks := []*latch{newLatch(t), newLatch(t), newLatch(t), newLatch(t)}
	rows := []struct{ workers, queued int }{{1, 0}, {1, 1}, {2, 1}}
	var futures []*pool.Future
	for i, row := range rows {
		f, err := p.Submit(ctx, tasks[i])
		if err != nil {
			t.Fatalf("submission %d: %v", i+1, err)
		}
		futures = append(futures, f)
		s := p.Stats()
		if s.Workers != row.workers || s.Queued != row.queued {
			t.Fatalf("after submission %d: workers=%d queued=%d, want workers=%d queued=%d", i+1, s.Workers, s.Queued, row.workers, row.queued)
		}
		checkInvariants(t, s)
	}
	// Both workers are inside their latches (tasks 1 and 3); task 2 waits.
	<-tasks[0].started
	<-tasks[2].started
	_, err := p.Submit(ctx, tasks[3])
	wantReason(t, err, admit.ReasonQueueFull)
	s := p.Stats()
	if s.Workers != 2 || s.Queued != 1 || s.Rejected.Total() != 1 || s.Rejected[admit.ReasonQueueFull] != 1 {
		t.Fatalf("bounded workers=%d queued=%d rejected=%d, want workers=2 queued=1 rejected=1", s.Workers, s.Queued, s.Rejected.Total())
	}
	for _, l := range tasks {
		l.open()
	}
	for i, f := range futures {
		if err := f.Wait(ctx); err != nil {
			t.Fatalf("accepted task %d: %v", i+1, err)
		}
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s = p.Stats()
	checkInvariants(t, s)
	if s.Completed[admit.OutcomeOK] != 3 || tasks[3].ran.Load() != 0 || s.Workers != 0 {
		t.Fatalf("after release: completed ok=%d (want 3), refused task ran %d times, workers=%d", s.Completed[admit.OutcomeOK], tasks[3].ran.Load(), s.Workers)
	}
}

// TestUnboundedQueueNeverGrowsPastCore: core 1, max 4, unbounded queue.
// The queue always has room, so the extra workers never start.
func TestUnboundedQueueNeverGrowsPastCore(t *testing.T) {
	p := newPool(t, pool.Config{Name: "unbounded", Core: 1, Max: 4, Queue: -1})
	ctx := context.Background()
	first := newLatch(t)
	if err := p.Go(ctx, first); err != nil {
		t.Fatal(err)
	}
	<-first.started
	var rest []*counted
	for range 8 {
		c := &counted{}
		if err := p.Go(ctx, c); err != nil {
			t.Fatal(err)
		}
		rest = append(rest, c)
	}
	s := p.Stats()
	if s.Workers != 1 || s.Queued != 8 || s.Max != 4 {
		t.Fatalf("unbounded core=1 maximum=%d workers=%d queued=%d, want maximum=4 workers=1 queued=8", s.Max, s.Workers, s.Queued)
	}
	first.open()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s = p.Stats()
	if s.Completed[admit.OutcomeOK] != 9 || s.Queued != 0 || s.PeakWorkers != 1 {
		t.Fatalf("completed=%d queued=%d peak workers=%d, want 9, 0, 1", s.Completed[admit.OutcomeOK], s.Queued, s.PeakWorkers)
	}
	for i, c := range rest {
		if c.ran.Load() != 1 {
			t.Fatalf("queued task %d ran %d times", i, c.ran.Load())
		}
	}
}

// saturate fills a pool of one worker and no queue with a latch, and
// returns the latch.
func saturate(t *testing.T, p *pool.Pool) *latch {
	t.Helper()
	l := newLatch(t)
	if err := p.Go(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	<-l.started
	return l
}

func TestRefusalsToldApart(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, Queue: 0})
	ctx := context.Background()
	l := saturate(t, p)
	wantReason(t, p.Go(ctx, &counted{}), admit.ReasonQueueFull)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	wantReason(t, p.Go(canceled, &counted{}), admit.ReasonCanceled)
	expired, cancel2 := context.WithDeadline(ctx, time.Unix(1, 0))
	defer cancel2()
	wantReason(t, p.Go(expired, &counted{}), admit.ReasonDeadline)

	l.open()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantReason(t, p.Go(ctx, &counted{}), admit.ReasonClosed)
	s := p.Stats()
	checkInvariants(t, s)
	for r, n := range map[admit.Reason]uint64{admit.ReasonQueueFull: 1, admit.ReasonCanceled: 1, admit.ReasonDeadline: 1, admit.ReasonClosed: 1} {
		if s.Rejected[r] != n {
			t.Errorf("rejected[%s] = %d, want %d", r, s.Rejected[r], n)
		}
	}
}

// TestClosedRefusesWhateverWhenFull: after Shutdown, no WhenFull absorbs a
// submission: each returns the closed refusal, and the task never runs.
func TestClosedRefusesWhateverWhenFull(t *testing.T) {
	for _, wf := range []pool.WhenFull{pool.Abort, pool.CallerRuns, pool.Discard, pool.DiscardOldest} {
		t.Run(wf.String(), func(t *testing.T) {
			p := newPool(t, pool.Config{Core: 1, WhenFull: wf})
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			c := &counted{}
			wantReason(t, p.Go(context.Background(), c), admit.ReasonClosed)
			if c.ran.Load() != 0 || c.dropped.Load() != 0 {
				t.Fatalf("refused task ran %d, dropped %d times", c.ran.Load(), c.dropped.Load())
			}
		})
	}
}

// TestCallerRunsOnClosedPoolRefuses: CallerRuns is a response to
// overload; a closed pool refuses, it does not run the task on the caller.
func TestCallerRunsOnClosedPoolRefuses(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, WhenFull: pool.CallerRuns})
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := &counted{}
	err := p.Go(context.Background(), c)
	if !errors.Is(err, admit.ErrClosed) {
		t.Fatalf("Go on a closed CallerRuns pool = %v, want admit.ErrClosed", err)
	}
	if c.ran.Load() != 0 || p.Stats().CallerRuns != 0 {
		t.Fatalf("the task ran on the caller of a closed pool (%d runs)", c.ran.Load())
	}
}

func TestCallerRunsRunsOnTheSubmitter(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, WhenFull: pool.CallerRuns})
	l := saturate(t, p)
	defer l.open()
	var ranHere bool
	submitting := true
	err := p.Go(context.Background(), pool.Func(func(context.Context) error {
		ranHere = submitting // no race: only this goroutine touches both when the task runs on the caller
		return nil
	}))
	submitting = false
	if err != nil || !ranHere {
		t.Fatalf("Go = %v, ran on the submitter = %v; want nil, true", err, ranHere)
	}
	s := p.Stats()
	if s.CallerRuns != 1 || s.Completed[admit.OutcomeOK] != 1 {
		t.Fatalf("caller runs=%d completed ok=%d, want 1, 1", s.CallerRuns, s.Completed[admit.OutcomeOK])
	}
	checkInvariants(t, s)
}

// TestDiscardedFutureCompletes: Discard drops the new task,
// and its Future completes at once with the reason, so nobody waits for
// ever on a task that will never run.
func TestDiscardedFutureCompletes(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, WhenFull: pool.Discard})
	l := saturate(t, p)
	defer l.open()
	c := &counted{}
	f, err := p.Submit(context.Background(), c)
	if err != nil {
		t.Fatalf("Submit under Discard = %v, want nil (the task is dropped, not refused)", err)
	}
	select {
	case <-f.Done():
	default:
		t.Fatal("the discarded task's Future is not complete")
	}
	var de *pool.DroppedError
	if err := f.Err(); !errors.As(err, &de) || de.Reason != pool.DropDiscarded || !errors.Is(err, pool.ErrDropped) {
		t.Fatalf("Future.Err = %v, want a DroppedError with reason discarded", err)
	}
	s := p.Stats()
	if c.ran.Load() != 0 || s.Rejected[admit.ReasonQueueFull] != 1 || s.Dropped[pool.DropDiscarded] != 1 {
		t.Fatalf("ran=%d rejected queue_full=%d dropped discarded=%d, want 0, 1, 1", c.ran.Load(), s.Rejected[admit.ReasonQueueFull], s.Dropped[pool.DropDiscarded])
	}
	checkInvariants(t, s)
}

func TestDiscardOldestEvictsTheHead(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, Queue: 1, WhenFull: pool.DiscardOldest})
	ctx := context.Background()
	l := saturate(t, p)
	older, newer := &counted{}, &counted{}
	if err := p.Go(ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := p.Go(ctx, newer); err != nil {
		t.Fatal(err)
	}
	var de *pool.DroppedError
	if older.dropped.Load() != 1 || !errors.As(older.dropErr, &de) || de.Reason != pool.DropEvicted {
		t.Fatalf("older task dropped %d times with %v, want once with reason evicted", older.dropped.Load(), older.dropErr)
	}
	l.open()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if newer.ran.Load() != 1 || older.ran.Load() != 0 || s.Completed[admit.OutcomeDropped] != 1 || s.Dropped[pool.DropEvicted] != 1 {
		t.Fatalf("newer ran %d, older ran %d, dropped=%d evicted=%d", newer.ran.Load(), older.ran.Load(), s.Completed[admit.OutcomeDropped], s.Dropped[pool.DropEvicted])
	}
	checkInvariants(t, s)
}

// TestDiscardOldestWithoutQueueDiscardsTheNewTask: nothing is queued to
// evict, so the new task is the one dropped.
func TestDiscardOldestWithoutQueueDiscardsTheNewTask(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, WhenFull: pool.DiscardOldest})
	l := saturate(t, p)
	defer l.open()
	c := &counted{}
	if err := p.Go(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if c.dropped.Load() != 1 || p.Stats().Dropped[pool.DropDiscarded] != 1 {
		t.Fatalf("new task dropped %d times, want 1", c.dropped.Load())
	}
}

// TestExpiredTaskNeverRuns: a task whose context ends while it is queued
// is dropped when a worker reaches it, never started.
func TestExpiredTaskNeverRuns(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, Queue: 1})
	ctx := context.Background()
	l := saturate(t, p)
	taskCtx, cancel := context.WithCancel(ctx)
	c := &counted{}
	f, err := p.Submit(taskCtx, c)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	l.open()
	err = f.Wait(ctx)
	var de *pool.DroppedError
	if !errors.As(err, &de) || de.Reason != pool.DropExpired || !errors.Is(err, context.Canceled) {
		t.Fatalf("Future = %v, want a DroppedError, reason expired, matching context.Canceled", err)
	}
	if c.ran.Load() != 0 {
		t.Fatal("the expired task ran")
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Dropped[pool.DropExpired] != 1 || s.Completed[admit.OutcomeDropped] != 1 {
		t.Fatalf("dropped expired=%d completed dropped=%d, want 1, 1", s.Dropped[pool.DropExpired], s.Completed[admit.OutcomeDropped])
	}
}

func TestPanicIsContainedAndCounted(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(b)
	}), nil))
	p := newPool(t, pool.Config{Core: 1, Queue: 1, Logger: logger}) // the queue: the worker may not be idle yet when the next task comes
	ctx := context.Background()
	f, err := p.Submit(ctx, pool.Func(func(context.Context) error { panic("boom") }))
	if err != nil {
		t.Fatal(err)
	}
	var pe *pool.PanicError
	if err := f.Wait(ctx); !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("Future = %v, want a PanicError with the value and a stack", err)
	}
	// The worker survived: the next task runs on it.
	g, err := p.Submit(ctx, &counted{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// A Future completes before its worker counts the completion.
	testutil.Eventually(t, "the second task counted", func() bool { return p.Stats().Completed[admit.OutcomeOK] == 1 })
	s := p.Stats()
	if s.Panics() != 1 || s.Completed[admit.OutcomeOK] != 1 || s.PeakWorkers != 1 {
		t.Fatalf("panics=%d ok=%d peak workers=%d, want 1, 1, 1", s.Panics(), s.Completed[admit.OutcomeOK], s.PeakWorkers)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(logged.Bytes(), []byte("boom")) {
		t.Fatalf("log = %q, want the panic value", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestOutcomes(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, Queue: 1})
	ctx := context.Background()
	boom := errors.New("boom")
	f1, err := p.Submit(ctx, pool.Func(func(context.Context) error { return boom }))
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	f2, err := p.Submit(cctx, pool.Func(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := f1.Wait(ctx); !errors.Is(err, boom) {
		t.Fatalf("f1 = %v", err)
	}
	<-started
	if err := f2.Err(); !errors.Is(err, pool.ErrPending) {
		t.Fatalf("running future's Err = %v, want ErrPending", err)
	}
	cancel()
	if err := f2.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("f2 = %v", err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.Completed[admit.OutcomeError] != 1 || s.Completed[admit.OutcomeCanceled] != 1 {
		t.Fatalf("completed = %v, want one error and one canceled", s.Completed)
	}
}

// TestExtraWorkerLeavesAfterIdleTimeout runs on synctest's clock.
func TestExtraWorkerLeavesAfterIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pool.New(pool.Config{Core: 1, Max: 2, IdleTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, b := newLatch(t), newLatch(t)
		if err := p.Go(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := p.Go(ctx, b); err != nil {
			t.Fatal(err)
		}
		a.open()
		b.open()
		synctest.Wait()
		if s := p.Stats(); s.Workers != 2 || s.Idle != 2 {
			t.Fatalf("workers=%d idle=%d right after the work, want 2, 2", s.Workers, s.Idle)
		}
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if s := p.Stats(); s.Workers != 2 {
			t.Fatalf("workers=%d before the idle time-out, want 2", s.Workers)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if s := p.Stats(); s.Workers != 1 {
			t.Fatalf("workers=%d after the idle time-out, want 1 (the core worker stays)", s.Workers)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := p.Stats(); s.Workers != 1 {
			t.Fatalf("workers=%d an hour later, want the core worker", s.Workers)
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if s := p.Stats(); s.Workers != 0 {
			t.Fatalf("workers=%d after Shutdown", s.Workers)
		}
	})
}

func TestNegativeIdleTimeoutLeavesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pool.New(pool.Config{Core: 1, Max: 2, IdleTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, b := newLatch(t), newLatch(t)
		_ = p.Go(ctx, a)
		_ = p.Go(ctx, b)
		a.open()
		b.open()
		synctest.Wait()
		if s := p.Stats(); s.Workers != 1 {
			t.Fatalf("workers=%d, want 1", s.Workers)
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOldestQueuedAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pool.New(pool.Config{Core: 1, Queue: 2})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l := newLatch(t)
		_ = p.Go(ctx, l)
		<-l.started
		_ = p.Go(ctx, &counted{})
		time.Sleep(3 * time.Second)
		_ = p.Go(ctx, &counted{})
		time.Sleep(2 * time.Second)
		if s := p.Stats(); s.Queued != 2 || s.OldestQueued != 5*time.Second {
			t.Fatalf("queued=%d oldest=%v, want 2, 5s", s.Queued, s.OldestQueued)
		}
		l.open()
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if s := p.Stats(); s.OldestQueued != 0 {
			t.Fatalf("oldest=%v with an empty queue", s.OldestQueued)
		}
	})
}

// TestShutdownRunsQueuedWork: graceful shutdown refuses new work but
// finishes everything accepted, queued tasks included.
func TestShutdownRunsQueuedWork(t *testing.T) {
	p, err := pool.New(pool.Config{Core: 1, Queue: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := saturate(t, p)
	queued := []*counted{{}, {}, {}}
	for _, c := range queued {
		if err := p.Go(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	shut := make(chan error, 1)
	go func() { shut <- p.Shutdown(ctx) }()
	for !p.Closed() {
		time.Sleep(time.Millisecond) // waits for the goroutine above to start; not pacing
	}
	wantReason(t, p.Go(ctx, &counted{}), admit.ReasonClosed)
	select {
	case <-p.Done():
		t.Fatal("Done closed while a task is still running")
	default:
	}
	l.open()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	for i, c := range queued {
		if c.ran.Load() != 1 {
			t.Fatalf("queued task %d ran %d times, want 1", i, c.ran.Load())
		}
	}
}

func TestShutdownDeadlineDropsQueued(t *testing.T) {
	p, err := pool.New(pool.Config{Core: 1, Queue: 4})
	if err != nil {
		t.Fatal(err)
	}
	l := saturate(t, p)
	c := &counted{}
	f, err := p.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with an ended context = %v, want context.Canceled", err)
	}
	var de *pool.DroppedError
	if err := f.Err(); !errors.As(err, &de) || de.Reason != pool.DropClosed {
		t.Fatalf("queued future = %v, want dropped with reason closed", err)
	}
	l.open()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	checkInvariants(t, s)
	if c.ran.Load() != 0 || s.Dropped[pool.DropClosed] != 1 {
		t.Fatalf("ran=%d dropped closed=%d", c.ran.Load(), s.Dropped[pool.DropClosed])
	}
}

func TestConfig(t *testing.T) {
	for _, cfg := range []pool.Config{
		{Core: -1}, {Max: -1}, {Core: 3, Max: 2}, {WhenFull: 99},
	} {
		if _, err := pool.New(cfg); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	p, err := pool.New(pool.Config{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.Core != 1 || s.Max != 1 || s.QueueCap != 0 || s.Pool != "pool" || s.WhenFull != pool.Abort {
		t.Fatalf("defaults = %+v", s)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Go(context.Background(), nil); !errors.Is(err, pool.ErrNilTask) {
		t.Fatalf("Go(nil task) = %v, want ErrNilTask", err)
	}
}

type recorder struct {
	mu      sync.Mutex
	submits []pool.SubmitEvent
	dones   []pool.DoneEvent
}

func (r *recorder) ObserveSubmit(e pool.SubmitEvent) {
	r.mu.Lock()
	r.submits = append(r.submits, e)
	r.mu.Unlock()
}
func (r *recorder) ObserveDone(e pool.DoneEvent) {
	r.mu.Lock()
	r.dones = append(r.dones, e)
	r.mu.Unlock()
}

func TestObserverSeesEveryDecisionAndEnd(t *testing.T) {
	rec := &recorder{}
	p := newPool(t, pool.Config{Name: "obs", Core: 1, Queue: 1, WhenFull: pool.DiscardOldest, Observer: pool.Observers(nil, rec)})
	ctx := context.Background()
	l := saturate(t, p)
	_ = p.Go(ctx, &counted{}) // queued
	_ = p.Go(ctx, &counted{}) // evicts the one above
	l.open()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = p.Go(ctx, &counted{}) // refused: closed
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.submits) != 4 || len(rec.dones) != 3 {
		t.Fatalf("%d submit and %d done events, want 4 and 3", len(rec.submits), len(rec.dones))
	}
	last := rec.submits[3]
	if last.Accepted || last.Reason != admit.ReasonClosed || last.Pool != "obs" {
		t.Fatalf("last submit event = %+v", last)
	}
	var evicted int
	for _, d := range rec.dones {
		if d.Outcome == admit.OutcomeDropped && d.Drop == pool.DropEvicted {
			evicted++
		}
	}
	if evicted != 1 {
		t.Fatalf("done events = %+v, want one evicted", rec.dones)
	}
}

// TestGoexitInTaskIsCounted: a task that ends its goroutine with
// runtime.Goexit takes its worker with it, but the pool's books stay
// right, its Future completes, and Shutdown does not hang.
func TestGoexitInTaskIsCounted(t *testing.T) {
	for _, callerRuns := range []bool{false, true} {
		p := newPool(t, pool.Config{Core: 1, Queue: 1, WhenFull: pool.CallerRuns})
		ctx := context.Background()
		var l *latch
		if callerRuns {
			l = saturate(t, p)
			_ = p.Go(ctx, &counted{}) // fills the queue: the next task runs on the caller
		}
		var f *pool.Future
		done := make(chan struct{})
		go func() { // Goexit ends this goroutine when the task runs on it
			defer close(done)
			f, _ = p.Submit(ctx, pool.Func(func(context.Context) error { runtime.Goexit(); return nil }))
		}()
		<-done
		if l != nil {
			l.open()
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		checkInvariants(t, s)
		if s.Panics() != 1 || s.Workers != 0 || s.Running != 0 {
			t.Fatalf("caller runs %v: panics %d workers %d running %d", callerRuns, s.Panics(), s.Workers, s.Running)
		}
		if f != nil { // nil when Goexit ended Submit itself (caller runs)
			var pe *pool.PanicError
			if err := f.Wait(ctx); !errors.As(err, &pe) {
				t.Fatalf("Future = %v, want a PanicError", err)
			}
		}
	}
}

// TestGoexitDoesNotStrandTheQueue: the worker a Goexit took away is
// replaced while tasks are queued, so they still run.
func TestGoexitDoesNotStrandTheQueue(t *testing.T) {
	p := newPool(t, pool.Config{Core: 1, Queue: 2})
	ctx := context.Background()
	l := saturate(t, p)
	if err := p.Go(ctx, pool.Func(func(context.Context) error { runtime.Goexit(); return nil })); err != nil {
		t.Fatal(err)
	}
	after := &counted{}
	if err := p.Go(ctx, after); err != nil {
		t.Fatal(err)
	}
	l.open()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); after.ran.Load() != 1 || s.Panics() != 1 || s.Workers != 0 {
		t.Fatalf("task behind the Goexit ran %d times; panics %d, workers %d", after.ran.Load(), s.Panics(), s.Workers)
	}
}
