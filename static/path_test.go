package static_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/static"
)

const secret = "SECRET-OUTSIDE-THE-ROOT"

// escapeTree builds base/outside.txt (the secret) and base/root with
// symbolic links that point out of the root and one that stays inside.
func escapeTree(t testing.TB) (root string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	for name, content := range map[string]string{
		"outside.txt":          secret,
		"root/a.txt":           "inside",
		"root/sub/b.txt":       "inside b",
		"root/.env":            "dot",
		"root/.git/config":     "git",
		"root/sub/.hidden.txt": "hidden",
	} {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"escape":       "../outside.txt",
		"escapedir":    "..",
		"absolute":     filepath.Join(base, "outside.txt"),
		"inlink.txt":   "a.txt",
		"sub/uplink":   "../a.txt",
		"sub/deep.txt": "../../outside.txt",
	} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(link))); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	return root
}

func TestNoPathEscapesTheRoot(t *testing.T) {
	root := escapeTree(t)
	s := serveDir(t, root, static.Config{})
	cases := []struct {
		target string
		want   int
	}{
		{"/a.txt", 200},
		{"/inlink.txt", 200}, // a link inside the root is followed
		{"/sub/uplink", 200}, // also when it climbs, while it stays inside
		{"/escape", 404},     // a link out of the root
		{"/escapedir/outside.txt", 404},
		{"/absolute", 404},
		{"/sub/deep.txt", 404},
		{"/../outside.txt", 400},
		{"/sub/../../outside.txt", 400},
		{"/%2e%2e/outside.txt", 400},
		{"/%2E%2E/outside.txt", 400},
		{"/.%2e/outside.txt", 400},
		{"/%2e%2e%2foutside.txt", 400},
		{"/sub/..%2f..%2foutside.txt", 400},
		{"/..%5coutside.txt", 400},
		{"/..\\outside.txt", 400},
		{"/a.txt%00.html", 400},
		{"http://x/../outside.txt", 400},
		{"//outside.txt", 301},
		{"/%2foutside.txt", 301},
		{"/.env", 404},
		{"/.git/config", 404},
		{"/%2egit/config", 404},
		{"/sub/.hidden.txt", 404},
		{"/.git/", 404},
	}
	for _, c := range cases {
		r := s.raw(t, c.target)
		if r.status != c.want {
			t.Errorf("GET %s: %d, want %d", c.target, r.status, c.want)
		}
		if strings.Contains(r.body, secret) {
			t.Errorf("GET %s leaked the file outside the root", c.target)
		}
		if loc := r.header.Get("Location"); loc != "" && (!strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//")) {
			t.Errorf("GET %s: redirect to %q leaves the site", c.target, loc)
		}
	}
	if s.h.Gate().Stats().Admitted != 3 {
		t.Errorf("disk reads: %d, want 3 (the three files inside)", s.h.Gate().Stats().Admitted)
	}
}

func TestDotfilesEnabled(t *testing.T) {
	root := escapeTree(t)
	s := serveDir(t, root, static.Config{Dotfiles: true})
	for target, body := range map[string]string{"/.env": "dot", "/.git/config": "git", "/sub/.hidden.txt": "hidden"} {
		if r := s.get(t, target); r.status != 200 || r.body != body {
			t.Errorf("GET %s with dotfiles: %d %q", target, r.status, r.body)
		}
	}
	if r := s.raw(t, "/.%2e/outside.txt"); r.status != 400 {
		t.Errorf("dotfiles do not allow '..': %d", r.status)
	}
}

// FuzzServePath sends arbitrary decoded paths straight to the handler (no
// client or ServeMux cleaning in between) and checks that nothing outside
// the root is served, nothing hidden is served, redirects stay on the site
// and no request fails with a 5xx.
func FuzzServePath(f *testing.F) {
	for _, seed := range []string{
		"/", "/a.txt", "/../outside.txt", "/escape", "/sub/deep.txt", "//x", "/./a.txt", "/.env",
		"/sub/../a.txt", "/a.txt/", "/sub", "\\..\\outside.txt", "/\x00", "", "a.txt", "/sub//b.txt",
		"/..", "/.", "/escapedir/root/a.txt", "/%2e%2e", "/\xff", "/sub/./../..",
	} {
		f.Add(seed)
	}
	root := escapeTree(f)
	h, err := static.New(static.Config{Root: root})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	f.Fuzz(func(t *testing.T, p string) {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/", nil)
		req.URL.Path = p
		req.URL.RawPath = ""
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		switch {
		case strings.Contains(body, secret):
			t.Fatalf("path %q leaked the file outside the root", p)
		case body == "dot" || body == "git" || body == "hidden":
			t.Fatalf("path %q served a dotfile", p)
		case rec.Code >= 500:
			t.Fatalf("path %q: status %d", p, rec.Code)
		}
		if loc := rec.Header().Get("Location"); loc != "" && (!strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//")) {
			t.Fatalf("path %q: redirect to %q leaves the site", p, loc)
		}
	})
}
