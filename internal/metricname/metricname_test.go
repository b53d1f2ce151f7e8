package metricname

import (
	"regexp"
	"strings"
	"testing"
)

// TestNamesFollowPrometheusConventions: every listed name is unique,
// valid, and named as DESIGN.md's metrics contract asks (base units,
// _total on counters and only on counters, sluice_ first for sluice's
// own), with one kind each.
func TestNamesFollowPrometheusConventions(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z][a-z0-9_]*[a-z0-9]$`)
	seen := map[string]bool{}
	lists := map[string][]Family{"Promsluice": Promsluice(), "Server": Server(), "Ratelimit": Ratelimit(), "NotExported": NotExported()}
	for list, fams := range lists {
		if len(fams) == 0 {
			t.Errorf("%s lists nothing", list)
		}
		for _, f := range fams {
			if seen[f.Name] {
				t.Errorf("%s: %s listed twice", list, f.Name)
			}
			seen[f.Name] = true
			if !valid.MatchString(f.Name) || strings.Contains(f.Name, "__") {
				t.Errorf("%s: %q is not a plain metric name", list, f.Name)
			}
			if !strings.HasPrefix(f.Name, "sluice_") && f.Name != ProcessCPUSeconds {
				t.Errorf("%s: %s lacks the sluice_ prefix", list, f.Name)
			}
			if total := strings.HasSuffix(f.Name, "_total"); total != (f.Kind == Counter) {
				t.Errorf("%s: %s is a %v: _total is for counters, and every counter has it", list, f.Name, f.Kind)
			}
			if f.Kind == Histogram && !strings.HasSuffix(f.Name, "_seconds") {
				t.Errorf("%s: histogram %s is not in seconds", list, f.Name)
			}
			if strings.Contains(f.Name, "_ms") || strings.Contains(f.Name, "millis") {
				t.Errorf("%s: %s is not in base units", list, f.Name)
			}
			if k := f.Kind.String(); k == "unknown" {
				t.Errorf("%s: %s has no kind", list, f.Name)
			}
		}
	}
	// Fresh slices: a caller appending to one cannot change another's.
	a := Promsluice()
	a[0].Name = "changed"
	if Promsluice()[0].Name == "changed" {
		t.Error("Promsluice returns a shared slice")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Counter: "counter", Gauge: "gauge", Histogram: "histogram", 0: "unknown"} {
		if k.String() != want {
			t.Errorf("Kind(%d) = %q, want %q", k, k.String(), want)
		}
	}
}

func TestFamiliesTakesKindsFromTheLists(t *testing.T) {
	got := Families(AdmissionHold, ProcessCPUSeconds, ConnectionsClosedBodyTimeout, AdmissionInflight, "sluice_nothing")
	want := []Family{{AdmissionHold, Histogram}, {ProcessCPUSeconds, Counter}, {ConnectionsClosedBodyTimeout, Counter},
		{AdmissionInflight, Gauge}, {"sluice_nothing", 0}}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("family %d: %v, want %v", i, got[i], want[i])
		}
	}
}
