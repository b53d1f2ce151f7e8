package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeModule lays out a tiny module with one package, its test, and a
// mutants.json, and returns its root.
func writeModule(t *testing.T, mutants string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                     "module example.com/m\n\ngo 1.26\n",
		"calc/calc.go":               "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Unused() int { return 1 }\n",
		"calc/calc_test.go":          "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n\nfunc TestUnused(t *testing.T) {\n\tif Unused() != 1 {\n\t\tt.Fatal(\"unused\")\n\t}\n}\n",
		"calc/testdata/mutants.json": mutants,
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func runIn(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	t.Chdir(dir)
	var out bytes.Buffer
	code := run(context.Background(), args, &out, &out)
	return code, out.String()
}

// TestMutantVerdicts takes seconds (up to half a minute on a loaded
// machine): it runs go test on a scratch module once per verdict.
func TestMutantVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a scratch module")
	}
	tests := []struct {
		name     string
		mutants  string
		wantCode int
		want     string
	}{
		{"killed", `{"mutants":[{"name":"sub","file":"calc.go","find":"a + b","replace":"a - b","killed_by":"TestAdd"}]}`, 0, "1 killed, 0 survived, 0 broken"},
		{"survived", `{"mutants":[{"name":"dead","file":"calc.go","find":"return 1","replace":"return 2","killed_by":"TestAdd"}]}`, 1, "0 killed, 1 survived, 0 broken"},
		{"only the named test counts", `{"mutants":[{"name":"sub","file":"calc.go","find":"a + b","replace":"a - b","killed_by":"TestUnused"}]}`, 1, "TestUnused passed"},
		{"named test must exist", `{"mutants":[{"name":"sub","file":"calc.go","find":"a + b","replace":"a - b","killed_by":"TestNoSuch"}]}`, 1, "no such test"},
		{"anchor missing is an error", `{"mutants":[{"name":"gone","file":"calc.go","find":"a * b","replace":"a","killed_by":"TestAdd"}]}`, 1, "anchor not found"},
		{"ambiguous anchor is an error", `{"mutants":[{"name":"twice","file":"calc.go","find":"func ","replace":"func  ","killed_by":"TestAdd"}]}`, 1, "found 2 times"},
		{"mutant must compile", `{"mutants":[{"name":"syntax","file":"calc.go","find":"a + b","replace":"a +","killed_by":"TestAdd"}]}`, 1, "does not compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeModule(t, tt.mutants)
			src := filepath.Join(root, "calc", "calc.go")
			before, _ := os.ReadFile(src)
			code, out := runIn(t, root)
			if code != tt.wantCode || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, out, tt.wantCode, tt.want)
			}
			if after, _ := os.ReadFile(src); !bytes.Equal(before, after) {
				t.Fatal("the working tree was modified")
			}
		})
	}
}

func TestSpecValidation(t *testing.T) {
	for _, bad := range []string{
		`{"mutants":[]}`,
		`{"mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y","killed_by":"TestAdd"},{"name":"a","file":"calc.go","find":"x","replace":"y","killed_by":"TestAdd"}]}`,
		`{"package":"./elsewhere","mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y","killed_by":"TestAdd"}]}`,
		`{"mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y","typo":1}]}`,
		`{"mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y"}]}`,
		`{"mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y","killed_by":"TestA|TestB"}]}`,
		`not json`,
	} {
		root := writeModule(t, bad)
		if code, out := runIn(t, root, "-list"); code != 2 {
			t.Errorf("spec %s: exit %d (%s), want 2", bad, code, out)
		}
	}
}

// An anchor written with \n applies to a file with CRLF line endings.
// Seconds: it runs go test on a scratch module.
func TestCRLFFileMatchesLFAnchor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a scratch module")
	}
	root := writeModule(t, `{"mutants":[{"name":"sub","file":"calc.go","find":"func Add(a, b int) int { return a + b }\n\nfunc Unused","replace":"func Add(a, b int) int { return a - b }\n\nfunc Unused","killed_by":"TestAdd"}]}`)
	src := filepath.Join(root, "calc", "calc.go")
	b, _ := os.ReadFile(src)
	if err := os.WriteFile(src, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runIn(t, root); code != 0 || !strings.Contains(out, "1 killed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// A test that writes into the working tree fails the run. Seconds: it
// runs go test on a scratch module.
func TestWorkingTreeMustStayClean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a scratch module")
	}
	root := writeModule(t, `{"mutants":[{"name":"sub","file":"calc.go","find":"a + b","replace":"a - b","killed_by":"TestAdd"}]}`)
	writer := "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestAdd(t *testing.T) {\n\tos.WriteFile(\"litter.txt\", nil, 0o644)\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(root, "calc", "calc_test.go"), []byte(writer), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("git %v: %v %s", args, err, out)
		}
	}
	if code, out := runIn(t, root); code != 1 || !strings.Contains(out, "changed the working tree") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// A mutant that makes the named test crash the binary from a goroutine it
// started (no "--- FAIL" line is printed) still counts as killed by it.
// Seconds: it runs go test on a scratch module.
func TestCrashInTheNamedTestKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a scratch module")
	}
	root := writeModule(t, `{"mutants":[{"name":"crash","file":"calc.go","find":"func Unused() int { return 1 }","replace":"func Unused() int { done := make(chan int); go func() { panic(\"boom\") }(); return <-done }","killed_by":"TestUnused"}]}`)
	if code, out := runIn(t, root); code != 0 || !strings.Contains(out, "1 killed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestScheduleStartsCostliestFirst(t *testing.T) {
	out := "=== engine net\n=== RUN   TestSlow\n--- PASS: TestSlow (2.00s)\n=== RUN   TestQuick\n--- PASS: TestQuick (0.01s)\n" +
		"=== engine fast\n=== RUN   TestSlow\n--- PASS: TestSlow (1.50s)\n    --- PASS: TestSlow/sub (1.00s)\nok\n"
	b := parseBaseline(out, 10*time.Second)
	if b.tests["TestSlow"] != 3500*time.Millisecond || b.tests["TestQuick"] != 10*time.Millisecond || len(b.tests) != 2 {
		t.Fatalf("passing times %v: want TestSlow 3.5s (both engines summed), TestQuick 10ms, no subtests", b.tests)
	}
	if got, want := b.estimate("TestSlow"), 10*time.Second-3510*time.Millisecond+3500*time.Millisecond; got != want {
		t.Fatalf("estimate %v, want %v (build time plus the test's)", got, want)
	}
	q := []job{{run: 0, mutant: 0, cost: time.Second}, {run: 1, mutant: 0, cost: 9 * time.Second}, {run: 0, mutant: 1, cost: time.Second}, {run: 1, mutant: 1, cost: 3 * time.Second}}
	schedule(q)
	want := []job{{1, 0, 9 * time.Second}, {1, 1, 3 * time.Second}, {0, 0, time.Second}, {0, 1, time.Second}}
	if !slices.Equal(q, want) {
		t.Fatalf("order %v, want %v: longest first, ties in file order", q, want)
	}
}

// TestPackageNeedingInliningJudgedOnDefaultBuild: a named test that fails
// with inlining off (it counts allocations that inlining removes) is not
// a failed baseline: its package is judged on the default build.
func TestPackageNeedingInliningJudgedOnDefaultBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a scratch module")
	}
	root := writeModule(t, `{"mutants":[{"name":"sub","file":"calc.go","find":"a + b","replace":"a - b","killed_by":"TestAdd"}]}`)
	test := "package calc\n\nimport \"testing\"\n\ntype pair struct{ a, b int }\n\nfunc newPair(a, b int) *pair { return &pair{a, b} }\n\n" +
		"func TestAdd(t *testing.T) {\n\tif n := testing.AllocsPerRun(10, func() { p := newPair(2, 3); _ = p.a }); n != 0 {\n\t\tt.Fatalf(\"%v allocations: want newPair inlined\", n)\n\t}\n" +
		"\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(root, "calc", "calc_test.go"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runIn(t, root)
	if code != 0 || !strings.Contains(out, "1 killed") || !strings.Contains(out, "judged on the default build") {
		t.Fatalf("exit %d:\n%s\nwant the mutant killed on the default build", code, out)
	}
}
