package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/load"
)

// TestMergeRefusesDuplicatesAndOverwritingAnInput: the same file twice, a
// copy of it, or --out naming an input are usage errors, and no input is
// touched.
// Over a second: a real sluice load run gives the report to merge.
func TestMergeRefusesDuplicatesAndOverwritingAnInput(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, p := range []string{a, b} {
		if code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "50", "--duration", "100ms", "--out", p, "--max-lag", "1s", "--live", "off"); code != exitOK {
			t.Fatalf("load: %d %s %s", code, stdout, stderr)
		}
	}
	acopy := filepath.Join(dir, "a-copy.json")
	orig, _ := os.ReadFile(a)
	if err := os.WriteFile(acopy, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	alink := filepath.Join(dir, "a-link.json")
	if err := os.Symlink(a, alink); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(dir, "m.json")
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"--out", m, a, a}, "same file"},
		{[]string{"--out", m, a, "./" + filepath.Base(a)}, "same file"},
		{[]string{"--out", m, a, alink}, "same file"},
		{[]string{"--out", m, a, acopy}, "same content"},
		{[]string{"--out", a, a, b}, "refusing to overwrite an input"},
		{[]string{"--out", b, a, b}, "refusing to overwrite an input"},
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(wd) })
	for _, c := range cases {
		code, _, stderr := runCmd(context.Background(), nil, append([]string{"report", "merge"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
	if now, _ := os.ReadFile(a); !bytes.Equal(now, orig) {
		t.Error("an input was changed")
	}
	if _, err := os.Stat(m); err == nil {
		t.Error("a merged report was written")
	}
	if code, _, stderr := runCmd(context.Background(), nil, "report", "merge", "--out", m, a, b); code != exitOK {
		t.Errorf("distinct inputs: exit %d %s", code, stderr)
	}
}

// TestCheckRefusesEditedSummary: lowering a stored p99 or raising a stored
// ok rate by hand makes check refuse the report (exit 2, naming the field)
// instead of judging the edited number.
func TestCheckRefusesEditedSummary(t *testing.T) {
	srv := okServer(t, 4)
	dir := t.TempDir()
	strict := writeFile(t, dir, "strict.json", `{"name":"p","cases":[{"name":"c","qps_floor":1000000}]}`)
	out := filepath.Join(dir, "r.json")
	if code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "100", "--duration", "200ms", "--out", out, "--max-lag", "1s", "--live", "off"); code != exitOK {
		t.Fatalf("load: %d %s %s", code, stdout, stderr)
	}
	if code, _, _ := runCmd(context.Background(), nil, "check", "--profile", strict, out); code != exitFail {
		t.Fatalf("untouched report: exit %d, want 1 (FAIL)", code)
	}
	orig, _ := os.ReadFile(out)
	for _, field := range []string{"rates.ok", "latency.response_time.p99_ms"} {
		edited := editWindowField(t, orig, field)
		p := filepath.Join(dir, "edited.json")
		if err := os.WriteFile(p, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCmd(context.Background(), nil, "check", "--profile", strict, p)
		if code != exitUsage || !strings.Contains(stderr, field) {
			t.Errorf("%s edited: exit %d, stdout %q stderr %q; want 2 naming the field", field, code, stdout, stderr)
		}
	}
}

// editWindowField multiplies a numeric field (a dotted path) of the first
// window of the first step by 1000, as a hand edit would, and returns the
// report.
func editWindowField(t *testing.T, report []byte, field string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(report, &doc); err != nil {
		t.Fatal(err)
	}
	node := doc["steps"].([]any)[0].(map[string]any)["windows"].([]any)[0].(map[string]any)
	parts := strings.Split(field, ".")
	for _, k := range parts[:len(parts)-1] {
		node = node[k].(map[string]any)
	}
	last := parts[len(parts)-1]
	v := node[last].(float64)
	if strings.HasSuffix(last, "_ms") {
		node[last] = v / 1000 // a lowered latency
	} else {
		node[last] = v*1000 + 1 // a raised rate
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadPositionalURL: `sluice load http://host/ --rate R` works as in
// hey, oha and wrk, before or after the flags; --url still works beside it.
// Over a second: a real sluice load run per argument order.
func TestLoadPositionalURL(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	for i, args := range [][]string{
		{"load", srv.URL + "/p", "--rate", "50", "--duration", "100ms"},
		{"load", "--rate", "50", srv.URL + "/p", "--duration", "100ms"},
		{"load", "--rate", "50", "--duration", "100ms", "--url", srv.URL + "/q", srv.URL + "/p"},
	} {
		out := filepath.Join(dir, "r.json")
		code, stdout, stderr := runCmd(context.Background(), nil, append(args, "--out", out, "--max-lag", "1s", "--live", "off")...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		r, err := load.ReadReport(out)
		if err != nil {
			t.Fatal(err)
		}
		ts := r.Steps[0].Settings.Targets
		var urls []string
		for _, tg := range ts {
			urls = append(urls, tg.URL)
		}
		if !slices.Contains(urls, srv.URL+"/p") || (i == 2) != (len(urls) == 2) {
			t.Errorf("%v: targets %v", args, urls)
		}
		if r.Steps[0].Windows[0].Counts.OK == 0 {
			t.Errorf("%v: nothing ok", args)
		}
	}
	code, _, stderr := runCmd(context.Background(), nil, "load", srv.URL, "--rate", "5", "extra", "--out", filepath.Join(dir, "x.json"))
	if code != exitUsage || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("stray word: exit %d %q", code, stderr)
	}
}

// TestLoadProfileRunsEveryCase: a profile of several cases without --case
// runs each case in order, with its own load settings, into its own report,
// judged alone; the exit code is the worst verdict.
func TestLoadProfileRunsEveryCase(t *testing.T) {
	srv := okServer(t, 4) // 25% refused
	dir := t.TempDir()
	prof := writeFile(t, dir, "p.json", `{"name":"p","cases":[
		{"name":"slow","rate":50,"duration":"100ms","max_refusal_rate":0.5},
		{"name":"strict","rate":100,"duration":"100ms","max_refusal_rate":0}]}`)
	out := filepath.Join(dir, "run.json")
	code, stdout, stderr := runCmd(context.Background(), nil, "load", srv.URL, "--profile", prof, "--out", out, "--max-lag", "1s", "--live", "off")
	if code != exitFail {
		t.Fatalf("exit %d, want 1 (one case fails)\n%s\n%s", code, stdout, stderr)
	}
	if strings.Index(stdout, "== case slow") > strings.Index(stdout, "== case strict") || !strings.Contains(stdout, "verdict: PASS (case slow)") ||
		!strings.Contains(stdout, "verdict: FAIL (case strict)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	for name, sched := range map[string]int64{"slow": 5, "strict": 10} {
		r, err := load.ReadReport(filepath.Join(dir, "run."+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if r.Profile.Case != name || r.Verdict.Case != name || r.Steps[0].Windows[0].Counts.Scheduled != sched {
			t.Errorf("case %s: report of case %q judged as %q, %d scheduled", name, r.Profile.Case, r.Verdict.Case, r.Steps[0].Windows[0].Counts.Scheduled)
		}
	}
}

// TestCheckRelease: a report from a test binary (no VCS stamp) is not
// release-qualified and `check --release` says why (exit 3); the same
// report with full provenance passes; a report that claims to be qualified
// without the provenance is refused as invalid input.
func TestCheckRelease(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	prof := writeFile(t, dir, "p.json", `{"name":"p","cases":[{"name":"c","max_error_rate":0}]}`)
	out := filepath.Join(dir, "r.json")
	if code, stdout, stderr := runCmd(context.Background(), nil, "load", srv.URL, "--rate", "50", "--duration", "100ms", "--profile", prof, "--out", out, "--max-lag", "1s", "--live", "off"); code != exitOK {
		t.Fatalf("load: %d %s %s", code, stdout, stderr)
	}
	r, err := load.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReleaseQualified || !slices.Contains(r.ReleaseReasons, "no VCS revision (build from a git checkout)") || len(r.SourceFiles) < 10 {
		t.Fatalf("qualified %v, reasons %q, %d source files", r.ReleaseQualified, r.ReleaseReasons, len(r.SourceFiles))
	}
	if code, _, _ := runCmd(context.Background(), nil, "check", "--profile", prof, out); code != exitOK {
		t.Errorf("plain check: exit %d", code)
	}
	code, stdout, _ := runCmd(context.Background(), nil, "check", "--release", "--profile", prof, out)
	if code != exitInvalid || !strings.Contains(stdout, "not release-qualified: no VCS revision") {
		t.Errorf("check --release of an unstamped build: exit %d\n%s", code, stdout)
	}
	// The same run, stamped: a revision of a clean tree.
	stamp := func(dirty, claim bool) string {
		var doc map[string]any
		b, _ := os.ReadFile(out)
		json.Unmarshal(b, &doc)
		tool := doc["tool"].(map[string]any)
		tool["revision"] = "0123456789abcdef0123456789abcdef01234567"
		tool["dirty"] = dirty
		doc["release_qualified"] = claim
		b, _ = json.Marshal(doc)
		p := filepath.Join(dir, "stamped.json")
		os.WriteFile(p, b, 0o644)
		return p
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "check", "--release", "--profile", prof, stamp(false, false)); code != exitOK {
		t.Errorf("stamped clean build: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "check", "--release", "--profile", prof, stamp(true, false)); code != exitInvalid || !strings.Contains(stdout, "dirty tree") {
		t.Errorf("dirty build: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCmd(context.Background(), nil, "check", "--release", "--profile", prof, stamp(true, true)); code != exitUsage || !strings.Contains(stderr, "release_qualified") {
		t.Errorf("a dirty build claiming qualification: exit %d %s", code, stderr)
	}
}
