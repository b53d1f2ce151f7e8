package load

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadReportRefusesOversizedFile: a report file over MaxReportBytes is
// refused from its size, before it is read and decoded (a sparse file here,
// so the test writes nothing much).
func TestReadReportRefusesOversizedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxReportBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadReport(p)
	if !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), "over the bound") {
		t.Errorf("oversized report: err %v, want ErrBadReport saying it is over the bound", err)
	}
	if _, err := ReadProfile(p); !errors.Is(err, ErrBadProfile) || !strings.Contains(err.Error(), "over the bound") {
		t.Errorf("oversized profile: err %v, want ErrBadProfile saying it is over the bound", err)
	}

	// A real report reads back, with the hash of its bytes.
	r := realReport(t)
	good := filepath.Join(t.TempDir(), "r.json")
	if err := WriteReport(good, r); err != nil {
		t.Fatal(err)
	}
	back, sum, err := ReadReportSHA256(good)
	if err != nil || back == nil || len(sum) != 64 {
		t.Errorf("ReadReportSHA256 = %v, %q, %v", back != nil, sum, err)
	}
}

// TestCheckReportPath: a report can go where its folder exists and the
// path is not itself a folder; both refusals come before any load is sent.
func TestCheckReportPath(t *testing.T) {
	dir := t.TempDir()
	if err := CheckReportPath(filepath.Join(dir, "run.json")); err != nil {
		t.Errorf("a new file in an existing folder: %v", err)
	}
	for name, p := range map[string]string{
		"missing folder": filepath.Join(dir, "nope", "run.json"),
		"a folder":       dir,
	} {
		if err := CheckReportPath(p); !errors.Is(err, ErrOutPath) {
			t.Errorf("%s (%s): err %v, want ErrOutPath", name, p, err)
		}
	}
	if err := CheckReportPath(dir); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("folder: %v, want it named a folder", err)
	}
}

// TestCaseFor: a report is judged by the case it was run against; a
// profile that lacks it is an error unless a case is named, and a report
// run without a profile takes the profile's only case.
func TestCaseFor(t *testing.T) {
	other, err := ParseProfile([]byte(`{"name":"p","cases":[{"name":"other","qps_floor":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	two, err := ParseProfile([]byte(`{"name":"p","cases":[{"name":"c1"},{"name":"other"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ran := &Report{Profile: &ProfileRef{Case: "c1"}}
	if _, err := other.CaseFor(ran, ""); !errors.Is(err, ErrCaseMismatch) || !strings.Contains(err.Error(), `"c1"`) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("case c1 against a profile of other: err %v, want ErrCaseMismatch naming both", err)
	}
	if c, err := other.CaseFor(ran, "other"); err != nil || c.Name != "other" {
		t.Errorf("case named: %+v, %v", c, err)
	}
	if c, err := two.CaseFor(ran, ""); err != nil || c.Name != "c1" {
		t.Errorf("the report's own case: %+v, %v", c, err)
	}
	if c, err := other.CaseFor(&Report{}, ""); err != nil || c.Name != "other" {
		t.Errorf("no profile in the report: %+v, %v", c, err)
	}
	if _, err := two.CaseFor(&Report{}, ""); !errors.Is(err, ErrBadProfile) {
		t.Errorf("no profile in the report, two cases: %v, want ErrBadProfile", err)
	}
}

// TestCheckJudgesLikeEveryCommand: Check is Judge, plus release
// qualification when asked; a report with its steps emptied is INVALID
// whatever it stored.
func TestCheckJudgesLikeEveryCommand(t *testing.T) {
	c := &Case{Name: "c"}
	empty := reportOf()
	empty.Steps = []Step{}
	empty.Verdict.Status = StatusPass
	if v := Check(empty, c, false); v.Status != StatusInvalid {
		t.Errorf("emptied report: %s, want INVALID", v.Status)
	}
	w := judgedWindow(t, Counts{Scheduled: 10, Sent: 10, OK: 10}, 1, 1, 0.1, 1)
	if v := Check(reportOf(w), c, false); v.Status != StatusPass {
		t.Errorf("a good window: %s %v", v.Status, v.Reasons)
	}
	v := Check(reportOf(w), c, true)
	if v.Status != StatusInvalid || !strings.Contains(strings.Join(v.Reasons, " "), "not release-qualified: no VCS revision") {
		t.Errorf("release check of an unqualified report: %s %v", v.Status, v.Reasons)
	}
}

// TestRejudgeReplacesTheStoredVerdict: what a reader prints is the verdict
// the report's figures give under its own case, with a note when the file
// claimed another.
func TestRejudgeReplacesTheStoredVerdict(t *testing.T) {
	p, err := ParseProfile([]byte(`{"name":"p","cases":[{"name":"c","qps_floor":100}]}`))
	if err != nil {
		t.Fatal(err)
	}
	w := judgedWindow(t, Counts{Scheduled: 10, Sent: 10, OK: 10}, 1, 1, 0.1, 1) // 10 ok/s: under the floor
	r := reportOf(w)
	r.Profile = &ProfileRef{Case: "c", Profile: p}
	r.Verdict = Verdict{Status: StatusPass}
	Rejudge(r)
	if r.Verdict.Status != StatusFail || r.Verdict.Case != "c" || !strings.Contains(strings.Join(r.Verdict.Reasons, "\n"), "stored verdict PASS") {
		t.Errorf("rejudged %+v, want FAIL under case c, noting the stored PASS", r.Verdict)
	}
	r.Steps = []Step{}
	Rejudge(r)
	if r.Verdict.Status != StatusInvalid {
		t.Errorf("emptied: %s, want INVALID", r.Verdict.Status)
	}
}

// TestAbortedRunFails: a run the server left hanging fails, with a case or
// without, even when its windows are driver-limited too.
func TestAbortedRunFails(t *testing.T) {
	lagging := judgedWindow(t, Counts{Scheduled: 10, Sent: 10, Unfinished: 10}, 1, 1, 500, 1) // lag p99 500 ms: driver-limited
	for _, c := range []*Case{nil, {Name: "c"}} {
		r := reportOf(lagging)
		r.Aborted = "a window did not drain within the drain timeout"
		if v := Judge(r, c); v.Status != StatusFail || !strings.Contains(strings.Join(v.Reasons, " "), "run aborted") {
			t.Errorf("case %v: %s %v, want FAIL naming the abort", c, v.Status, v.Reasons)
		}
	}
}
