package limit

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
)

var update = flag.Bool("update", false, "rewrite the expected columns of testdata/laws/*.txt")

// fakeTarget stands in for a gate: it records every capacity it is given,
// and reports a queue wait set by the test.
type fakeTarget struct {
	name   string
	caps   []int64
	oldest time.Duration
}

func (f *fakeTarget) OldestWait() time.Duration { return f.oldest }
func (f *fakeTarget) Capacity() int64           { return 0 }
func (f *fakeTarget) InUse() int64              { return 0 }

func (f *fakeTarget) SetCapacity(c int64) error { f.caps = append(f.caps, c); return nil }
func (f *fakeTarget) Name() string              { return f.name }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// feedWindow plays one window starting at t0: an admission that reached
// inflight slots, then n completions of the given hold time, then closes
// the window at t0+window.
func feedWindow(a *Adaptive, t0 time.Time, window time.Duration, lat time.Duration, inflight int64, n int) time.Time {
	return feedScripted(a, nil, t0, window, scriptWindow{lat: lat, inflight: inflight}, n)
}

// scriptWindow is one window of a script: every sample at lat except,
// with a tail, the slowest 2% (so the 90th percentile is lat and the 99th
// the tail); wait is the target's oldest queued request as it closes.
type scriptWindow struct {
	lat, tail, wait time.Duration
	inflight        int64
}

func feedScripted(a *Adaptive, tgt *fakeTarget, t0 time.Time, window time.Duration, w scriptWindow, n int) time.Time {
	a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: w.inflight})
	if tgt != nil {
		tgt.oldest = w.wait
	}
	slow := 0
	if w.tail > 0 {
		n = max(n, 100)
		slow = n / 50
	}
	for k := range n {
		hold := w.lat
		if k >= n-slow {
			hold = w.tail
		}
		a.ObserveCompletionAt(admit.CompletionEvent{Outcome: admit.OutcomeOK, Weight: 1, Hold: hold},
			t0.Add(time.Duration(k)*window/time.Duration(2*n)))
	}
	end := t0.Add(window)
	a.DecideAt(end)
	return end
}

func lawByName(name string) (Law, error) { return ParseLaw(name) }

// parseScriptConfig reads "config law=vegas initial=20 min=1 max=100 slo=50ms ramp=-1".
func parseScriptConfig(fields []string) (Config, error) {
	var cfg Config
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return cfg, fmt.Errorf("bad config field %q", f)
		}
		var err error
		var n int64
		switch k {
		case "law":
			cfg.Law, err = lawByName(v)
		case "slo":
			cfg.SLO, err = time.ParseDuration(v)
		case "initial", "min", "max", "ramp":
			n, err = strconv.ParseInt(v, 10, 64)
			switch k {
			case "initial":
				cfg.Initial = n
			case "min":
				cfg.Min = n
			case "max":
				cfg.Max = n
			case "ramp":
				cfg.Ramp.Steps = int(n)
			}
		default:
			err = fmt.Errorf("unknown config key %q", k)
		}
		if err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// parseScriptWindow reads "12ms 20 tail=35ms wait=20ms -> ..." (the
// latency of the window's samples, the slots in use, and optionally the
// 99th percentile and the queue wait), returning the fields before "->".
func parseScriptWindow(fields []string) (scriptWindow, []string, error) {
	var w scriptWindow
	in := fields
	if i := slices.Index(fields, "->"); i >= 0 {
		in = fields[:i]
	}
	var err error
	if w.lat, err = time.ParseDuration(in[0]); err != nil {
		return w, nil, err
	}
	if w.inflight, err = strconv.ParseInt(in[1], 10, 64); err != nil {
		return w, nil, err
	}
	for _, f := range in[2:] {
		k, v, _ := strings.Cut(f, "=")
		d, err := time.ParseDuration(v)
		if err != nil {
			return w, nil, fmt.Errorf("%q: %w", f, err)
		}
		switch k {
		case "tail":
			w.tail = d
		case "wait":
			w.wait = d
		default:
			return w, nil, fmt.Errorf("unknown window field %q", f)
		}
	}
	return w, in, nil
}

// TestLawsGolden runs the scripts in testdata/laws: each line is one
// window (latency of all its samples, slots in use) and the limit,
// decision and reason that must follow it. Run with -update to rewrite the
// expectations after a deliberate change, and review the diff.
func TestLawsGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/laws/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

func runScript(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var a *Adaptive
	var tgt *fakeTarget
	now := epoch
	sc := bufio.NewScanner(f)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			out = append(out, line)
			continue
		}
		fields := strings.Fields(trimmed)
		if fields[0] == "config" {
			cfg, err := parseScriptConfig(fields[1:])
			if err != nil {
				t.Fatalf("%s:%d: %v", file, lineNo, err)
			}
			if a, err = New(cfg); err != nil {
				t.Fatalf("%s:%d: %v", file, lineNo, err)
			}
			tgt = &fakeTarget{name: "g"}
			if err := a.attach(tgt); err != nil {
				t.Fatal(err)
			}
			now = epoch
			out = append(out, line)
			continue
		}
		if a == nil || len(fields) < 2 {
			t.Fatalf("%s:%d: window before config or malformed: %q", file, lineNo, line)
		}
		w, in, err := parseScriptWindow(fields)
		if err != nil {
			t.Fatalf("%s:%d: %v", file, lineNo, err)
		}
		now = feedScripted(a, tgt, now, DefaultWindow, w, DefaultMinSamples)
		st := a.State()
		got := fmt.Sprintf("%s -> %d %s %s", strings.Join(in, " "), st.Limit, st.Decision, st.Why)
		out = append(out, got)
		if *update {
			continue
		}
		want := strings.Join(fields, " ")
		if got != want {
			t.Errorf("%s:%d:\n got %s\nwant %s", file, lineNo, got, want)
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
