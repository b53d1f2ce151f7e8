// Command mutants proves that sluice's tests bite: it applies named
// mutations to a package's sources, one at a time, and requires the
// package's tests to fail on every one.
//
// Each package lists its mutants in testdata/mutants.json:
//
//	{"package": "./admit", "mutants": [
//	  {"name": "permit_never_released", "file": "gate.go",
//	   "find": "exact text", "replace": "mutated text", "why": "..."}]}
//
// A mutation is applied with `go test -overlay`, so the working tree is
// never modified and an interrupted run leaves nothing behind. The rules
// are strict on purpose: a static server's mutation harness once reported
// "not applied" and "caught" alike, so a mutant that silently failed to
// apply looked like a test that worked. Here:
//
//   - the anchor text must occur exactly once in the file, else it is an
//     error (not a skip);
//   - the mutated package must compile, else it is an error (a build
//     failure would "kill" any mutant and prove nothing);
//   - the unmutated package's tests must pass first (a baseline), else
//     every mutant would look killed;
//   - a mutant whose tests pass has survived, and the run fails.
//
// Usage:
//
//	go run ./internal/cmd/mutants [-list] [-run REGEXP] [PKGDIR ...]
//
// With no PKGDIR it finds every */testdata/mutants.json in the module.
package main

import (
	"bytes"
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
	"strings"
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
	// Run optionally narrows the tests run against this mutant (go test -run).
	Run string `json:"run,omitempty"`
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fset.SetOutput(stderr)
	list := fset.Bool("list", false, "list the mutants and exit")
	only := fset.String("run", "", "only mutants whose package/name matches this regexp")
	timeout := fset.Duration("timeout", 3*time.Minute, "go test -timeout for each run")
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

	var killed, survived, broken int
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
		if out, err := goTest(ctx, sp.Package, "", "", *timeout); err != nil {
			fmt.Fprintf(stderr, "mutants: %s: tests fail WITHOUT any mutation, so no mutant can be judged:\n%s\n", sp.Package, tail(out, 30))
			return 1
		}
		for _, m := range chosen {
			start := time.Now()
			verdict, detail := judge(ctx, tmp, sp.Package, m, *timeout)
			switch verdict {
			case "killed":
				killed++
			case "SURVIVED":
				survived++
			default:
				broken++
			}
			fmt.Fprintf(stdout, "%-9s %-14s %-40s %5.1fs  %s\n", verdict, sp.Package, m.Name, time.Since(start).Seconds(), detail)
		}
	}
	if *list {
		return 0
	}
	fmt.Fprintf(stdout, "mutants: %d killed, %d survived, %d broken\n", killed, survived, broken)
	if killed+survived+broken == 0 {
		fmt.Fprintln(stderr, "mutants: no mutant ran")
		return 1
	}
	if survived > 0 || broken > 0 {
		return 1
	}
	return 0
}

// judge applies one mutant and runs the package's tests against it.
func judge(ctx context.Context, tmp, pkg string, m mutant, timeout time.Duration) (verdict, detail string) {
	if m.Name == "" || m.File == "" || m.Find == "" {
		return "ERROR", "mutant needs name, file and find"
	}
	path, err := filepath.Abs(filepath.Join(pkg, m.File))
	if err != nil {
		return "ERROR", err.Error()
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "ERROR", err.Error()
	}
	switch n := bytes.Count(src, []byte(m.Find)); n {
	case 1:
	case 0:
		return "ERROR", fmt.Sprintf("anchor not found in %s: the mutant cannot be applied", m.File)
	default:
		return "ERROR", fmt.Sprintf("anchor found %d times in %s: ambiguous", n, m.File)
	}
	mutated := bytes.Replace(src, []byte(m.Find), []byte(m.Replace), 1)
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
	if out, err := goTest(ctx, pkg, ov, "^$", timeout); err != nil {
		return "ERROR", "mutant does not compile: " + strings.Join(strings.Fields(tail(out, 3)), " ")
	}
	out, err := goTest(ctx, pkg, ov, m.Run, timeout)
	if err == nil {
		return "SURVIVED", m.Why
	}
	return "killed", firstFailure(out)
}

func goTest(ctx context.Context, pkg, overlay, runRE string, timeout time.Duration) (string, error) {
	args := []string{"test", "-count=1", "-timeout", timeout.String()}
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
