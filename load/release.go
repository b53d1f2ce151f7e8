package load

import (
	"encoding/hex"
	"fmt"
)

// SourceFile is one source file that defines what a report measured (a
// gate, the driver), by path from the module root and SHA-256.
type SourceFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// ReleaseReasons lists why r cannot back a release, from the report's own
// fields; empty means release-qualified. A release-qualified report names
// exactly what produced it: a known VCS revision of a clean tree, the
// binary's hash, the profile's hash, and the hashes of the source files
// that define the gates and the driver.
func ReleaseReasons(r *Report) []string {
	out := []string{}
	if r.Tool.Revision == "" {
		out = append(out, "no VCS revision (build from a git checkout)")
	}
	if r.Tool.Dirty {
		out = append(out, "built from a dirty tree (uncommitted changes)")
	}
	if !isSHA256(r.BinarySHA256) {
		out = append(out, "no binary hash")
	}
	if r.Profile == nil {
		out = append(out, "no profile")
	} else if !isSHA256(r.Profile.SHA256) {
		out = append(out, "no profile hash")
	}
	if len(r.SourceFiles) == 0 {
		out = append(out, "no source file hashes")
	}
	for _, f := range r.SourceFiles {
		if f.Path == "" || !isSHA256(f.SHA256) {
			out = append(out, fmt.Sprintf("source file %q has no valid hash", f.Path))
			break
		}
	}
	return out
}

// qualify sets r's release fields from its provenance.
func qualify(r *Report) {
	r.ReleaseReasons = ReleaseReasons(r)
	r.ReleaseQualified = len(r.ReleaseReasons) == 0
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}
