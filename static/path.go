package static

import (
	"net/url"
	"path"
	"strings"
	"unicode/utf8"
)

// pathVerdict is what resolvePath decided about a URL path.
type pathVerdict uint8

const (
	pathOK       pathVerdict = iota // serve name
	pathBad                         // 400: "..", NUL, backslash, not absolute
	pathNonCanon                    // 301 to the cleaned path ("//", "/./")
	pathHidden                      // 404: a dotfile while dotfiles are hidden (outranks pathNonCanon)
)

// resolvePath maps a URL path, already percent-decoded by net/http (so
// "%2e%2e" arrives as ".." and "%2f" as "/"), to a name for an fs.FS:
// no leading slash, "." for the root, never "..", never empty elements.
// dirSlash reports a trailing slash (the client asked for a directory).
//
// Names it returns satisfy fs.ValidPath; os.Root then enforces the root
// again at open time, including for symbolic links, so this function is
// the first of two walls, not the only one. On the hot path (a canonical
// path) it allocates nothing: name is a substring of p.
func resolvePath(p string, dotfiles bool) (name string, dirSlash bool, v pathVerdict) {
	if p == "" || p[0] != '/' || strings.IndexByte(p, 0) >= 0 || strings.IndexByte(p, '\\') >= 0 || !utf8.ValidString(p) {
		return "", false, pathBad
	}
	rest := p[1:]
	dirSlash = rest != "" && rest[len(rest)-1] == '/'
	if dirSlash {
		rest = rest[:len(rest)-1]
	}
	if rest == "" {
		return ".", true, verdictFor(p == "/") // the root is always a directory URL
	}
	v = pathOK
	for seg := range strings.SplitSeq(rest, "/") {
		switch {
		case seg == "..":
			return "", false, pathBad
		case seg == "" || seg == ".":
			v = max(v, pathNonCanon)
		case seg[0] == '.' && !dotfiles:
			v = max(v, pathHidden)
		}
	}
	if v != pathOK { // never redirect to a hidden name: hidden outranks non-canonical
		return "", dirSlash, v
	}
	return rest, dirSlash, pathOK
}

func verdictFor(canonical bool) pathVerdict {
	if canonical {
		return pathOK
	}
	return pathNonCanon
}

// canonicalURL is the cleaned form of a non-canonical path, with its
// trailing slash kept and the query appended, escaped for a Location
// header. path.Clean never yields "//" at the start, so the result cannot
// be read as a scheme-relative URL pointing at another host.
func canonicalURL(p, rawQuery string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return locationFor(c, rawQuery)
}

// locationFor escapes an absolute path for a Location header.
func locationFor(p, rawQuery string) string {
	loc := (&url.URL{Path: p}).EscapedPath()
	if strings.HasPrefix(loc, "//") { // defence in depth: never scheme-relative
		loc = "/" + strings.TrimLeft(loc, "/")
	}
	if rawQuery != "" {
		loc += "?" + rawQuery
	}
	return loc
}
