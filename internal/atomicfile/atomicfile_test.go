package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new content")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new content" {
		t.Errorf("content %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	// A folder that does not exist: an error and no file.
	bad := filepath.Join(dir, "missing", "r.json")
	if err := Write(bad, []byte("x")); err == nil {
		t.Error("write into a missing folder succeeded")
	}
	// The target is a folder: rename fails, the temp file is cleaned up and
	// the folder is untouched.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := Write(sub, []byte("x")); err == nil {
		t.Error("overwrote a folder")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left after a failed write", e.Name())
		}
	}
}
