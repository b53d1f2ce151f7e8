package load

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fakeServer is an in-memory RoundTripper for tests in a synctest bubble,
// where time is virtual and exact: it serves one request at a time (like a
// single-threaded server) and takes latency per request, except the first
// request that starts at or after stallAt, which takes stall.
type fakeServer struct {
	busy     chan struct{} // one slot: a channel, since synctest sees a goroutine blocked on it as idle (not so a mutex)
	start    time.Time
	latency  time.Duration
	stallAt  time.Duration
	stall    time.Duration
	stalled  bool
	requests int
}

func (f *fakeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case f.busy <- struct{}{}:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	defer func() { <-f.busy }()
	f.requests++
	d := f.latency
	if f.stall > 0 && !f.stalled && time.Since(f.start) >= f.stallAt {
		f.stalled = true
		d = f.stall
	}
	select {
	case <-time.After(d):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
}

func TestSynctestStallIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: time.Millisecond, stallAt: 200 * time.Millisecond, stall: time.Second}
		st, _ := runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: mustShape(t, 100, 2*time.Second),
			Workers: 1, QueueDepth: 1000, Transport: fs, coarseSleep: true,
		})
		w := st.Windows[0]
		l := w.Latency
		if w.Counts.OK != 200 || fs.requests != 200 {
			t.Fatalf("ok %d, requests %d", w.Counts.OK, fs.requests)
		}
		// Arrival 20 (due at 200 ms) stalls until 1200 ms; arrival 21, due at
		// 210 ms, is sent at 1200 ms and done at 1201 ms.
		// Histograms keep three significant digits, and a zero records as
		// 1 µs: compare to 0.1%.
		if !near(l.RequestTime.Max, 1000) || !near(l.RequestTime.P99, 1) {
			t.Errorf("request time p99 %v max %v ms, want 1 and 1000", l.RequestTime.P99, l.RequestTime.Max)
		}
		if !near(l.ResponseTime.Max, 1000) || !near(l.ScheduleWait.Max, 990) {
			t.Errorf("response max %v, wait max %v; want 1000, 990", l.ResponseTime.Max, l.ScheduleWait.Max)
		}
		if l.ResponseTime.P99 < 900 {
			t.Errorf("response p99 %v ms does not show the stall", l.ResponseTime.P99)
		}
		if lag := w.Driver.ScheduleLag; lag.Max > 0.001 {
			t.Errorf("virtual time: the pacer should never lag, got max %v ms", lag.Max)
		}

		// Closed loop, same server: one slow request among many.
		fs = &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: time.Millisecond, stallAt: 200 * time.Millisecond, stall: time.Second}
		cst, _ := runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Concurrency: 1, Duration: 2 * time.Second, Transport: fs,
		})
		cl := cst.Windows[0].Latency
		// 200 ms + 800 ms at 1 ms each, plus the stalled one: 1001 requests.
		if cl.ResponseTime.Count != 1001 || !near(cl.ResponseTime.P99, 1) || !near(cl.ResponseTime.Max, 1000) {
			t.Errorf("closed loop: %d requests, p99 %v max %v; want 1001, 1, 1000", cl.ResponseTime.Count, cl.ResponseTime.P99, cl.ResponseTime.Max)
		}
		// A closed loop sends when it schedules: no schedule wait at all
		// (a zero records as the histograms' 1 µs floor).
		if cl.ScheduleWait.Max != 0.001 {
			t.Errorf("closed loop schedule wait max %v ms, want 0", cl.ScheduleWait.Max)
		}
	})
}

func TestSynctestDropAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: time.Second}
		// The fake server is serial: worker 2 waits for worker 1. Both are
		// busy for the whole window, the queue holds 3, the rest drop.
		st, _ := runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: mustShape(t, 200, 250*time.Millisecond),
			Workers: 2, QueueDepth: 3, Transport: fs, coarseSleep: true,
		})
		w := st.Windows[0]
		c := w.Counts
		if c.Scheduled != 50 || c.Sent != 5 || c.Dropped != 45 || c.OK != 5 {
			t.Fatalf("counts %+v", c)
		}
		// The first drop is arrival 5, due at 25 ms; all drops are in second 0.
		if len(w.Timeline) != 1 || w.Timeline[0].Dropped != 45 {
			t.Errorf("timeline %+v", w.Timeline)
		}
		// Five requests served one after another, 1 s each.
		if w.ElapsedS != 5 {
			t.Errorf("elapsed %v s, want 5 (drained)", w.ElapsedS)
		}
		// DriverLimits: request time p99 is 1 s, over a 500 ms budget, so
		// the drops are the server's fault, not the driver's.
		if w.Driver.Limited {
			t.Errorf("driver marked limited: %v", w.Driver.Reasons)
		}
	})
}

func TestSynctestRampTimetable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: 0}
		sh, _ := Stepped([]float64{10, 50}, 2*time.Second)
		st, _ := runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: sh, Workers: 4, Transport: fs, coarseSleep: true,
		})
		tl := st.Windows[0].Timeline
		if len(tl) != 2 || tl[0].Scheduled != 10 || tl[1].Scheduled != 50 {
			t.Errorf("timeline %+v, want 10 then 50 per second", tl)
		}
		if st.Windows[0].Latency.ScheduleWait.Max > 0.001 {
			t.Errorf("schedule wait %v with an idle pool", st.Windows[0].Latency.ScheduleWait.Max)
		}
		// Each step is its own row, with its own counts and rates.
		ps := st.Windows[0].Phases
		if len(ps) != 2 || ps[0].Counts.Scheduled != 10 || ps[1].Counts.Scheduled != 50 ||
			ps[0].Counts.OK != 10 || ps[1].Counts.OK != 50 || ps[0].Rates.OK != 10 || ps[1].Rates.OK != 50 ||
			ps[0].RateFrom != 10 || ps[1].RateFrom != 50 || ps[1].StartS != 1 || ps[1].EndS != 2 || ps[1].OKResponseTime.Count != 50 {
			t.Errorf("phases %+v", ps)
		}
	})
}

// TestSynctestStepsAndRampAreRows: a stepped window has a row per step and a
// ramp a row per tenth, each counting exactly the arrivals due in it; a slow
// last step shows in its own row, not averaged into the window.
func TestSynctestStepsAndRampAreRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: 4 * time.Millisecond}
		// One serial server at 4 ms a request serves 250/s: the 100/s and
		// 200/s steps keep up, the 400/s step queues.
		sh, _ := Stepped([]float64{100, 200, 400}, 3*time.Second)
		st, _ := runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: sh, Workers: 1, QueueDepth: 10000, Transport: fs, coarseSleep: true,
		})
		ps := st.Windows[0].Phases
		if len(ps) != 3 {
			t.Fatalf("%d phases, want 3", len(ps))
		}
		for i, want := range []int64{100, 200, 400} {
			if ps[i].Counts.Scheduled != want || ps[i].Counts.OK != want || !same(ps[i].Rates.Offered, float64(want)) {
				t.Errorf("step %d: %+v, want %d scheduled and ok", i, ps[i].Counts, want)
			}
		}
		if ps[0].ResponseTime.P99 > 4.1 || ps[1].ResponseTime.P99 > 4.1 || ps[2].ResponseTime.P99 < 100 {
			t.Errorf("p99 by step %v %v %v ms: only the last step should queue", ps[0].ResponseTime.P99, ps[1].ResponseTime.P99, ps[2].ResponseTime.P99)
		}

		ramp, _ := Ramp(10, 100, 10*time.Second)
		st, _ = runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: ramp, Workers: 1, QueueDepth: 10000, Transport: fs, coarseSleep: true,
		})
		ps = st.Windows[0].Phases
		var total int64
		for i, p := range ps {
			total += p.Counts.Scheduled
			if p.StartS != float64(i) || p.EndS != float64(i+1) || p.RateFrom != 10+9*float64(i) {
				t.Errorf("ramp row %d: %+v", i, p)
			}
			if i > 0 && p.Counts.Scheduled <= ps[i-1].Counts.Scheduled {
				t.Errorf("ramp row %d schedules %d, not more than row %d", i, p.Counts.Scheduled, i-1)
			}
		}
		if len(ps) != 10 || total != st.Windows[0].Counts.Scheduled {
			t.Errorf("%d ramp rows scheduling %d of %d", len(ps), total, st.Windows[0].Counts.Scheduled)
		}
	})
}

// near reports whether got is within 0.1% of want (HDR precision).
func near(got, want float64) bool { return got >= want && got <= want*1.001 }

// TestSynctestWindowsDrainBetween: a window is summarised only after its
// last request has finished, and the next starts only then, so no window's
// queue spills into the next. Ten arrivals 100 ms apart on a serial server
// taking 150 ms each: request k starts at 150k ms and ends at 150k + 150, so
// the window's tail ends at 1.5 s, half a second past its scheduled end.
func TestSynctestWindowsDrainBetween(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: 150 * time.Millisecond}
		st, end := runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: mustShape(t, 10, time.Second),
			Windows: 3, Workers: 1, QueueDepth: 100, Transport: fs, coarseSleep: true,
		})
		if end != EndDone || len(st.Windows) != 3 || fs.requests != 30 {
			t.Fatalf("end %q, %d windows, %d requests", end, len(st.Windows), fs.requests)
		}
		for i, w := range st.Windows {
			// Summarised after the drain: every request counted as ok, the
			// elapsed time covers the tail.
			if w.Counts.OK != 10 || w.Counts.Unfinished != 0 || w.ElapsedS != 1.5 || w.DurationS != 1 {
				t.Errorf("window %d: counts %+v, elapsed %v s; want 10 ok in 1.5 s", i, w.Counts, w.ElapsedS)
			}
			// Each window saw the same queue, and only its own: response
			// time max 50×9 + 150 = 600 ms, schedule wait max 450 ms.
			if !near(w.Latency.ResponseTime.Max, 600) || !near(w.Latency.ScheduleWait.Max, 450) {
				t.Errorf("window %d: response max %v, wait max %v; want 600 and 450 ms", i, w.Latency.ResponseTime.Max, w.Latency.ScheduleWait.Max)
			}
			if i > 0 {
				prev := st.Windows[i-1]
				if gap := w.Started.Sub(prev.Started); gap != 1500*time.Millisecond {
					t.Errorf("window %d started %v after window %d; want 1.5 s (after the drain)", i, gap, i-1)
				}
			}
		}
	})
}

// TestSynctestPacerSleepsByDensity: a sparse timetable gets the precise
// nanosleep for each arrival's last stretch; a dense one never does (a
// nanosleep per arrival was most of the driver's CPU at 5,000 req/s) and
// still keeps the timetable exactly in virtual time.
func TestSynctestPacerSleepsByDensity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			rate      float64
			wantFine  bool
			scheduled int64
		}{{100, true, 100}, {5000, false, 5000}} {
			fs := &fakeServer{busy: make(chan struct{}, 64), start: time.Now()}
			fine := 0
			st, _ := runOne(t, context.Background(), Config{
				Targets: []Target{{URL: "http://fake/"}}, Shape: mustShape(t, c.rate, time.Second), Workers: 8, QueueDepth: 10000, Transport: fs,
				fineSleep: func(d time.Duration) { fine++; time.Sleep(d) },
			})
			w := st.Windows[0]
			if w.Counts.Scheduled != c.scheduled || w.Counts.OK != c.scheduled || w.Driver.ScheduleLag.Max > 0.001 {
				t.Errorf("rate %v: %+v, lag max %v ms", c.rate, w.Counts, w.Driver.ScheduleLag.Max)
			}
			if (fine > 0) != c.wantFine || (c.wantFine && fine < 90) {
				t.Errorf("rate %v: %d fine sleeps; want them only for a sparse timetable", c.rate, fine)
			}
		}
	})
}

// TestLiveProgressLines: a 1.2 s window gets one live line, at its first
// second, counting what was sent by then; virtual time makes the count and
// the rate exact (on a real clock a loaded machine stretched the step past
// two seconds and drew a second line).
func TestLiveProgressLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: time.Millisecond}
		var lines []Progress // appended by the live goroutine, read after runOne has joined it
		runOne(t, context.Background(), Config{
			Targets: []Target{{URL: "http://fake/"}}, Shape: mustShape(t, 100, 1200*time.Millisecond),
			Workers: 1, QueueDepth: 1000, Transport: fs, coarseSleep: true,
			Live: func(p Progress) { lines = append(lines, p) },
		})
		if len(lines) != 1 {
			t.Fatalf("%d live lines in a 1.2 s window, want 1: %+v", len(lines), lines)
		}
		if p := lines[0]; p.Sent < 99 || p.Sent > 101 || p.Rate != float64(p.Sent) || p.OK > p.Sent || p.Elapsed > time.Second {
			t.Errorf("progress %+v: want about 100 sent in the first second, at that rate", p)
		}
	})
}
