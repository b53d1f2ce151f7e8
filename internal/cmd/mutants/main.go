// Command mutants proves that sluice's tests bite: it applies named
// mutations to a package's sources, one at a time, and requires the
// package's tests to fail on every one.
//
// Each package lists its mutants in testdata/mutants.json:
//
//	{"package": "./admit", "mutants": [
//	  {"name": "permit_never_released", "file": "gate.go",
//	   "find": "exact text", "replace": "mutated text", "why": "...",
//	   "killed_by": "TestDoneFreesTheSlot"}]}
//
// A mutation is applied with `go test -overlay`, so the working tree is
// never modified and an interrupted run leaves nothing behind. The rules
// are strict on purpose: a static server's mutation harness once reported
// "not applied" and "caught" alike, so a mutant that silently failed to
// apply looked like a test that worked. Here:
//
//   - every mutant names the test that must kill it (killed_by); only that
//     test runs against the mutant, and the mutant counts as killed only
//     if that very test fails. A mutant killed by some other test, or by
//     a crash before the test ran, proves nothing about the test it names;
//   - the anchor text must occur exactly once in the file, else it is an
//     error (not a skip); an anchor written with \n matches a file with
//     \r\n line endings the same way;
//   - the mutated package must compile, else it is an error (a build
//     failure would "kill" any mutant and prove nothing);
//   - the named tests must pass unmutated first (a baseline), else every
//     mutant would look killed;
//   - a mutant whose test passes has survived, and the run fails;
//   - nothing may change in the working tree: the tool compares
//     `git status` before and after and fails if a test wrote a file.
//
// Usage:
//
//	go run ./internal/cmd/mutants [-list] [-run REGEXP] [-j N] [PKGDIR ...]
//
// With no PKGDIR it finds every */testdata/mutants.json in the module.
//
// Speed: a mutant's run is mostly building its package's test binary, so
// -j N runs (default one more than the CPUs) share one pool across
// packages. The baselines, run first, give each mutant a cost estimate
// (its package's build time plus its test's passing time), and the pool
// starts the costliest first, so that a long run does not start last and
// hold up the end. Each run uses -failfast (the first failure is the
// verdict) and builds with inlining off in the package under test and no
// DWARF (see quickBuild). The last lines give the time the baselines and the mutants
// took and each mutant's wall time summed, the figure least sensitive to
// a shared machine.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type spec struct {
	Package string   `json:"package"`
	Mutants []mutant `json:"mutants"`
}

type mutant struct {
	Name    string `json:"name"`
	File    string `json:"file"`
	Find    string `json:"find"`
	Replace string `json:"replace"`
	Why     string `json:"why"`
	// KilledBy is the top-level test that must fail under this mutant.
	KilledBy string `json:"killed_by"`
}

var testNameRE = regexp.MustCompile(`^(Test|Example|Fuzz)[A-Za-z0-9_]*$`)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fset.SetOutput(stderr)
	list := fset.Bool("list", false, "list the mutants and exit")
	only := fset.String("run", "", "only mutants whose package/name matches this regexp")
	timeout := fset.Duration("timeout", 3*time.Minute, "go test -timeout for each run")
	jobs := fset.Int("j", runtime.NumCPU()+1, "mutants judged at once (one more than the CPUs: a run that waits on a slow test leaves a CPU to the next build)")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	var filter *regexp.Regexp
	if *only != "" {
		var err error
		if filter, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(stderr, "mutants: bad -run: %v\n", err)
			return 2
		}
	}
	specs, err := loadSpecs(fset.Args())
	if err != nil {
		fmt.Fprintf(stderr, "mutants: %v\n", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "sluice-mutants-")
	if err != nil {
		fmt.Fprintf(stderr, "mutants: %v\n", err)
		return 2
	}
	defer os.RemoveAll(tmp)

	before, gitErr := gitStatus(ctx)
	var killed, survived, broken int
	// The chosen mutants of each package. Every package's baseline runs
	// first, *jobs at a time; then all mutants share one pool of *jobs
	// runs, the costliest first (see schedule), so that no long run
	// starts last and leaves the other CPUs idle at the end. Results are
	// printed package by package, in file order, as soon as a package's
	// mutants are all judged.
	type result struct {
		verdict, detail string
		took            time.Duration
	}
	type pkgRun struct {
		sp       spec
		chosen   []mutant
		results  []result
		done     sync.WaitGroup
		baseline baseline
		flags    []string // quickBuild, or none where the baseline needs the default build
		err      error
		out      string
	}
	var runs []*pkgRun
	for _, sp := range specs {
		var chosen []mutant
		for _, m := range sp.Mutants {
			if filter == nil || filter.MatchString(sp.Package+"/"+m.Name) {
				chosen = append(chosen, m)
			}
		}
		if len(chosen) == 0 {
			continue
		}
		if *list {
			for _, m := range chosen {
				fmt.Fprintf(stdout, "%s\t%s\t%s\n", sp.Package, m.Name, m.Why)
			}
			continue
		}
		runs = append(runs, &pkgRun{sp: sp, chosen: chosen, results: make([]result, len(chosen))})
	}
	if *list {
		return 0
	}
	sem := make(chan struct{}, max(*jobs, 1))
	started := time.Now()
	var wg sync.WaitGroup
	for _, pr := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			pr.flags = quickBuild()
			pr.out, pr.err = goTest(ctx, pr.sp.Package, "", runPattern(pr.chosen), *timeout, append([]string{"-v"}, pr.flags...)...)
			if pr.err != nil {
				// The named tests may need inlining (one that counts
				// allocations): judge this package on the default build.
				pr.flags = nil
				start = time.Now()
				pr.out, pr.err = goTest(ctx, pr.sp.Package, "", runPattern(pr.chosen), *timeout, "-v")
			}
			pr.baseline = parseBaseline(pr.out, time.Since(start))
		}()
	}
	wg.Wait()
	baselines := time.Since(started)
	for _, pr := range runs {
		if pr.err == nil && pr.flags == nil {
			fmt.Fprintf(stdout, "mutants: %s: judged on the default build (its named tests fail with %s)\n", pr.sp.Package, strings.Join(quickBuild(), " "))
		}
		if pr.err != nil {
			fmt.Fprintf(stderr, "mutants: %s: tests fail WITHOUT any mutation, so no mutant can be judged:\n%s\n", pr.sp.Package, tail(pr.out, 30))
			return 1
		}
	}
	var queue []job
	for ri, pr := range runs {
		pr.done.Add(len(pr.chosen))
		for mi, m := range pr.chosen {
			queue = append(queue, job{run: ri, mutant: mi, cost: pr.baseline.estimate(m.KilledBy)})
		}
	}
	schedule(queue)
	var summed atomic.Int64
	go func() {
		// A run is mostly compiling and linking: *jobs at a time, each in
		// its own overlay.
		for _, j := range queue {
			pr, i := runs[j.run], j.mutant
			m := pr.chosen[i]
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; pr.done.Done() }()
				start := time.Now()
				v, d := judge(ctx, tmp, pr.sp.Package, m, *timeout, pr.flags)
				took := time.Since(start)
				summed.Add(int64(took))
				pr.results[i] = result{v, d, took}
			}()
		}
	}()
	for _, pr := range runs {
		pr.done.Wait()
		for i, m := range pr.chosen {
			r := pr.results[i]
			switch r.verdict {
			case "killed":
				killed++
			case "SURVIVED":
				survived++
			default:
				broken++
			}
			fmt.Fprintf(stdout, "%-9s %-14s %-40s %5.1fs  %s\n", r.verdict, pr.sp.Package, m.Name, r.took.Seconds(), r.detail)
		}
	}
	fmt.Fprintf(stdout, "mutants: baselines %.0f s, mutants %.0f s at -j %d (each mutant's wall summed: %.0f s)\n",
		baselines.Seconds(), time.Since(started.Add(baselines)).Seconds(), max(*jobs, 1), time.Duration(summed.Load()).Seconds())
	fmt.Fprintf(stdout, "mutants: %d killed, %d survived, %d broken\n", killed, survived, broken)
	if gitErr == nil {
		if after, err := gitStatus(ctx); err == nil && after != before {
			fmt.Fprintf(stderr, "mutants: the run changed the working tree (a test wrote a file):\nbefore:\n%safter:\n%s", before, after)
			return 1
		}
	}
	if killed+survived+broken == 0 {
		fmt.Fprintln(stderr, "mutants: no mutant ran")
		return 1
	}
	if survived > 0 || broken > 0 {
		return 1
	}
	return 0
}

// quickBuild returns the build flags of a baseline and its mutants' runs.
// Each mutant rebuilds its package's test binary, and that build is most
// of its time. With inlining off in the package under test (-l; its
// dependencies come from the build cache as they are) the compile takes
// about 40% less CPU, and a link without DWARF (-w) less again; neither
// changes what the code means. A package whose named tests fail on this
// build (one that counts allocations needs inlining) is judged on the
// default build instead.
func quickBuild() []string { return []string{"-gcflags=-l", "-ldflags=-w"} }

// judge applies one mutant and runs the test that must kill it.
func judge(ctx context.Context, tmp, pkg string, m mutant, timeout time.Duration, flags []string) (verdict, detail string) {
	if m.Name == "" || m.File == "" || m.Find == "" {
		return "ERROR", "mutant needs name, file and find"
	}
	if !testNameRE.MatchString(m.KilledBy) {
		return "ERROR", fmt.Sprintf("killed_by %q: want the name of one top-level test (TestX)", m.KilledBy)
	}
	path, err := filepath.Abs(filepath.Join(pkg, m.File))
	if err != nil {
		return "ERROR", err.Error()
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "ERROR", err.Error()
	}
	find, replace := []byte(m.Find), []byte(m.Replace)
	if bytes.Contains(src, []byte("\r\n")) {
		// Anchors are written with \n; match a CRLF file the same way.
		find = bytes.ReplaceAll(bytes.ReplaceAll(find, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
		replace = bytes.ReplaceAll(bytes.ReplaceAll(replace, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	}
	switch n := bytes.Count(src, find); n {
	case 1:
	case 0:
		return "ERROR", fmt.Sprintf("anchor not found in %s: the mutant cannot be applied", m.File)
	default:
		return "ERROR", fmt.Sprintf("anchor found %d times in %s: ambiguous", n, m.File)
	}
	mutated := bytes.Replace(src, find, replace, 1)
	dir := filepath.Join(tmp, strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+"_"+m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "ERROR", err.Error()
	}
	mfile := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(mfile, mutated, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {path: mfile}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	// -failfast: the verdict needs the first failure only, so a test
	// that runs its cases on each engine stops after the first that
	// failed, and later subtests are not waited for.
	out, err := goTest(ctx, pkg, ov, "^"+m.KilledBy+"$", timeout, append([]string{"-v", "-failfast"}, flags...)...)
	switch {
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		return "ERROR", "mutant does not compile: " + strings.Join(strings.Fields(tail(out, 3)), " ")
	case err == nil && strings.Contains(out, "no tests to run"):
		return "ERROR", fmt.Sprintf("killed_by %s: no such test in %s", m.KilledBy, pkg)
	case err == nil:
		return "SURVIVED", m.KilledBy + " passed: " + m.Why
	case failedTest(out, m.KilledBy):
		return "killed", firstFailure(out)
	}
	return "ERROR", fmt.Sprintf("tests failed, but not %s: %s", m.KilledBy, firstFailure(out))
}

// failedTest reports whether go test -v's output shows test name failing:
// a failure, a time-out while it ran, or the test binary dying (a panic in
// a goroutine the test started) after the test began and before it passed.
// Only that test runs, so a death while it runs is its failure.
func failedTest(out, name string) bool {
	if strings.Contains(out, "--- FAIL: "+name+" ") || strings.Contains(out, "--- FAIL: "+name+"/") {
		return true
	}
	if strings.Contains(out, "panic: test timed out") && strings.Contains(out, "\t"+name) {
		return true
	}
	return strings.Contains(out, "=== RUN   "+name+"\n") && !strings.Contains(out, "--- PASS: "+name+" ")
}

// baseline is what a package's unmutated run of the named tests showed:
// how long the run took and how long each named test took to pass.
type baseline struct {
	took  time.Duration
	tests map[string]time.Duration
}

var passRE = regexp.MustCompile(`(?m)^--- PASS: ([A-Za-z0-9_]+) \(([0-9.]+)s\)$`)

// parseBaseline reads go test -v's output. A test run more than once (a
// TestMain that runs the tests once per engine) counts its runs summed.
func parseBaseline(out string, took time.Duration) baseline {
	b := baseline{took: took, tests: map[string]time.Duration{}}
	for _, m := range passRE.FindAllStringSubmatch(out, -1) {
		if secs, err := strconv.ParseFloat(m[2], 64); err == nil {
			b.tests[m[1]] += time.Duration(secs * float64(time.Second))
		}
	}
	return b
}

// estimate is how long a mutant judged by test is expected to take: the
// package's build (the baseline's wall less its tests' time, an upper
// bound since the baseline may have built dependencies too) plus the
// test's passing time. Only the order of estimates matters.
func (b baseline) estimate(test string) time.Duration {
	var tests time.Duration
	for _, d := range b.tests {
		tests += d
	}
	return max(b.took-tests, 0) + b.tests[test]
}

// job is one mutant to judge: its package's index in the runs, its index
// in that package's chosen mutants, and its estimated cost.
type job struct {
	run, mutant int
	cost        time.Duration
}

// schedule orders the jobs longest first (a stable sort, so equal
// estimates keep file order): with a pool of runs, the makespan's tail is
// the last job started, and starting the long ones first keeps it short.
func schedule(q []job) {
	slices.SortStableFunc(q, func(a, b job) int { return cmp.Compare(b.cost, a.cost) })
}

// runPattern selects the tests that kill the chosen mutants, for the
// baseline run.
func runPattern(ms []mutant) string {
	seen := map[string]bool{}
	var names []string
	for _, m := range ms {
		if testNameRE.MatchString(m.KilledBy) && !seen[m.KilledBy] {
			seen[m.KilledBy] = true
			names = append(names, m.KilledBy)
		}
	}
	return "^(" + strings.Join(names, "|") + ")$"
}

// gitStatus is the working tree's state, to prove the run left it alone.
func gitStatus(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=all").Output()
	return string(out), err
}

func goTest(ctx context.Context, pkg, overlay, runRE string, timeout time.Duration, extra ...string) (string, error) {
	// -vet=off: the suite runs go vet once on the real sources; vetting
	// every mutated copy again took a third of each mutant's time.
	args := append([]string{"test", "-count=1", "-vet=off", "-timeout", timeout.String()}, extra...)
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	if runRE != "" {
		args = append(args, "-run", runRE)
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

func loadSpecs(dirs []string) ([]spec, error) {
	var files []string
	if len(dirs) == 0 {
		err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == ".git" || d.Name() == "bench" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && d.Name() == "mutants.json" && filepath.Base(filepath.Dir(p)) == "testdata" {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		for _, d := range dirs {
			files = append(files, filepath.Join(d, "testdata", "mutants.json"))
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no testdata/mutants.json found")
	}
	var specs []spec
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var sp spec
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sp); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		want := "./" + filepath.ToSlash(filepath.Dir(filepath.Dir(f)))
		if sp.Package == "" {
			sp.Package = want
		}
		if filepath.Clean(sp.Package) != filepath.Clean(want) {
			return nil, fmt.Errorf("%s: package %q, but the file lives in %q", f, sp.Package, want)
		}
		if len(sp.Mutants) == 0 {
			return nil, fmt.Errorf("%s: no mutants", f)
		}
		seen := map[string]bool{}
		for _, m := range sp.Mutants {
			if seen[m.Name] {
				return nil, fmt.Errorf("%s: mutant %q listed twice", f, m.Name)
			}
			seen[m.Name] = true
			if !testNameRE.MatchString(m.KilledBy) {
				return nil, fmt.Errorf("%s: mutant %q: killed_by %q: name the one top-level test that must fail under it", f, m.Name, m.KilledBy)
			}
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// firstFailure picks the first "--- FAIL" line (or panic) as evidence.
func firstFailure(out string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "panic:") {
			return l
		}
	}
	return firstLine(out)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
