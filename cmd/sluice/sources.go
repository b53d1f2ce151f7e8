package main

import (
	_ "embed"
	"strings"

	"github.com/sluicehq/sluice/load"
)

// sourcesFile holds the SHA-256 of every non-test Go file of the packages
// that define the gates (admit, httpgate, connlimit) and the driver (load),
// in sha256sum format. A binary cannot read its own sources, so the hashes
// are committed beside it and embedded; TestSourceHashesAreCurrent fails
// when they are stale (SLUICE_UPDATE_SOURCES=1 go test ./cmd/sluice -run
// TestSourceHashesAreCurrent rewrites them). With a clean tree at a known
// revision they therefore name exactly the code a report measured.
//
//go:embed sources.sha256
var sourcesFile string

// sourcePackages are the folders whose sources a report records.
var sourcePackages = []string{"admit", "httpgate", "connlimit", "load"}

// sourceFiles parses sourcesFile.
func sourceFiles() []load.SourceFile {
	var out []load.SourceFile
	for _, line := range strings.Split(sourcesFile, "\n") {
		sum, path, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			continue
		}
		out = append(out, load.SourceFile{Path: path, SHA256: sum})
	}
	return out
}
