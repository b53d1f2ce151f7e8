package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of the durations a route rule may set (max_wait, slo): shorter is
// a unit typo ("1ns" for "1s"), longer is a request nobody waits for.
const (
	minRuleDuration = time.Millisecond
	maxRuleDuration = 10 * time.Minute
)

// utf8BOM is what some editors put before a UTF-8 file's text. ParseRules
// skips it: it carries no meaning and the JSON decoder would refuse it with
// "invalid character 'ï'".
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// CheckUpstream reports why u cannot be an upstream instance (nil: it can): an absolute
// http:// or https:// URL with a host, a port (if any) from 1 to 65535, no
// user information, query or fragment. net/url accepts "http://h:99999";
// the dial would fail on every request.
func CheckUpstream(u *url.URL) error {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return errors.New("want http://host:port or https://host:port")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return errors.New("empty port: want http://host:port")
	}
	return nil
}

// checkRuleDuration refuses a duration outside 0 (unset) or
// [minRuleDuration, maxRuleDuration].
func checkRuleDuration(field string, d time.Duration) error {
	if d != 0 && (d < minRuleDuration || d > maxRuleDuration) {
		return fmt.Errorf("%s %v: want %v to %v", field, d, minRuleDuration, maxRuleDuration)
	}
	return nil
}

// checkPathPrefix refuses what can never be a decoded request path's
// prefix: no leading slash, spaces, a query or fragment marker, control
// characters (a NUL included) and invalid UTF-8.
func checkPathPrefix(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t?#") {
		return fmt.Errorf("path %q: want a path prefix starting with /", p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("path %q: control character %#02x at byte %d", p, c, i)
		}
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("path %q: not valid UTF-8", p)
	}
	return nil
}

// checkMethod refuses a method that is not an HTTP token, and one written
// in lower case: methods are case-sensitive, so "get" would never match a
// GET, and every registered method is upper case.
func checkMethod(m string) error {
	if m == "" || !validMethod(m) {
		return fmt.Errorf("method %q: not an HTTP method token", m)
	}
	if up := strings.ToUpper(m); up != m {
		return fmt.Errorf("method %q: methods are case-sensitive and %q would never match a %s request; write %q", m, m, up, up)
	}
	return nil
}

// shadowedBy returns the index of an earlier route that takes every
// request rt could match (so rt never sees one), or -1. Routes are tried
// in order: a route with the same or a wider host, methods and path prefix
// placed before rt leaves it nothing.
func shadowedBy(routes []Route, j int) int {
	b := routes[j]
	for i := range j {
		a := routes[i]
		if a.Host != "" && !strings.EqualFold(a.Host, b.Host) {
			continue
		}
		if !strings.HasPrefix(b.PathPrefix, a.PathPrefix) {
			continue
		}
		if len(a.Methods) > 0 && (len(b.Methods) == 0 || !subset(b.Methods, a.Methods)) {
			continue
		}
		return i
	}
	return -1
}

func subset(sub, of []string) bool {
	for _, m := range sub {
		found := false
		for _, o := range of {
			found = found || m == o
		}
		if !found {
			return false
		}
	}
	return true
}

// maxKeyDepth bounds the nesting duplicateKey walks; a rules file that
// decoded is far shallower.
const maxKeyDepth = 32

// errDuplicateKey reports an object that names a key twice: encoding/json
// keeps the last value and drops the others silently ({"routes": [...],
// "routes": [...]} would lose the first list).
type errDuplicateKey struct {
	path string // where the object is: "" (the top), "routes[1]", "routes[1].quota"
	key  string
}

func (e *errDuplicateKey) Error() string {
	if e.path == "" {
		return fmt.Sprintf("key %q given twice (JSON would keep only the last)", e.key)
	}
	return fmt.Sprintf("%s: key %q given twice (JSON would keep only the last)", e.path, e.key)
}

// duplicateKey walks the first JSON value of data, already known to
// decode, and returns the first object key given twice, or nil. It reads
// the document with encoding/json's tokenizer: the standard decoder has no
// option to refuse duplicates.
func duplicateKey(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkKeys(dec, "", 0)
}

func walkKeys(dec *json.Decoder, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= maxKeyDepth {
		return errors.New("nested too deeply")
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if seen[key] {
				return &errDuplicateKey{path: path, key: key}
			}
			seen[key] = true
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			if err := walkKeys(dec, sub, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// routeOf returns the index of the route a duplicateKey path lies in
// ("routes[3].quota" -> 3), or -1.
func routeOf(path string) int {
	rest, ok := strings.CutPrefix(path, "routes[")
	if !ok {
		return -1
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return -1
	}
	i, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return i
}
