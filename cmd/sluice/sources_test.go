package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// currentSources hashes the gate and driver sources in the working tree.
func currentSources(t *testing.T) string {
	t.Helper()
	var lines []string
	for _, pkg := range sourcePackages {
		files, err := filepath.Glob(filepath.Join("..", "..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no sources in %s: %v", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			lines = append(lines, hex.EncodeToString(sum[:])+"  "+pkg+"/"+filepath.Base(f))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestSourceHashesAreCurrent keeps the embedded source hashes honest: a
// change to a gate or to the driver must come with new hashes, or a
// release report would name code it did not run.
func TestSourceHashesAreCurrent(t *testing.T) {
	want := currentSources(t)
	if os.Getenv("SLUICE_UPDATE_SOURCES") == "1" {
		if err := os.WriteFile("sources.sha256", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if sourcesFile != want {
		t.Fatalf("cmd/sluice/sources.sha256 is stale; run: SLUICE_UPDATE_SOURCES=1 go test ./cmd/sluice -run TestSourceHashesAreCurrent\nwant:\n%s", want)
	}
	if fs := sourceFiles(); len(fs) < 10 || fs[0].Path == "" || len(fs[0].SHA256) != 64 {
		t.Errorf("parsed %d source files: %+v", len(fs), fs)
	}
}
