package pool_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/pool"
	"pgregory.net/rapid"
)

// goid returns the current goroutine's id (tests only: it parses the
// stack header).
func goid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	f := bytes.Fields(buf[:n])
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

// propTask holds its worker until released, except when it runs on the
// goroutine that submitted it (CallerRuns), which must not wait on itself.
type propTask struct {
	release   chan struct{}
	submitter uint64
	ran       atomic.Int32
	dropped   atomic.Int32
}

func (p *propTask) Run(ctx context.Context) error {
	p.ran.Add(1)
	if p.release != nil && goid() != p.submitter {
		<-p.release
	}
	return nil
}

func (p *propTask) Drop(err error) {
	if !errors.Is(err, pool.ErrDropped) {
		panic("Drop without a DroppedError")
	}
	p.dropped.Add(1)
}

type submission struct {
	task   *propTask
	future *pool.Future
	err    error
	cancel context.CancelFunc
}

// TestEveryAcceptedTaskEndsExactlyOnce: under random configurations and
// random interleavings of submissions, releases and cancellations, every
// accepted task either runs once or is dropped once (and its Future says
// which), every refused task neither runs nor is dropped, and Stats keep
// their invariants throughout.
func TestEveryAcceptedTaskEndsExactlyOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		core := rapid.IntRange(1, 3).Draw(rt, "core")
		cfg := pool.Config{
			Core:     core,
			Max:      core + rapid.IntRange(0, 2).Draw(rt, "extra"),
			Queue:    rapid.IntRange(-1, 3).Draw(rt, "queue"),
			WhenFull: pool.WhenFull(rapid.IntRange(0, 3).Draw(rt, "when_full")),
		}
		if rapid.Bool().Draw(rt, "quick idle time-out") {
			cfg.IdleTimeout = -1
		}
		p, err := pool.New(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		me := goid()
		var subs []*submission
		var open []*propTask // blocking tasks not yet released
		closed := false
		ops := rapid.IntRange(1, 40).Draw(rt, "ops")
		for range ops {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 4: // submit
				task := &propTask{submitter: me}
				if rapid.Bool().Draw(rt, "blocking") {
					task.release = make(chan struct{})
					open = append(open, task)
				}
				ctx, cancel := context.WithCancel(context.Background())
				s := &submission{task: task, cancel: cancel}
				if rapid.Bool().Draw(rt, "with future") {
					s.future, s.err = p.Submit(ctx, task)
				} else {
					s.err = p.Go(ctx, task)
				}
				subs = append(subs, s)
			case op <= 6 && len(open) > 0: // release one
				i := rapid.IntRange(0, len(open)-1).Draw(rt, "release")
				close(open[i].release)
				open = append(open[:i], open[i+1:]...)
			case op <= 8 && len(subs) > 0: // cancel one's context
				subs[rapid.IntRange(0, len(subs)-1).Draw(rt, "cancel")].cancel()
			case op == 9 && !closed && rapid.Bool().Draw(rt, "shutdown early"):
				closed = true
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // do not wait: running latches would block it
				_ = p.Shutdown(ctx)
			}
			checkInvariants(rt, p.Stats())
		}
		for _, task := range open {
			close(task.release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			rt.Fatalf("Shutdown: %v", err)
		}
		s := p.Stats()
		checkInvariants(rt, s)
		if s.Running != 0 || s.Queued != 0 || s.Workers != 0 {
			rt.Fatalf("after Shutdown: running %d queued %d workers %d", s.Running, s.Queued, s.Workers)
		}
		var ran, dropped uint64
		for i, sub := range subs {
			sub.cancel()
			r, d := sub.task.ran.Load(), sub.task.dropped.Load()
			ran += uint64(r)
			dropped += uint64(d)
			if sub.err != nil {
				if r != 0 || d != 0 || !errors.Is(sub.err, admit.ErrRejected) {
					rt.Fatalf("submission %d refused (%v) but ran %d, dropped %d", i, sub.err, r, d)
				}
				continue
			}
			if r+d != 1 {
				rt.Fatalf("accepted submission %d ran %d times and was dropped %d times", i, r, d)
			}
			if sub.future != nil {
				select {
				case <-sub.future.Done():
				default:
					rt.Fatalf("accepted submission %d: Future never completed", i)
				}
				if ferr := sub.future.Err(); (ferr != nil) != (d == 1) {
					rt.Fatalf("submission %d: Future = %v, dropped %d", i, ferr, d)
				}
			}
		}
		var droppedTotal uint64
		for _, n := range s.Dropped {
			droppedTotal += n
		}
		if ran != s.Completed[admit.OutcomeOK] || dropped != droppedTotal {
			rt.Fatalf("tasks ran %d and were dropped %d; stats say ok %d, dropped %v", ran, dropped, s.Completed[admit.OutcomeOK], s.Dropped)
		}
	})
}

// TestConcurrentSubmitters runs many submitters, cancellations and a
// shutdown at once, samples the invariants while they run, and then
// checks that every accepted task ended exactly once.
func TestConcurrentSubmitters(t *testing.T) {
	for _, wf := range []pool.WhenFull{pool.Abort, pool.CallerRuns, pool.Discard, pool.DiscardOldest} {
		t.Run(wf.String(), func(t *testing.T) {
			p, err := pool.New(pool.Config{Core: 2, Max: 4, Queue: 8, IdleTimeout: -1, WhenFull: wf})
			if err != nil {
				t.Fatal(err)
			}
			const submitters, each = 6, 300
			tasks := make([][]*propTask, submitters)
			errs := make([][]error, submitters)
			stop := make(chan struct{})
			var sampler sync.WaitGroup
			var samples atomic.Int64
			sampler.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					checkInvariants(errorer{t}, p.Stats())
					samples.Add(1)
					runtime.Gosched()
				}
			})
			var wg sync.WaitGroup
			for g := range submitters {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for i := range each {
						ctx, cancel := context.WithCancel(context.Background())
						task := &propTask{}
						if rng.IntN(4) == 0 {
							cancel() // sometimes before, sometimes while queued
						}
						err := p.Go(ctx, task)
						if rng.IntN(4) == 0 {
							cancel()
						}
						tasks[g] = append(tasks[g], task)
						errs[g] = append(errs[g], err)
						if g == 0 && i == each*3/4 {
							// Close without waiting: what is queued now is dropped.
							ended, end := context.WithCancel(context.Background())
							end()
							_ = p.Shutdown(ended)
						}
						defer cancel()
					}
				})
			}
			wg.Wait()
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			close(stop)
			sampler.Wait()
			s := p.Stats()
			checkInvariants(t, s)
			if s.Offered != submitters*each || s.Rejected[admit.ReasonClosed] == 0 || samples.Load() == 0 {
				t.Fatalf("offered %d, refused as closed %d, samples %d", s.Offered, s.Rejected[admit.ReasonClosed], samples.Load())
			}
			var ranTotal uint64
			for g := range tasks {
				for i, task := range tasks[g] {
					r, d := task.ran.Load(), task.dropped.Load()
					ranTotal += uint64(r)
					switch {
					case errs[g][i] != nil && r+d != 0:
						t.Fatalf("refused task ran %d, dropped %d", r, d)
					case errs[g][i] == nil && r+d != 1:
						t.Fatalf("accepted task ran %d times and was dropped %d times", r, d)
					}
				}
			}
			if ranTotal != s.Completed[admit.OutcomeOK] {
				t.Fatalf("ran %d, stats say %d", ranTotal, s.Completed[admit.OutcomeOK])
			}
		})
	}
}
