package httpgate_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// A handler that takes a disk slot only when it must read the disk: the
// cache hit is served while every slot is busy, the miss is refused.
func ExampleAcquire() {
	disk, _ := admit.New(admit.Config{Name: "disk", Capacity: 1})
	mw, _ := httpgate.New(httpgate.Config{})
	cache := map[string]string{"/hot": "from memory"}

	srv := httptest.NewServer(mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if data, ok := cache[r.URL.Path]; ok {
			io.WriteString(w, data) // no slot taken, nothing to release
			return
		}
		if _, err := httpgate.Acquire(r.Context(), disk); err != nil {
			httpgate.Refuse(w, r, err)
			return
		}
		io.WriteString(w, "from disk") // the slot is released when the handler returns
	})))
	defer srv.Close()

	busy, _ := disk.TryAcquire() // someone else is reading
	for _, path := range []string{"/hot", "/cold"} {
		resp, _ := http.Get(srv.URL + path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %s\n", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	busy.Done(admit.OutcomeOK)
	// Output:
	// /hot 200 from memory
	// /cold 503 {"error":"BUSY","gate":"disk","reason":"full"}
}

// Guard gates a whole handler, for work whose cost is the request.
func ExampleMiddleware_Guard() {
	work, _ := admit.New(admit.Config{Name: "work", Capacity: 1})
	work.Close() // shutting down: everything is refused with reason closed
	mw, _ := httpgate.New(httpgate.Config{})
	srv := httptest.NewServer(mw.Guard(work, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "done")
	})))
	defer srv.Close()

	resp, _ := http.Get(srv.URL)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"), "close:", resp.Close)
	fmt.Print(string(body))
	// Output:
	// 503 1 close: true
	// {"error":"BUSY","gate":"work","reason":"closed"}
}
