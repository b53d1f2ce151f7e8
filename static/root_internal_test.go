package static

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHiddenUnder(t *testing.T) {
	for _, c := range []struct {
		root, p string
		hidden  bool
	}{
		{"/srv/www", "/srv/www/a.txt", false},
		{"/srv/www", "/srv/www/docs/a.txt", false},
		{"/srv/www", "/srv/www", false},
		{"/srv/www", "/srv/www/.git/config", true},
		{"/srv/www", "/srv/www/docs/.env", true},
		{"/srv/www", "/srv/wwwx/a.txt", true},
		{"/srv/www", "/etc/passwd", true},
		{"/", "/a/b", false},
		{"/", "/a/.b", true},
	} {
		if got := hiddenUnder(c.root, []byte(c.p)); got != c.hidden {
			t.Errorf("hiddenUnder(%q, %q) = %v, want %v", c.root, c.p, got, c.hidden)
		}
	}
}

// The real path of an open file, read without allocating, is the one
// realPath reads.
func TestAppendRealPathAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, ok := realPath(f)
	if !ok {
		t.Skip("no /proc here")
	}
	var buf [1024]byte
	allocs := testing.AllocsPerRun(100, func() {
		p, ok := appendRealPath(buf[:0], f)
		if !ok || string(p) != want {
			t.Fatalf("appendRealPath = %q, %v; want %q", p, ok, want)
		}
	})
	if allocs != 0 {
		t.Errorf("appendRealPath allocates %v times per call, want 0", allocs)
	}
}
