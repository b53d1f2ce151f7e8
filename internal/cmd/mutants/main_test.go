package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule lays out a tiny module with one package, its test, and a
// mutants.json, and returns its root.
func writeModule(t *testing.T, mutants string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                     "module example.com/m\n\ngo 1.26\n",
		"calc/calc.go":               "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Unused() int { return 1 }\n",
		"calc/calc_test.go":          "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n",
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
		{"killed", `{"mutants":[{"name":"sub","file":"calc.go","find":"a + b","replace":"a - b"}]}`, 0, "1 killed, 0 survived, 0 broken"},
		{"survived", `{"mutants":[{"name":"dead","file":"calc.go","find":"return 1","replace":"return 2"}]}`, 1, "0 killed, 1 survived, 0 broken"},
		{"anchor missing is an error", `{"mutants":[{"name":"gone","file":"calc.go","find":"a * b","replace":"a"}]}`, 1, "anchor not found"},
		{"ambiguous anchor is an error", `{"mutants":[{"name":"twice","file":"calc.go","find":"func ","replace":"func  "}]}`, 1, "found 2 times"},
		{"mutant must compile", `{"mutants":[{"name":"syntax","file":"calc.go","find":"a + b","replace":"a +"}]}`, 1, "does not compile"},
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
		`{"mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y"},{"name":"a","file":"calc.go","find":"x","replace":"y"}]}`,
		`{"package":"./elsewhere","mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y"}]}`,
		`{"mutants":[{"name":"a","file":"calc.go","find":"x","replace":"y","typo":1}]}`,
		`not json`,
	} {
		root := writeModule(t, bad)
		if code, out := runIn(t, root, "-list"); code != 2 {
			t.Errorf("spec %s: exit %d (%s), want 2", bad, code, out)
		}
	}
}
