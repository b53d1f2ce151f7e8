package static

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

const (
	// MaxRanges is the most byte ranges a request may ask for (nginx's
	// max_ranges idea). A request with more is answered as if it had no
	// Range header: the whole file, once.
	MaxRanges = 16
)

// limitRanges keeps a Range request from costing much more than the
// file: the reply is at most the file plus MaxRanges part headers (about
// 200 bytes each). It drops the Range header, so that the whole file is
// sent once, when the request asks for more than MaxRanges ranges or for
// more bytes than the file has (overlapping ranges). It answers a set of
// zero-length suffixes ("bytes=-0", which net/http would answer with the
// empty range "bytes size-(size-1)") with 416 itself and reports true, and
// removes such suffixes from a set that has satisfiable ranges. Anything it cannot parse is left to
// http.ServeContent, which owns the rest of the rules (RFC 9110 §14).
func limitRanges(w http.ResponseWriter, r *http.Request, size int64, ctype string) bool {
	vals := r.Header["Range"]
	if len(vals) != 1 || !strings.HasPrefix(vals[0], "bytes=") {
		return false
	}
	var n, satisfiable, zeroSuffix int
	var total int64
	for spec := range strings.SplitSeq(vals[0][len("bytes="):], ",") {
		spec = textproto.TrimString(spec)
		if spec == "" {
			continue
		}
		n++
		if n > MaxRanges {
			delete(r.Header, "Range")
			return false
		}
		length, ok, valid := rangeLength(spec, size)
		switch {
		case !valid:
			return false
		case ok:
			satisfiable++
			total += length
		case strings.HasPrefix(spec, "-"):
			zeroSuffix++
		}
	}
	switch {
	case n == 0:
		return false
	case satisfiable == 0 && zeroSuffix > 0:
		// net/http would answer "bytes=-0" with an empty 206.
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		http.Error(w, "invalid range: failed to overlap", http.StatusRequestedRangeNotSatisfiable)
		return true
	case satisfiable == 0:
		return false // ServeContent answers 416
	case n > 1 && total > size:
		// Overlapping ranges would send parts of the file more than once.
		delete(r.Header, "Range")
	case zeroSuffix > 0:
		r.Header["Range"] = []string{withoutEmptySuffixes(vals[0])}
	}
	return false
}

// rangeLength returns the bytes a range spec ("a-b", "a-", "-n") selects
// in a file of the given size; ok is false when it selects none; valid is
// false when the spec is malformed.
func rangeLength(spec string, size int64) (length int64, ok, valid bool) {
	i := strings.IndexByte(spec, '-')
	if i < 0 {
		return 0, false, false
	}
	first, last := textproto.TrimString(spec[:i]), textproto.TrimString(spec[i+1:])
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return 0, false, false
		}
		n = min(n, size)
		return n, n > 0, true
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return 0, false, false
	}
	if a >= size {
		return 0, false, true
	}
	if last == "" {
		return size - a, true, true
	}
	b, err := strconv.ParseInt(last, 10, 64)
	if err != nil || b < a {
		return 0, false, false
	}
	return min(b, size-1) - a + 1, true, true
}

// withoutEmptySuffixes rewrites a Range header without its zero-length
// suffix specs ("-0").
func withoutEmptySuffixes(v string) string {
	var kept []string
	for spec := range strings.SplitSeq(v[len("bytes="):], ",") {
		spec = textproto.TrimString(spec)
		if spec == "" {
			continue
		}
		if strings.HasPrefix(spec, "-") {
			if n, err := strconv.ParseInt(textproto.TrimString(spec[1:]), 10, 64); err == nil && n == 0 {
				continue
			}
		}
		kept = append(kept, spec)
	}
	return "bytes=" + strings.Join(kept, ",")
}
