package load

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportsNoSluicePackage keeps the driver independent of what it
// measures: package load and its sub-packages speak HTTP and Prometheus text
// only, and import no sluice package outside load/ but the module's small
// internal utilities (atomic file writes, the chart kit, the metric names
// and the Prometheus text rule), which import nothing of sluice's public
// packages either.
func TestImportsNoSluicePackage(t *testing.T) {
	const module = "github.com/sluicehq/sluice"
	internalOK := map[string]string{
		module + "/internal/atomicfile": "../internal/atomicfile",
		module + "/internal/chart":      "../internal/chart",
		module + "/internal/metricname": "../internal/metricname",
		module + "/internal/promtext":   "../internal/promtext",
	}
	files, err := filepath.Glob("*.go")
	sub, _ := filepath.Glob("*/*.go")
	deeper, _ := filepath.Glob("*/*/*.go")
	files = append(append(files, sub...), deeper...)
	for _, dir := range internalOK {
		in, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		files = append(files, in...)
	}
	if err != nil || len(files) == 0 {
		t.Fatalf("glob: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"/load") && internalOK[p] == "" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
