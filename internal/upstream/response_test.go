package upstream

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/hfield"
)

// FuzzParseResponse: an answer's head read into a list is the head read
// into a Header: refused by both or by neither, and when read, the same
// status and the same fields (the list, turned into a Header, equal to
// the one parsed), with no Header beside the list.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nx-a: 1\r\nX-A: 2\r\nx-B:3\r\n\r\n",
		"HTTP/1.0 404\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX A: a\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-A: \x01\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" + string(bytes.Repeat([]byte("X-Many: v\r\n"), 20)) + "\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The client parses a head only up to its first empty line.
		if i := bytes.Index(b, []byte("\r\n\r\n")); i < 0 || i+4 != len(b) {
			return
		}
		am, errMap := parseResponse(b, nil)
		var l hfield.List
		l.Add("Stale", "from an earlier answer")
		al, errList := parseResponse(b, &l)
		if (errMap == nil) != (errList == nil) {
			t.Fatalf("%q: into a Header err %v, into a list err %v", b, errMap, errList)
		}
		if errMap != nil {
			return
		}
		if al.resp.Header != nil {
			t.Fatalf("%q: a Header %v beside the list", b, al.resp.Header)
		}
		if am.resp.StatusCode != al.resp.StatusCode || am.resp.Status != al.resp.Status || am.resp.ProtoMinor != al.resp.ProtoMinor {
			t.Fatalf("%q: status %q against %q", b, am.resp.Status, al.resp.Status)
		}
		if got := l.Header(); !reflect.DeepEqual(got, am.resp.Header) {
			t.Fatalf("%q: the list is %v, the Header %v", b, got, am.resp.Header)
		}
	})
}
