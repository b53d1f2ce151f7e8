package doctor

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/retry"
)

// -record rewrites the recorded snapshots in testdata/ from real gates
// driven into each situation. Hand-edited cases (for metrics no sluice
// package exports yet) are listed in testdata/README.md and not touched.
var record = flag.Bool("record", false, "re-record testdata/*/before.prom and after.prom from real gates")

// recorder drives real admit gates exported by promsluice and writes what
// a Prometheus scrape of them shows.
type recorder struct {
	t   *testing.T
	reg *prometheus.Registry
	gm  *promsluice.Metrics
	dir string
	at  []time.Time // when each scrape was taken
}

func newRecorder(t *testing.T, name string, extra ...prometheus.Collector) *recorder {
	r := &recorder{t: t, reg: prometheus.NewRegistry(), gm: promsluice.NewMetrics(), dir: filepath.Join("testdata", name)}
	r.reg.MustRegister(r.gm)
	for _, c := range extra {
		r.reg.MustRegister(c)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *recorder) gate(cfg admit.Config) *admit.Gate {
	cfg.Observer = r.gm
	g, err := admit.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.gm.Add(g); err != nil {
		r.t.Fatal(err)
	}
	return g
}

// recordedInterval is the least time between the two scrapes, so the
// rates read like a real interval's.
const recordedInterval = time.Second

func (r *recorder) scrape(file string) {
	if len(r.at) == 1 {
		time.Sleep(time.Until(r.at[0].Add(recordedInterval)))
	}
	fams, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.dir, file), b.Bytes(), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.at = append(r.at, time.Now())
	if len(r.at) == 2 {
		// The real time between the scrapes, so rates and Little's law
		// are those of the recording.
		c := fmt.Sprintf("{\"interval_seconds\": %.6f}\n", r.at[1].Sub(r.at[0]).Seconds())
		if err := os.WriteFile(filepath.Join(r.dir, "case.json"), []byte(c), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// work admits and completes n units of kind k, each holding its slot for
// hold.
func work(t *testing.T, g *admit.Gate, k admit.Kind, n int, hold time.Duration) {
	for range n {
		p, err := g.TryAcquireFor(admit.Request{Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold)
		p.Done(admit.OutcomeOK)
	}
}

// refuse offers n attempts to a full gate.
func refuse(t *testing.T, g *admit.Gate, k admit.Kind, n int) {
	for range n {
		if p, err := g.TryAcquireFor(admit.Request{Kind: k}); err == nil {
			p.Done(admit.OutcomeOK)
			t.Fatal("gate was not full")
		}
	}
}

// hold takes n slots and returns a function that ends them.
func hold(t *testing.T, g *admit.Gate, n int) func() {
	ps := make([]admit.Permit, n)
	for i := range ps {
		var err error
		if ps[i], err = g.TryAcquire(); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for i := range ps {
			ps[i].Done(admit.OutcomeOK)
		}
	}
}

// waiters queues n callers of weight w and returns a function that
// cancels those still waiting and waits for all of them.
func waiters(g *admit.Gate, n int, w int64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			p, err := g.AcquireFor(ctx, admit.Request{Weight: w})
			if err == nil {
				<-ctx.Done()
				p.Done(admit.OutcomeOK)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

func waitFor(t *testing.T, g *admit.Gate, waiting int64) {
	deadline := time.Now().Add(10 * time.Second)
	for g.Stats().Waiting != waiting {
		if time.Now().After(deadline) {
			t.Fatalf("gate %s: waiting %d, want %d", g.Name(), g.Stats().Waiting, waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

// scrubPaths replaces this machine's directories in a stack dump with
// neutral ones, so the recording names no machine.
func scrubPaths(t *testing.T, b []byte) []byte {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(filepath.Dir(wd)+"/"), []byte("/src/sluice/"))
	if goroot, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		b = bytes.ReplaceAll(b, []byte(strings.TrimSpace(string(goroot))+"/"), []byte("/usr/lib/go/"))
	}
	if gp := os.Getenv("GOPATH"); gp != "" {
		b = bytes.ReplaceAll(b, []byte(gp+"/"), []byte("/home/user/go/"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		b = bytes.ReplaceAll(b, []byte(home+"/"), []byte("/home/user/"))
	}
	return b
}

func TestRecordSnapshots(t *testing.T) {
	if !*record {
		t.Skip("run with -record to re-record the snapshots")
	}
	ms := time.Millisecond

	t.Run("healthy", func(t *testing.T) {
		r := newRecorder(t, "healthy")
		g := r.gate(admit.Config{Name: "disk", Capacity: 4})
		work(t, g, 0, 50, 100*time.Microsecond)
		r.scrape("before.prom")
		work(t, g, 0, 60, 100*time.Microsecond)
		r.scrape("after.prom")
	})

	t.Run("arrivals_above_completions", func(t *testing.T) {
		r := newRecorder(t, "arrivals_above_completions")
		g := r.gate(admit.Config{Name: "disk", Capacity: 4})
		work(t, g, 0, 20, 100*time.Microsecond)
		r.scrape("before.prom")
		end := hold(t, g, 4)
		refuse(t, g, 0, 60)
		end()
		work(t, g, 0, 36, 100*time.Microsecond)
		r.scrape("after.prom")
	})

	t.Run("queue_growing_at_capacity", func(t *testing.T) {
		r := newRecorder(t, "queue_growing_at_capacity")
		g := r.gate(admit.Config{Name: "upstream", Capacity: 2, MaxWaiters: 100, MaxWait: -1})
		work(t, g, 0, 40, ms)
		end := hold(t, g, 2)
		stop1 := waiters(g, 3, 1)
		waitFor(t, g, 3)
		r.scrape("before.prom")
		time.Sleep(recordedInterval) // the held work is slow now
		stop2 := waiters(g, 9, 1)
		waitFor(t, g, 12)
		end() // two complete; two waiters take their slots
		waitFor(t, g, 10)
		r.scrape("after.prom")
		stop1()
		stop2()
	})

	t.Run("queue_growing_below_capacity", func(t *testing.T) {
		r := newRecorder(t, "queue_growing_below_capacity")
		g := r.gate(admit.Config{Name: "disk", Capacity: 4, MaxWaiters: 100, MaxWait: -1, MaxOvertakes: -1})
		work(t, g, 0, 30, 100*time.Microsecond)
		big, err := g.TryAcquireFor(admit.Request{Weight: 3}) // one heavy permit: 3 of 4 slots
		if err != nil {
			t.Fatal(err)
		}
		stop1 := waiters(g, 1, 2) // does not fit in the one free slot
		waitFor(t, g, 1)
		r.scrape("before.prom")
		stop2 := waiters(g, 5, 1) // strict FIFO: queued behind it
		waitFor(t, g, 6)
		r.scrape("after.prom")
		big.Done(admit.OutcomeOK)
		stop1()
		stop2()
	})

	t.Run("stalled", func(t *testing.T) {
		r := newRecorder(t, "stalled")
		g := r.gate(admit.Config{Name: "db", Capacity: 3, MaxWaiters: 100, MaxWait: -1})
		work(t, g, 0, 25, ms)
		end := hold(t, g, 3)
		stop := waiters(g, 2, 1)
		waitFor(t, g, 2)
		r.scrape("before.prom")
		stop2 := waiters(g, 2, 1)
		waitFor(t, g, 4)
		r.scrape("after.prom")
		stop()
		stop2()
		end()
	})

	t.Run("refusals_concentrated_gate", func(t *testing.T) {
		r := newRecorder(t, "refusals_concentrated_gate")
		disk := r.gate(admit.Config{Name: "disk", Capacity: 2})
		up := r.gate(admit.Config{Name: "upstream", Capacity: 8})
		work(t, disk, 0, 10, 0)
		work(t, up, 0, 10, 0)
		r.scrape("before.prom")
		end := hold(t, disk, 2)
		refuse(t, disk, 0, 45)
		end()
		work(t, disk, 0, 5, 0)
		work(t, up, 0, 100, 0)
		endUp := hold(t, up, 8)
		refuse(t, up, 0, 2)
		endUp()
		r.scrape("after.prom")
	})

	t.Run("refusals_concentrated_kind", func(t *testing.T) {
		r := newRecorder(t, "refusals_concentrated_kind")
		g := r.gate(admit.Config{Name: "disk", Capacity: 2, Kinds: []string{"hot", "cold"}})
		hot, cold := g.Kind("hot"), g.Kind("cold")
		work(t, g, hot, 20, 0)
		work(t, g, cold, 20, 0)
		r.scrape("before.prom")
		work(t, g, hot, 50, 0)
		end := hold(t, g, 2)
		refuse(t, g, cold, 40)
		refuse(t, g, hot, 2)
		end()
		work(t, g, cold, 10, 0)
		r.scrape("after.prom")
	})

	t.Run("littles_law_mismatch", func(t *testing.T) {
		r := newRecorder(t, "littles_law_mismatch")
		g := r.gate(admit.Config{Name: "disk", Capacity: 16})
		work(t, g, 0, 40, 100*time.Microsecond)
		leaked := hold(t, g, 6) // permits taken and never ended
		work(t, g, 0, 20, 100*time.Microsecond)
		r.scrape("before.prom")
		work(t, g, 0, 80, 100*time.Microsecond)
		r.scrape("after.prom")
		leaked()
	})

	t.Run("double_release", func(t *testing.T) {
		r := newRecorder(t, "double_release")
		g := r.gate(admit.Config{Name: "disk", Capacity: 4})
		work(t, g, 0, 30, 0)
		r.scrape("before.prom")
		work(t, g, 0, 30, 0)
		for range 3 {
			p, err := g.TryAcquire()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(admit.OutcomeOK)
			p.Done(admit.OutcomeError) // the bug: a second end
		}
		r.scrape("after.prom")
	})

	t.Run("retries_amplifying", func(t *testing.T) {
		// A real retry policy exported by promsluice: calls that succeed
		// at once, then calls against a failing upstream, each retried to
		// its fourth attempt (a budget wide enough to allow it).
		r := newRecorder(t, "retries_amplifying")
		budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: 10, MinPerSecond: 1000, Window: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		pol, err := retry.New(retry.Config{Name: "payments", MaxAttempts: 4, Budget: budget, NoThrottle: true,
			Sleep: func(context.Context, time.Duration) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.gm.Add(pol); err != nil {
			t.Fatal(err)
		}
		calls := func(n int, outcome retry.Outcome) {
			for range n {
				if _, err := pol.Do(context.Background(), true, func(int, retry.Timeout) retry.Outcome { return outcome }); err != nil {
					t.Fatal(err)
				}
			}
		}
		g := r.gate(admit.Config{Name: "upstream", Capacity: 8})
		work(t, g, 0, 40, 0)
		calls(1000, retry.Outcome{Accepted: true})
		r.scrape("before.prom")
		work(t, g, 0, 40, 0)
		calls(100, retry.Outcome{Retryable: true})
		r.scrape("after.prom")
	})

	t.Run("oldest_waiter_stuck", func(t *testing.T) {
		// A heavy waiter at the head that does not fit while small ones
		// overtake it: the queue shrinks, its oldest item does not move.
		// No gate exports the oldest waiter's age yet; the gauge here
		// carries the ages such a gate would report 5 s apart.
		oldest := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricOldestWait, Help: "Age of the oldest queued caller."}, []string{"gate"})
		r := newRecorder(t, "oldest_waiter_stuck", oldest)
		g := r.gate(admit.Config{Name: "disk", Capacity: 4, MaxWaiters: 100, MaxWait: -1})
		work(t, g, 0, 30, 100*time.Microsecond)
		end := hold(t, g, 3)
		stopBig := waiters(g, 1, 4) // needs every slot
		waitFor(t, g, 1)
		stopSmall := waiters(g, 6, 1) // the one free slot goes to one of these
		waitFor(t, g, 6)
		oldest.WithLabelValues("disk").Set(2.0)
		r.scrape("before.prom")
		stopSmall() // the small ones give up or finish: the queue shrinks
		waitFor(t, g, 1)
		// It did not move: it aged by exactly the time between the scrapes.
		time.Sleep(time.Until(r.at[0].Add(recordedInterval)))
		oldest.WithLabelValues("disk").Set(2.0 + time.Since(r.at[0]).Seconds())
		r.scrape("after.prom")
		end()
		stopBig()
	})

	t.Run("goroutines", func(t *testing.T) {
		r := newRecorder(t, "goroutines")
		g := r.gate(admit.Config{Name: "disk", Capacity: 1, MaxWaiters: 100, MaxWait: -1})
		work(t, g, 0, 30, 100*time.Microsecond)
		end := hold(t, g, 1)
		stop := waiters(g, 4, 1)
		waitFor(t, g, 4)
		var mu sync.Mutex
		entered := 0
		mu.Lock()
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() { mu.Lock(); entered++; mu.Unlock() }) // these wait on the lock
		}
		time.Sleep(50 * ms) // let them block on the mutex
		r.scrape("before.prom")
		work2 := waiters(g, 2, 1)
		waitFor(t, g, 6)
		r.scrape("after.prom")
		var b bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, "goroutines.txt"), scrubPaths(t, b.Bytes()), 0o644); err != nil {
			t.Fatal(err)
		}
		mu.Unlock()
		wg.Wait()
		stop()
		work2()
		end()
	})
}
