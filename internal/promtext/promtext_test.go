package promtext

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/internal/promtext/promtexttest"
)

// every is each family sluice exports or reads, the widest want.
func every() []metricname.Family {
	return append(append(metricname.Promsluice(), metricname.Server()...), metricname.NotExported()...)
}

// TestRuleTable: NaN, infinite and negative samples, and families of
// another type, are errors naming the family; what is finite, 0 or more
// and of the declared type (or untyped) reads.
func TestRuleTable(t *testing.T) {
	for _, tc := range promtexttest.Cases() {
		_, err := Parse(strings.NewReader(tc.Text), every()...)
		switch {
		case tc.Error == "" && err != nil:
			t.Errorf("%s: %v, want it read (%s)", tc.Name, err, tc.Why)
		case tc.Error != "" && (err == nil || !strings.Contains(err.Error(), tc.Error)):
			t.Errorf("%s: error %v, want one saying %q (%s)", tc.Name, err, tc.Error, tc.Why)
		case err != nil && !errors.Is(err, ErrSyntax) && !errors.As(err, new(*SampleError)):
			t.Errorf("%s: error %T %v is neither ErrSyntax nor a *SampleError", tc.Name, err, err)
		case err != nil && !errors.Is(err, ErrSyntax) && !strings.Contains(err.Error(), "sluice_admission_"):
			t.Errorf("%s: error %v does not name the family", tc.Name, err)
		}
	}
}

func TestParseReadsSamples(t *testing.T) {
	text := `# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="db",kind="read",reason="full"} 3
sluice_admission_rejected_total{gate="db",kind="read",reason="queue_full"} 2
sluice_admission_waiting{gate="db"} 1.5
# TYPE sluice_admission_hold_seconds histogram
sluice_admission_hold_seconds_bucket{gate="db",kind="read",le="0.1"} 3
sluice_admission_hold_seconds_bucket{gate="db",kind="read",le="+Inf"} 4
sluice_admission_hold_seconds_sum{gate="db",kind="read"} 0.25
sluice_admission_hold_seconds_count{gate="db",kind="read"} 4
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 7.5
# TYPE sluice_admission_admitted_total counter
`
	fams, err := Parse(strings.NewReader(text), every()...)
	if err != nil {
		t.Fatal(err)
	}
	rej := fams[metricname.AdmissionRejected]
	if len(rej) != 2 || rej[0].Value+rej[1].Value != 5 || rej[0].Labels["gate"] != "db" || rej[0].Labels["kind"] != "read" {
		t.Errorf("rejected %+v", rej)
	}
	if w := fams[metricname.AdmissionWaiting]; len(w) != 1 || w[0].Value != 1.5 || w[0].Count != 0 {
		t.Errorf("untyped gauge %+v", w)
	}
	if h := fams[metricname.AdmissionHold]; len(h) != 1 || h[0].Value != 0.25 || h[0].Count != 4 {
		t.Errorf("histogram %+v", h)
	}
	if c := fams[metricname.ProcessCPUSeconds]; len(c) != 1 || c[0].Value != 7.5 || c[0].Labels == nil {
		t.Errorf("cpu %+v", c)
	}
	if _, ok := fams[metricname.AdmissionInflight]; ok {
		t.Error("a family absent from the text has an entry")
	}
	if _, ok := fams[metricname.AdmissionAdmitted]; ok {
		t.Error("a family declared without samples has an entry")
	}
	// Only what was asked for comes back.
	only, err := Parse(strings.NewReader(text), metricname.Family{Name: metricname.ProcessCPUSeconds, Kind: metricname.Counter})
	if err != nil || len(only) != 1 {
		t.Errorf("one family asked for: %v, %v", only, err)
	}
}

func TestSampleErrorNamesTheSeries(t *testing.T) {
	_, err := Parse(strings.NewReader(`sluice_admission_inflight{kind="x",gate="db"} -2`+"\n"), every()...)
	var se *SampleError
	if !errors.As(err, &se) || se.Family != metricname.AdmissionInflight || se.Series != `{gate="db",kind="x"}` ||
		err.Error() != `sluice_admission_inflight{gate="db",kind="x"}: value -2: a gauge here is a finite number, 0 or more` {
		t.Errorf("error %v (%+v)", err, se)
	}
}

func TestParseBoundsTheInput(t *testing.T) {
	text := "sluice_admission_inflight{gate=\"db\"} 1\n"
	if _, err := parse(strings.NewReader(text), int64(len(text)), every()); err != nil {
		t.Errorf("text of exactly the limit: %v", err)
	}
	if _, err := parse(strings.NewReader(text), int64(len(text))-1, every()); !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("text over the limit: %v, want ErrSyntax saying it is too large", err)
	}
}

// FuzzParse: any text either fails with ErrSyntax or a *SampleError, or
// gives only the families asked for, every number finite and 0 or more
// and every label map set.
func FuzzParse(f *testing.F) {
	for _, tc := range promtexttest.Cases() {
		f.Add(tc.Text)
	}
	f.Add("# HELP x y\n# TYPE x counter\nx{a=\"\\n\"} 1 1700000000000\n")
	want := every()
	asked := map[string]bool{}
	for _, w := range want {
		asked[w.Name] = true
	}
	f.Fuzz(func(t *testing.T, text string) {
		fams, err := Parse(strings.NewReader(text), want...)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.As(err, new(*SampleError)) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		for name, samples := range fams {
			if !asked[name] {
				t.Fatalf("family %q returned but not asked for", name)
			}
			for _, s := range samples {
				for _, v := range []float64{s.Value, s.Count} {
					if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
						t.Fatalf("%s%v: %v read", name, s.Labels, v)
					}
				}
				if s.Labels == nil {
					t.Fatalf("%s: nil labels", name)
				}
			}
		}
	})
}
