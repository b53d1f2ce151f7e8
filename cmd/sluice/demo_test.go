package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestDemoCommand runs `sluice demo` end to end on short steps: exit 0,
// the table with every variant, the summary, and the report files. The
// driver reports progress once a second, so each variant's run (four
// steps) must last longer than that for a live line to appear.
func TestDemoCommand(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := filepath.Join(t.TempDir(), "made", "by", "demo")
	code, stdout, stderr := runCmd(context.Background(), nil, "demo", "--step-duration", "300ms", "--out", dir, "--live", "on")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"no-gate", "request-scope", "disk-scope", "adaptive", "cached ok/s", "uncached ok/s",
		"capacity (1×):", "At 10× capacity", "For uncached work at 10×", "report: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "measuring capacity") || !strings.Contains(stderr, "[4/4 adaptive]") {
		t.Errorf("no live lines on stderr:\n%s", stderr)
	}
	for _, f := range []string{"sluice-demo.html", "no-gate.html", "adaptive-cached.json", "request-scope-uncached.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestDemoBadFlags: every usage error exits 2 with a reason and writes
// nothing; --help exits 0.
func TestDemoBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--step-duration", "0s"}, nil, "--step-duration 0s"},
		{[]string{"--step-duration", "-1s"}, nil, "--step-duration -1s"},
		{[]string{"--step-duration", "2m"}, nil, "at most 1m0s"},
		{[]string{"--step-duration", "fast"}, nil, "--step-duration \"fast\": want a duration"},
		{[]string{"--limit", "newton"}, nil, "--limit \"newton\""},
		{[]string{"--live", "maybe"}, nil, "--live takes"},
		{[]string{"--nope"}, nil, "unknown flag --nope"},
		{[]string{"extra"}, nil, "unexpected argument \"extra\""},
		{[]string{"--out", file}, nil, "--out"},
		{[]string{"--out", filepath.Join(file, "sub")}, nil, "--out"},
		{nil, map[string]string{"SLUICE_STEP": "soon"}, "SLUICE_STEP"},
	} {
		start := time.Now()
		code, stdout, stderr := runCmd(context.Background(), c.env, append([]string{"demo"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("demo %q: exit %d, stderr %q, stdout %q: want exit 2 naming %q", c.args, code, stderr, stdout, c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("demo %q took %v: a usage error must not run the demo", c.args, d)
		}
	}
	if code, _, stderr := runCmd(context.Background(), nil, "demo", "--help"); code != exitOK || !strings.Contains(stderr, "usage: sluice demo") {
		t.Errorf("--help: exit %d, %q", code, stderr)
	}
}

// FuzzDemoFlags: any command line either parses into settings the demo
// accepts, or is a usage error (2) or --help (0); never a panic.
func FuzzDemoFlags(f *testing.F) {
	for _, s := range []string{"", "--step 1s", "--step=-3s --law aimd", "--live off --out x", "--law", "--step 1e9h", "-h", "--out= --step 0.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var errb strings.Builder
		o, code, ok := parseDemoFlags(env{stdout: &errb, stderr: &errb, getenv: func(string) string { return "" }}, strings.Fields(line))
		if !ok {
			if code != exitUsage && code != exitOK {
				t.Fatalf("%q: exit %d", line, code)
			}
			if code == exitUsage && errb.Len() == 0 {
				t.Fatalf("%q: usage error without a reason", line)
			}
			return
		}
		if o.step <= 0 || o.step > time.Minute || (o.law != "aimd" && o.law != "vegas" && o.law != "gradient2") {
			t.Fatalf("%q parsed into settings the demo refuses: %+v", line, o)
		}
	})
}
