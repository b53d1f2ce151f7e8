package load

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMerge reports reports that cannot be combined.
var ErrMerge = errors.New("load: cannot merge")

// Merge combines reports from several driver machines that loaded the same
// server at the same time. They must have the same steps (loop mode) and
// window counts; loads of a step add up (rates, concurrencies, workers). Counts, timelines and refusals add; histograms merge
// exactly, so the merged percentiles are those of all requests together
// (never an average of percentiles); rates are recomputed over the longest
// window duration. Server metrics are the server's, not a driver's: the
// first report's scrape is kept and attribution redone against the merged
// refusals. The verdict is re-judged with the first report's profile case.
// The same run given twice (identical content) is refused: its requests
// would count twice.
func Merge(meta Meta, rs []*Report) (*Report, error) {
	if len(rs) < 2 {
		return nil, fmt.Errorf("%w: need at least two reports", ErrMerge)
	}
	seen := map[[32]byte]int{}
	for i, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("%w: report %d: %v", ErrMerge, i, err)
		}
		sum := sha256.Sum256(b)
		if j, dup := seen[sum]; dup {
			return nil, fmt.Errorf("%w: report %d is the same run as report %d: merging it would count every request twice", ErrMerge, i, j)
		}
		seen[sum] = i
	}
	if meta.Profile == nil {
		meta.Profile = rs[0].Profile
	}
	out := newReport("merge", meta)
	out.Started, out.Finished = rs[0].Started, rs[0].Finished
	first := rs[0]
	for i, r := range rs {
		if len(r.Steps) != len(first.Steps) {
			return nil, fmt.Errorf("%w: report %d has %d steps, report 0 has %d", ErrMerge, i, len(r.Steps), len(first.Steps))
		}
		for si, st := range r.Steps {
			f := first.Steps[si]
			if st.Mode != f.Mode || len(st.Windows) != len(f.Windows) {
				return nil, fmt.Errorf("%w: report %d step %d (%s %s, %d windows) differs from report 0 (%s %s, %d windows)",
					ErrMerge, i, si, st.Mode, st.Label, len(st.Windows), f.Mode, f.Label, len(f.Windows))
			}
		}
		if r.Started.Before(out.Started) {
			out.Started = r.Started
		}
		if r.Finished.After(out.Finished) {
			out.Finished = r.Finished
		}
		out.Interrupted = out.Interrupted || r.Interrupted
		if out.Aborted == "" {
			out.Aborted = r.Aborted
		}
	}
	for si, f := range first.Steps {
		st := f
		st.Windows = nil
		st.Seed = 0 // each input drew its own arrivals; their seeds are in their reports
		for _, r := range rs[1:] {
			if r.Steps[si].Arrivals != f.Arrivals {
				st.Arrivals = "mixed"
			}
			if l := r.Steps[si].Label; l != f.Label {
				st.Label += "+" + l
			}
			st.Workers += r.Steps[si].Workers
			st.Concurrency += r.Steps[si].Concurrency
			st.QueueDepth += r.Steps[si].QueueDepth
			st.Rate += r.Steps[si].Rate
			st.RampTo += r.Steps[si].RampTo
		}
		for wi := range f.Windows {
			ws := make([]Window, len(rs))
			for i, r := range rs {
				ws[i] = r.Steps[si].Windows[wi]
			}
			w, err := mergeWindows(ws)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d window %d: %v", ErrMerge, si, wi, err)
			}
			st.Windows = append(st.Windows, w)
		}
		out.Steps = append(out.Steps, st)
	}
	out.Verdict = Judge(out, meta.caseOf())
	// A merge is release-qualified when every input is, from one binary of
	// one revision; its provenance is then theirs.
	out.SourceFiles = append([]SourceFile{}, first.SourceFiles...)
	out.ReleaseReasons = []string{}
	for i, r := range rs {
		if len(ReleaseReasons(r)) > 0 {
			out.ReleaseReasons = append(out.ReleaseReasons, fmt.Sprintf("input %d is not release-qualified", i))
		} else if r.Tool.Revision != first.Tool.Revision || r.BinarySHA256 != first.BinarySHA256 {
			out.ReleaseReasons = append(out.ReleaseReasons, fmt.Sprintf("input %d comes from another binary or revision", i))
		}
	}
	out.ReleaseQualified = len(out.ReleaseReasons) == 0
	return out, nil
}

func mergeWindows(ws []Window) (Window, error) {
	out := Window{Index: ws[0].Index, Started: ws[0].Started}
	c := Counts{DropReasons: map[string]int64{}, TransportErrors: map[string]int64{}, Status: map[string]int64{}, Refusals: []Refusal{}}
	refusals := map[refusalKey]int64{}
	var lat [5][]Dist
	var lags []Dist
	for _, w := range ws {
		if w.Started.Before(out.Started) {
			out.Started = w.Started
		}
		out.DurationS = max(out.DurationS, w.DurationS)
		out.ElapsedS = max(out.ElapsedS, w.ElapsedS)
		n := w.Counts
		c.Scheduled += n.Scheduled
		c.Sent += n.Sent
		c.Dropped += n.Dropped
		c.OK += n.OK
		c.Refused += n.Refused
		c.HTTPError += n.HTTPError
		c.TransportError += n.TransportError
		c.Unfinished += n.Unfinished
		addMap(c.DropReasons, n.DropReasons)
		addMap(c.TransportErrors, n.TransportErrors)
		addMap(c.Status, n.Status)
		for _, r := range n.Refusals {
			refusals[refusalKey{r.Status, r.Gate, r.Reason}] += r.Count
		}
		for i, d := range []Dist{w.Latency.ScheduleWait, w.Latency.RequestTime, w.Latency.ResponseTime, w.Latency.FirstByte, w.Latency.OKResponseTime} {
			lat[i] = append(lat[i], d)
		}
		lags = append(lags, w.Driver.ScheduleLag)
		for len(out.Timeline) < len(w.Timeline) {
			out.Timeline = append(out.Timeline, Second{})
		}
		for i, s := range w.Timeline {
			t := &out.Timeline[i]
			t.Scheduled += s.Scheduled
			t.Dropped += s.Dropped
			t.OK += s.OK
			t.Refused += s.Refused
			t.Errors += s.Errors
			// Coarse per-second percentiles do not merge exactly: keep the
			// highest, an upper bound.
			t.ResponseP50 = max(t.ResponseP50, s.ResponseP50)
			t.ResponseP99 = max(t.ResponseP99, s.ResponseP99)
			t.OKResponseP99 = max(t.OKResponseP99, s.OKResponseP99)
			t.LagP99 = max(t.LagP99, s.LagP99)
		}
		out.Driver.CPUSeconds += w.Driver.CPUSeconds
		out.Driver.CPUUtilization = max(out.Driver.CPUUtilization, w.Driver.CPUUtilization)
		if out.Metrics == nil && w.Metrics != nil {
			m := *w.Metrics
			out.Metrics = &m
		}
	}
	for k, v := range refusals {
		c.Refusals = append(c.Refusals, Refusal{Status: k.status, Gate: k.gate, Reason: k.reason, Count: v})
	}
	sortRefusals(c.Refusals)
	out.Counts = c
	var merged [5]Dist
	for i := range lat {
		d, err := mergeDists(lat[i]...)
		if err != nil {
			return Window{}, err
		}
		merged[i] = d
	}
	out.Latency = Latency{ScheduleWait: merged[0], RequestTime: merged[1], ResponseTime: merged[2], FirstByte: merged[3], OKResponseTime: merged[4]}
	lag, err := mergeDists(lags...)
	if err != nil {
		return Window{}, err
	}
	out.Driver.ScheduleLag = lag
	out.Driver.Reasons = []string{}
	for _, w := range ws {
		out.Driver.Limited = out.Driver.Limited || w.Driver.Limited
		out.Driver.Reasons = append(out.Driver.Reasons, w.Driver.Reasons...)
	}
	out.Rates = ratesOf(c, out.DurationS)
	ps, err := mergePhases(ws)
	if err != nil {
		return Window{}, err
	}
	out.Phases = ps
	if out.Metrics != nil {
		m := out.Metrics
		if m.Error == "" {
			attributeRefusals(m, c)
			if m.ServerCPUSeconds != nil && c.OK > 0 {
				per := *m.ServerCPUSeconds / float64(c.OK) * 1000
				m.ServerCPUPerOKMillis = &per
			}
		} else {
			m.Attributed, m.Unattributed = 0, c.Refused
		}
	}
	if out.Timeline == nil {
		out.Timeline = []Second{}
	}
	return out, nil
}

func addMap(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// mergePhases adds the phase rows of windows that have the same rows; rows
// of different shapes (or none) are dropped from the merge.
func mergePhases(ws []Window) ([]Phase, error) {
	n := len(ws[0].Phases)
	for _, w := range ws {
		if len(w.Phases) != n {
			return nil, nil
		}
	}
	out := make([]Phase, n)
	for i := range out {
		p := ws[0].Phases[i]
		p.Counts, p.RateFrom, p.RateTo = PhaseCounts{}, 0, 0
		var resp, ok []Dist
		for _, w := range ws {
			q := w.Phases[i]
			addPhaseCounts(&p.Counts, q.Counts)
			p.RateFrom += q.RateFrom
			p.RateTo += q.RateTo
			resp, ok = append(resp, q.ResponseTime), append(ok, q.OKResponseTime)
		}
		var err error
		if p.ResponseTime, err = mergeDists(resp...); err != nil {
			return nil, err
		}
		if p.OKResponseTime, err = mergeDists(ok...); err != nil {
			return nil, err
		}
		p.Rates = ratesOf(Counts{Scheduled: p.Counts.Scheduled, Sent: p.Counts.Sent, OK: p.Counts.OK}, p.EndS-p.StartS)
		out[i] = p
	}
	return out, nil
}
