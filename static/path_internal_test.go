package static

import (
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

func TestResolvePath(t *testing.T) {
	cases := []struct {
		in       string
		dotfiles bool
		name     string
		dirSlash bool
		v        pathVerdict
	}{
		{"/", false, ".", true, pathOK},
		{"/a.txt", false, "a.txt", false, pathOK},
		{"/a/b/", false, "a/b", true, pathOK},
		{"", false, "", false, pathBad},
		{"a.txt", false, "", false, pathBad},
		{"/../a", false, "", false, pathBad},
		{"/a/..", false, "", false, pathBad},
		{"/a\\b", false, "", false, pathBad},
		{"/a\x00", false, "", false, pathBad},
		{"//", false, ".", true, pathNonCanon},
		{"//a", false, "", false, pathNonCanon},
		{"/a//b/", false, "", true, pathNonCanon},
		{"/./a", false, "", false, pathNonCanon},
		{"/.a", false, "", false, pathHidden},
		{"/.a", true, ".a", false, pathOK},
		{"//.a", false, "", false, pathHidden}, // hidden outranks non-canonical: no redirect to a dotfile
		{"/.a/../b", true, "", false, pathBad},
	}
	for _, c := range cases {
		name, dirSlash, v := resolvePath(c.in, c.dotfiles)
		if name != c.name || dirSlash != c.dirSlash || v != c.v {
			t.Errorf("resolvePath(%q, %v) = %q, %v, %d; want %q, %v, %d", c.in, c.dotfiles, name, dirSlash, v, c.name, c.dirSlash, c.v)
		}
	}
}

func TestCanonicalURL(t *testing.T) {
	for in, want := range map[string]string{
		"//a":         "/a",
		"//a/":        "/a/",
		"/./a//b/":    "/a/b/",
		"//":          "/",
		"///evil.com": "/evil.com",
		"/a b//":      "/a%20b/",
		"/%//":        "/%25/",
	} {
		if got := canonicalURL(in, ""); got != want {
			t.Errorf("canonicalURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := canonicalURL("//a", "x=1"); got != "/a?x=1" {
		t.Errorf("query: %q", got)
	}
}

// FuzzResolvePath checks the properties the handler relies on: an accepted
// name is valid for io/fs (no "..", no empty element, no leading slash),
// carries no NUL or backslash, hides dotfiles unless asked, and the
// redirect for a non-canonical path leads to a path that resolves without
// another redirect.
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"/", "/a", "//a", "/./a", "/../a", "/.a", "/a/", "/a\\b", "/a\x00", "///", "/a/./b/../c", "/.", "/.."} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, p string, dotfiles bool) {
		name, _, v := resolvePath(p, dotfiles)
		switch v {
		case pathOK:
			if !fs.ValidPath(name) || strings.ContainsAny(name, "\x00\\") {
				t.Fatalf("resolvePath(%q) accepted invalid name %q", p, name)
			}
			if !dotfiles {
				for _, seg := range strings.Split(name, "/") {
					if strings.HasPrefix(seg, ".") && seg != "." {
						t.Fatalf("resolvePath(%q) accepted hidden name %q", p, name)
					}
				}
			}
		case pathNonCanon:
			loc := canonicalURL(p, "")
			if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
				t.Fatalf("canonicalURL(%q) = %q leaves the site", p, loc)
			}
			u, err := url.Parse(loc)
			if err != nil {
				t.Fatalf("canonicalURL(%q) = %q does not parse: %v", p, loc, err)
			}
			if _, _, v2 := resolvePath(u.Path, dotfiles); v2 != pathOK {
				t.Fatalf("redirect target %q of %q resolves to verdict %d, want OK", u.Path, p, v2)
			}
		case pathBad, pathHidden:
		default:
			t.Fatalf("unknown verdict %d", v)
		}
	})
}
