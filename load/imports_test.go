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
// internal utilities (atomic file writes, the chart kit), which import
// nothing of sluice.
func TestImportsNoSluicePackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	sub, _ := filepath.Glob("*/*.go")
	deeper, _ := filepath.Glob("*/*/*.go")
	files = append(append(files, sub...), deeper...)
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
			if p := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(p, "github.com/sluicehq/sluice") && !strings.HasPrefix(p, "github.com/sluicehq/sluice/load") &&
				p != "github.com/sluicehq/sluice/internal/atomicfile" && p != "github.com/sluicehq/sluice/internal/chart" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
