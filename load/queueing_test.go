package load

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/plan"
)

// The driver against queueing theory: an in-process server of c workers
// that serve one FIFO queue with exponential service times at 100/s a
// worker, loaded with Poisson arrivals and compared with M/M/1 (λ = 50 and
// 90/s: 20 ms and 100 ms mean time in system), M/M/4 via Erlang C (λ = 300
// and 380/s: 15.1 ms and 54.6 ms) and, with uniform arrivals, D/M/1 (λ =
// 90/s: 51.8 ms).
//
// How long, and how close. A run is one sample of a queue whose state
// persists for seconds at high utilisation (at 90 % an M/M/1 queue forgets
// its backlog over about 4 s), so one run's mean time in system strays from
// the long-run figure by far more than its request count suggests: in 60 s
// at 90 % the mean may fall anywhere from about half to twice the theory's.
// The tolerance of each check is therefore computed from the run's length:
// 2,000 exact runs of the model of that length, from an empty queue, give
// the 0.1st to 99.9th percentile of the mean and of the p99 that a correct
// driver can show (queueingBands below, reproducible with
// -load.queueing.bands). The runs' seeds are fixed, so a run draws the
// same arrivals and service times every time: it cannot flake on a draw,
// and the bands make sure no seed was picked to pass.
//
// Two tests, each checking two things:
//
//   - TestSynctestQueueingTheory runs the driver itself (pacer, workers,
//     histograms, report) in virtual time against the server as an
//     in-memory transport: no scheduling error at all, so 60 s of load take
//     a few seconds of CPU. The driver's mean and p99 response times must
//     equal the server's own record of the same requests (within the
//     histograms' 0.1 %), and fall in the band for 60 s.
//   - TestDriverMatchesQueueingTheory runs it in real time over real
//     sockets for 5 s: the driver's own scheduling error (pacer lag, the
//     hand-off to a worker, the loopback exchange, the server's timers)
//     now counts. Its response times can never be below the server's record
//     (they run from the scheduled time, before the server saw the
//     request); above it by at most twice the lateness both sides measured
//     of themselves (each wakes up twice per request and times one of the
//     two) plus 1 ms (5 ms on the p99) and 5 %; and inside the band for 5 s
//     widened by the same. A machine too busy to keep time (the driver's
//     schedule-lag p99 or the server's wake-up lateness p99 over 5 ms, half
//     the driver's own threshold for a driver-limited window) sends bunched
//     arrivals that are no longer the model's, and delays the wake-ups
//     neither side times more than the ones they do: those upper checks
//     are then skipped, and the test says why.
//
// -load.queueing.long runs 20 minutes of virtual and 2 minutes of real time
// per scenario instead, against their narrower bands.
var (
	queueingLong  = flag.Bool("load.queueing.long", false, "run the queueing-theory tests for 20 min (virtual) and 2 min (real) per scenario")
	queueingBands = flag.Bool("load.queueing.bands", false, "compute and print the queueing-theory tests' bands (slow)")
)

// queueingRuns are the virtual and real lengths of a scenario's run.
func queueingRuns() (virtual, real time.Duration) {
	if *queueingLong {
		return 20 * time.Minute, 2 * time.Minute
	}
	return time.Minute, 5 * time.Second
}

// band is the range of a statistic over exact runs of one length.
type band struct{ lo, hi float64 }

// queueingBands are the 0.1st and 99.9th percentiles of one run's mean and
// p99 time in system (ms), by model and run length, over 2,000 exact runs
// each from an empty queue: the output of
//
//	go test ./load -run TestQueueingBands -load.queueing.bands -v
var queueingBandTable = map[string][2]band{
	"M/M/1 λ=50 5s":     {{11.9, 35.6}, {42.1, 207.1}},
	"M/M/1 λ=50 1m0s":   {{16.8, 23.8}, {67.4, 148.7}},
	"M/M/1 λ=50 2m0s":   {{17.7, 22.5}, {74.4, 130.7}},
	"M/M/1 λ=50 20m0s":  {{19.3, 20.7}, {85.6, 100.5}},
	"M/M/1 λ=90 5s":     {{26.0, 383.9}, {81.1, 674.5}},
	"M/M/1 λ=90 1m0s":   {{57.1, 246.8}, {191.5, 995.3}},
	"M/M/1 λ=90 2m0s":   {{65.9, 167.6}, {241.3, 936.5}},
	"M/M/1 λ=90 20m0s":  {{85.0, 120.2}, {342.7, 897.9}},
	"M/M/4 λ=300 5s":    {{11.3, 24.9}, {44.1, 110.8}},
	"M/M/4 λ=300 1m0s":  {{13.6, 17.0}, {52.4, 86.6}},
	"M/M/4 λ=300 2m0s":  {{13.9, 16.2}, {53.7, 75.3}},
	"M/M/4 λ=300 20m0s": {{14.7, 15.4}, {57.7, 62.9}},
	"M/M/4 λ=380 5s":    {{16.6, 207.3}, {54.5, 345.3}},
	"M/M/4 λ=380 1m0s":  {{31.9, 130.8}, {108.3, 463.4}},
	"M/M/4 λ=380 2m0s":  {{36.5, 109.2}, {123.1, 561.3}},
	"M/M/4 λ=380 20m0s": {{46.4, 67.2}, {175.5, 433.6}},
	"D/M/1 λ=90 5s":     {{18.6, 204.7}, {61.5, 414.0}},
	"D/M/1 λ=90 1m0s":   {{33.5, 95.3}, {113.0, 473.3}},
	"D/M/1 λ=90 2m0s":   {{38.1, 76.3}, {136.4, 474.2}},
	"D/M/1 λ=90 20m0s":  {{45.6, 58.0}, {194.4, 320.0}},
}

// bandsFor is the model's bands for a run of length d.
func bandsFor(t *testing.T, m queueModel, d time.Duration) (mean, p99 band) {
	t.Helper()
	b, ok := queueingBandTable[m.name+" "+d.String()]
	if !ok {
		t.Fatalf("no band for %s over %v: compute them with -load.queueing.bands", m.name, d)
	}
	return b[0], b[1]
}

// fifoServer is an in-process HTTP server of c workers that serve one
// FIFO queue, each request for an exponential service time of mean 1/μ,
// by sleeping rather than computing, so that it costs the machine almost
// nothing.
//
// When a request arrives, its departure is computed at once by the FIFO
// recursion over the workers' free times: it starts when it arrives or
// when the earliest worker frees, whichever is later, and departs one
// service time after that. The handler then sleeps until the departure.
// A late wake-up (a busy machine's timers) therefore delays one answer,
// never the requests queued behind it, so the queue the driver meets is
// the model's; the server records each request's time in it and how late
// its answer left.
type fifoServer struct {
	mu      sync.Mutex
	base    time.Time
	free    []time.Duration // each worker's free time, since base
	rng     *rand.Rand      // service times
	mu1     float64         // service rate of one worker, per second
	sojourn []time.Duration // departure − arrival, in arrival order
	late    []float64       // wake-up − departure, ms
}

func newFIFOServer(workers int, mu1 float64, seed uint64) *fifoServer {
	return &fifoServer{base: time.Now(), free: make([]time.Duration, workers), rng: rand.New(rand.NewPCG(seed, 1)), mu1: mu1}
}

func (f *fifoServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := time.Since(f.base)
	f.mu.Lock()
	k := 0
	for i := range f.free {
		if f.free[i] < f.free[k] {
			k = i
		}
	}
	depart := max(now, f.free[k]) + time.Duration(f.rng.ExpFloat64()/f.mu1*float64(time.Second))
	f.free[k] = depart
	f.sojourn = append(f.sojourn, depart-now)
	f.mu.Unlock()
	time.Sleep(depart - time.Since(f.base))
	late := float64(time.Since(f.base)-depart) / 1e6
	f.mu.Lock()
	f.late = append(f.late, late)
	f.mu.Unlock()
	io.WriteString(w, "ok")
}

// record returns the server's record: the sojourns summarised as the
// driver summarises its own times (same histogram, same percentiles), and
// the mean and p99 lateness of its answers in ms.
func (f *fifoServer) record() (sojourn Dist, n int, lateMean, lateP99 float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := newHist()
	for _, d := range f.sojourn {
		record(h, d)
	}
	late := slices.Clone(f.late)
	if len(late) > 0 {
		lateMean, lateP99 = meanOf(late), quantile(late, 0.99)
	}
	return distOf(h), len(f.sojourn), lateMean, lateP99
}

// fifoTransport is fifoServer as an in-memory RoundTripper, for the
// driver inside a testing/synctest bubble, where time is virtual and the
// answer leaves exactly at its departure.
type fifoTransport struct{ *fifoServer }

func (f fifoTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := &responseBuffer{header: http.Header{}}
	f.ServeHTTP(rec, r)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(rec.body.String())), Header: rec.header, Request: r}, nil
}

type responseBuffer struct {
	header http.Header
	body   strings.Builder
}

func (b *responseBuffer) Header() http.Header         { return b.header }
func (b *responseBuffer) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *responseBuffer) WriteHeader(int)             {}

// queueModel is a queueing scenario: c workers of rate μ, arrivals at λ,
// Poisson or uniform, and theory's mean and p99 time in system (ms).
type queueModel struct {
	name      string
	c         int
	lambda    float64
	arrivals  Arrivals
	mean, p99 float64
}

const serviceRate = 100.0 // per worker: 10 ms of mean service

// mmc is the M/M/c scenario, from package plan's Erlang C.
func mmc(t testing.TB, c int, lambda float64) queueModel {
	r, err := plan.Wait{Slots: int64(c), ServiceTime: 1 / serviceRate, Rate: lambda}.Solve()
	if err != nil || !r.Stable {
		t.Fatalf("M/M/%d at %v/s: %+v %v", c, lambda, r, err)
	}
	return queueModel{name: fmt.Sprintf("M/M/%d λ=%v", c, lambda), c: c, lambda: lambda, arrivals: Poisson,
		mean: r.MeanInSystem * 1000, p99: r.P99InSystem * 1000}
}

// dm1 is the D/M/1 scenario: evenly spaced arrivals at λ. The time in
// system is exponential at μ(1 − σ), where σ in (0, 1) solves
// σ = exp(−μ(1 − σ)/λ) (the GI/M/1 root for constant gaps).
func dm1(lambda float64) queueModel {
	sigma := 0.0
	for range 10000 {
		sigma = math.Exp(-serviceRate * (1 - sigma) / lambda)
	}
	rate := serviceRate * (1 - sigma)
	return queueModel{name: fmt.Sprintf("D/M/1 λ=%v", lambda), c: 1, lambda: lambda, arrivals: Uniform,
		mean: 1000 / rate, p99: 1000 * math.Log(100) / rate}
}

func queueModels(t testing.TB) []queueModel {
	return []queueModel{mmc(t, 1, 50), mmc(t, 1, 90), mmc(t, 4, 300), mmc(t, 4, 380), dm1(90)}
}

// simulate runs the model exactly (the FIFO recursion, no clock) for
// secs of arrivals, from an empty queue, and returns the mean and p99
// time in system in ms.
func (m queueModel) simulate(r *rand.Rand, secs float64, scratch []float64) (mean, p99 float64, _ []float64) {
	free := make([]float64, m.c)
	soj := scratch[:0]
	at := 0.0
	for i := 0; ; i++ {
		if m.arrivals == Poisson {
			at += r.ExpFloat64() / m.lambda
		} else {
			at = float64(i) / m.lambda
		}
		if at >= secs {
			break
		}
		k := 0
		for j := 1; j < m.c; j++ {
			if free[j] < free[k] {
				k = j
			}
		}
		depart := max(at, free[k]) + r.ExpFloat64()/serviceRate
		free[k] = depart
		soj = append(soj, (depart-at)*1000)
	}
	return meanOf(soj), quantile(soj, 0.99), soj
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// quantile returns the q-quantile of xs, the value of rank ⌈q·n⌉,
// reordering xs (a selection, not a sort).
func quantile(xs []float64, q float64) float64 {
	k := max(int(math.Ceil(q*float64(len(xs))))-1, 0)
	lo, hi := 0, len(xs)-1
	for lo < hi {
		p := xs[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// TestQueueingBands computes queueingBandTable (with
// -load.queueing.bands; it takes minutes).
func TestQueueingBands(t *testing.T) {
	if !*queueingBands {
		t.Skip("computes the bands of queueingBandTable; run with -load.queueing.bands")
	}
	var out strings.Builder
	for _, m := range queueModels(t) {
		for _, d := range []time.Duration{5 * time.Second, time.Minute, 2 * time.Minute, 20 * time.Minute} {
			r := rand.New(rand.NewPCG(uint64(d), uint64(m.c*1000)+uint64(m.lambda)))
			var means, p99s, scratch []float64
			for range 2000 {
				var a, b float64
				a, b, scratch = m.simulate(r, d.Seconds(), scratch)
				means, p99s = append(means, a), append(p99s, b)
			}
			fmt.Fprintf(&out, "\t%q: {{%.1f, %.1f}, {%.1f, %.1f}},\n", m.name+" "+d.String(),
				quantile(means, 0.001), quantile(means, 0.999), quantile(p99s, 0.001), quantile(p99s, 0.999))
		}
	}
	t.Logf("\n%s", out.String())
}

// TestSynctestQueueingTheory: the driver in virtual time against the
// exponential FIFO server (see the comment at the top of this file).
func TestSynctestQueueingTheory(t *testing.T) {
	virtual, _ := queueingRuns()
	for i, m := range queueModels(t) {
		t.Run(m.name, func(t *testing.T) {
			bm, bp := bandsFor(t, m, virtual)
			synctest.Test(t, func(t *testing.T) {
				srv := newFIFOServer(m.c, serviceRate, uint64(100+i))
				st, end := runOne(t, context.Background(), Config{
					Targets: []Target{{URL: "http://fifo/"}}, Shape: mustShape(t, m.lambda, virtual), Arrivals: m.arrivals, Seed: uint64(1 + i),
					Workers: 256, QueueDepth: 4096, Transport: fifoTransport{srv}, coarseSleep: true,
				})
				w := st.Windows[0]
				resp := w.Latency.ResponseTime
				path, n, _, _ := srv.record()
				t.Logf("%d requests: mean %.2f ms (the server's %.2f; theory %.2f, a %v run %.1f..%.1f), p99 %.2f ms (the server's %.2f; theory %.2f, a run %.1f..%.1f)",
					w.Counts.OK, resp.Mean, path.Mean, m.mean, virtual, bm.lo, bm.hi, resp.P99, path.P99, m.p99, bp.lo, bp.hi)
				if end != EndDone || w.Counts.OK != w.Counts.Scheduled || int64(n) != w.Counts.OK {
					t.Fatalf("ended %q: scheduled %d, ok %d, served %d; want every arrival answered", end, w.Counts.Scheduled, w.Counts.OK, n)
				}
				if math.Abs(resp.Mean-path.Mean) > 0.001*path.Mean || math.Abs(resp.P99-path.P99) > 0.001*path.P99 {
					t.Errorf("response mean %.3f p99 %.3f ms; the server's record of the same requests %.3f and %.3f: in virtual time they are the same",
						resp.Mean, resp.P99, path.Mean, path.P99)
				}
				if resp.Mean < bm.lo || resp.Mean > bm.hi {
					t.Errorf("mean response %.2f ms: theory gives %.2f ms, and a %v run %.1f..%.1f ms", resp.Mean, m.mean, virtual, bm.lo, bm.hi)
				}
				if resp.P99 < bp.lo || resp.P99 > bp.hi {
					t.Errorf("p99 response %.2f ms: theory gives %.2f ms, and a %v run %.1f..%.1f ms", resp.P99, m.p99, virtual, bp.lo, bp.hi)
				}
			})
		})
	}
}

// TestDriverMatchesQueueingTheory: the driver in real time, over real
// sockets, against the exponential FIFO server (see the comment at the
// top of this file). The scenarios run all at once, each against its own
// server: they sleep far more than they compute, and t.Parallel would run
// only GOMAXPROCS of them at a time.
func TestDriverMatchesQueueingTheory(t *testing.T) {
	_, real := queueingRuns()
	models := queueModels(t)
	type result struct {
		st                Step
		end               End
		err               error
		path              Dist
		n                 int
		lateMean, lateP99 float64
	}
	results := make([]result, len(models))
	var wg sync.WaitGroup
	for i, m := range models {
		srv := newFIFOServer(m.c, serviceRate, uint64(100+i))
		hs := serve(t, srv.ServeHTTP)
		shape := mustShape(t, m.lambda, real)
		wg.Go(func() {
			r := &results[i]
			r.st, r.end, r.err = RunStep(context.Background(), Config{
				Targets: []Target{{URL: hs.URL}}, Shape: shape, Arrivals: m.arrivals, Seed: uint64(1 + i),
				Workers: 256, QueueDepth: 4096, MaxCPU: 2,
			})
			r.path, r.n, r.lateMean, r.lateP99 = srv.record()
		})
	}
	wg.Wait()
	for i, m := range models {
		t.Run(m.name, func(t *testing.T) {
			r := results[i]
			if r.err != nil || r.end != EndDone || len(r.st.Windows) != 1 {
				t.Fatalf("run: %v, ended %q with %d windows", r.err, r.end, len(r.st.Windows))
			}
			bm, bp := bandsFor(t, m, real)
			w := r.st.Windows[0]
			resp, wait, path := w.Latency.ResponseTime, w.Latency.ScheduleWait, r.path
			lateMean, lateP99 := r.lateMean, r.lateP99
			lag := w.Driver.ScheduleLag.P99
			t.Logf("%d requests: mean %.1f ms (the server's %.1f; theory %.1f, a %v run %.1f..%.1f), p99 %.1f ms (the server's %.1f; theory %.1f, a run %.1f..%.1f); "+
				"driver lag p99 %.2f ms, schedule wait mean %.2f p99 %.2f ms; server late mean %.2f p99 %.2f ms",
				w.Counts.OK, resp.Mean, path.Mean, m.mean, real, bm.lo, bm.hi, resp.P99, path.P99, m.p99, bp.lo, bp.hi, lag, wait.Mean, wait.P99, lateMean, lateP99)
			if w.Counts.OK != w.Counts.Scheduled || int64(r.n) != w.Counts.OK {
				t.Fatalf("scheduled %d, ok %d, served %d; want every arrival answered", w.Counts.Scheduled, w.Counts.OK, r.n)
			}
			// Never below the server's record: each response time runs
			// from before the server saw the request to after it answered.
			if resp.Mean < path.Mean*0.999 || resp.P99 < path.P99*0.999 {
				t.Errorf("response mean %.2f p99 %.2f ms below the server's record of the same requests, %.2f and %.2f", resp.Mean, resp.P99, path.Mean, path.P99)
			}
			if lag > 5 || lateP99 > 5 {
				t.Skipf("upper bounds not judged: the machine was too busy to keep time (driver lag p99 %.1f ms, server late p99 %.1f ms; both must be under 5 ms)", lag, lateP99)
			}
			// Each side wakes up twice per request and measures once: the
			// driver its hand-off (schedule wait) but not its read of the
			// answer, the server its timer (late) but not its read of the
			// request. The halves it does not see mirror the ones it does.
			slackMean, slackP99 := 2*(wait.Mean+lateMean)+1, 2*(wait.P99+lateP99)+5
			if hi := path.Mean*1.05 + slackMean; resp.Mean > hi {
				t.Errorf("mean response %.2f ms; the server's record of the same requests %.2f ms, so at most %.2f ms with the lateness both sides measured", resp.Mean, path.Mean, hi)
			}
			if hi := path.P99*1.05 + slackP99; resp.P99 > hi {
				t.Errorf("p99 response %.2f ms; the server's record of the same requests %.2f ms, so at most %.2f ms with the lateness both sides measured", resp.P99, path.P99, hi)
			}
			if lo, hi := bm.lo, bm.hi*1.05+slackMean; resp.Mean < lo || resp.Mean > hi {
				t.Errorf("mean response %.2f ms: theory gives %.2f ms, and a %v run %.1f..%.1f ms", resp.Mean, m.mean, real, lo, hi)
			}
			if lo, hi := bp.lo, bp.hi*1.05+slackP99; resp.P99 < lo || resp.P99 > hi {
				t.Errorf("p99 response %.2f ms: theory gives %.2f ms, and a %v run %.1f..%.1f ms", resp.P99, m.p99, real, lo, hi)
			}
		})
	}
}
