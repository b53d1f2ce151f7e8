package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestKeepAliveGETOutlivesSendTimeout: a bodiless request arms only the
// send timeout; it must be cleared too when the request ends, or the next
// request on the keep-alive connection inherits a deadline already past
// and its answer (here a quota refusal, written without the proxy's
// deadline writer) is never sent.
func TestKeepAliveGETOutlivesSendTimeout(t *testing.T) {
	up := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	p := mustNew(t, Config{Upstreams: []*url.URL{up}, SendTimeout: 50 * time.Millisecond, BodyTimeout: -1,
		Routes: []Route{{Name: "q", Quota: &RouteQuota{Rate: 0.001, Burst: 2}}}})
	base, _ := front(t, p)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, want := range []int{200, 200, 429} {
		if i > 0 {
			time.Sleep(150 * time.Millisecond) // past the send timeout of the request before
		}
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the same connection: %v", i, err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
}
