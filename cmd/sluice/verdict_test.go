package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/load"
)

// TestReportJudgesLikeCheck: `report` prints the verdict check gives, not
// the one the file stores, and exits with it: a report whose steps were
// emptied by hand is INVALID for both.
func TestReportJudgesLikeCheck(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	prof := writeFile(t, dir, "p.json", `{"name":"p","cases":[{"name":"c"}]}`)
	out := filepath.Join(dir, "r.json")
	if code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "50", "--duration", "100ms",
		"--profile", prof, "--out", out, "--max-lag", "1s", "--live", "off"); code != exitOK {
		t.Fatalf("load: %d %s %s", code, stdout, stderr)
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "report", out); code != exitOK || !strings.Contains(stdout, "verdict: PASS") {
		t.Errorf("untouched report: exit %d, want 0 and PASS:\n%s", code, stdout)
	}
	var doc map[string]any
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["steps"] = []any{}
	emptied, _ := json.Marshal(doc)
	p := writeFile(t, dir, "emptied.json", string(emptied))
	code, stdout, stderr := runCmd(context.Background(), nil, "report", p)
	if code != exitInvalid || !strings.Contains(stdout, "verdict: INVALID") || !strings.Contains(stdout, "stored verdict PASS") {
		t.Errorf("emptied report: exit %d, want 3 and INVALID, saying it stored PASS:\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "check", "--profile", prof, p); code != exitInvalid || !strings.Contains(stdout, "INVALID") {
		t.Errorf("check of the emptied report: exit %d %s, want 3 INVALID", code, stdout)
	}
}

// TestCheckCaseMismatchIsAnError: a report run against case c1, judged
// with a profile whose only case is another, is a usage error naming both
// cases; naming the case with --case judges it.
func TestCheckCaseMismatchIsAnError(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	ran := writeFile(t, dir, "ran.json", `{"name":"p","cases":[{"name":"c1"}]}`)
	other := writeFile(t, dir, "other.json", `{"name":"q","cases":[{"name":"other","qps_floor":1000000}]}`)
	out := filepath.Join(dir, "r.json")
	if code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "50", "--duration", "100ms",
		"--profile", ran, "--out", out, "--max-lag", "1s", "--live", "off"); code != exitOK {
		t.Fatalf("load: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr := runCmd(context.Background(), nil, "check", "--profile", other, out)
	if code != exitUsage || !strings.Contains(stderr, `"c1"`) || !strings.Contains(stderr, `"other"`) || strings.Contains(stdout, "PASS") {
		t.Errorf("case mismatch: exit %d, stdout %q stderr %q; want 2 naming both cases", code, stdout, stderr)
	}
	if code, stdout, _ := runCmd(context.Background(), nil, "check", "--profile", other, "--case", "other", out); code != exitFail {
		t.Errorf("--case other: exit %d %s, want 1 (its floor is out of reach)", code, stdout)
	}
}

// TestOutFolderRefusedUpFront: --out naming an existing folder is a usage
// error before any request is sent, for load and sweep alike.
func TestOutFolderRefusedUpFront(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"load", "--url", srv.URL, "--rate", "50", "--duration", "1s", "--out", dir, "--live", "off"},
		{"sweep", "--url", srv.URL, "--concurrencies", "1", "--step-duration", "1s", "--out", dir, "--live", "off"},
	} {
		code, _, stderr := runCmd(context.Background(), nil, args...)
		if code != exitUsage || !strings.Contains(stderr, "is a folder") {
			t.Errorf("%s --out FOLDER: exit %d, stderr %q; want 2 saying it is a folder", args[0], code, stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the server before the refusal", n)
	}
}

// TestReportReadersAreBounded: every command that reads a report refuses
// one over 64 MiB (a sparse file) as bad input, before decoding it.
func TestReportReadersAreBounded(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64<<20 + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	prof := writeFile(t, dir, "p.json", `{"name":"p","cases":[{"name":"c"}]}`)
	for _, args := range [][]string{
		{"check", "--profile", prof, huge},
		{"report", huge},
		{"report", "merge", "--out", filepath.Join(dir, "m.json"), huge, prof},
		{"plan", "little", "--report", huge},
		{"plan", "drain", "--report", huge, "--backlog", "10"},
	} {
		code, _, stderr := runCmd(context.Background(), nil, args...)
		if code != exitUsage || !strings.Contains(stderr, "over the bound") {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying it is over the bound", args, code, stderr)
		}
	}
}

// TestLoadPoissonArrivals: --arrivals poisson --seed N runs and the report
// records both; the text summary names them; sweep gives each rung its own
// seed from the one given.
func TestLoadPoissonArrivals(t *testing.T) {
	srv := okServer(t, 0)
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	code, stdout, stderr := runCmd(context.Background(), nil, "load", "--url", srv.URL, "--rate", "200", "--duration", "300ms",
		"--arrivals", "poisson", "--seed", "7", "--out", out, "--max-lag", "1s", "--live", "off")
	if code != exitOK || !strings.Contains(stdout, "poisson arrivals, seed 7") {
		t.Fatalf("load: exit %d, stdout %q stderr %q; want 0 naming the arrivals and seed", code, stdout, stderr)
	}
	r, err := load.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Steps[0]; st.Arrivals != load.Poisson || st.Seed != 7 {
		t.Errorf("report step: arrivals %q seed %d, want poisson and 7", st.Arrivals, st.Seed)
	}
	sw := filepath.Join(dir, "s.json")
	if code, stdout, stderr := runCmd(context.Background(), nil, "sweep", "--url", srv.URL, "--rates", "100,200", "--step-duration", "200ms",
		"--arrivals", "poisson", "--seed", "7", "--out", sw, "--max-lag", "1s", "--live", "off"); code != exitOK {
		t.Fatalf("sweep: exit %d %s %s", code, stdout, stderr)
	}
	if r, err = load.ReadReport(sw); err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 2 || r.Steps[0].Seed != 7 || r.Steps[1].Seed != 8 || r.Steps[1].Arrivals != load.Poisson {
		t.Errorf("sweep steps: %+v %+v, want poisson seeds 7 and 8", r.Steps[0].Seed, r.Steps[1].Seed)
	}
}
