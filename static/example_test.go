package static_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/static"
)

// A cache hit is served while the only disk slot is taken; a cold file
// is refused with 503.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "static-example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hot.txt"), []byte("from memory\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cold.txt"), []byte("from disk\n"), 0o644)

	h, err := static.New(static.Config{Root: dir, WorkLimit: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}

	get("/hot.txt") // read from disk once (one slot, released), now cached
	p, _ := h.Gate().TryAcquireFor(admit.Request{Kind: h.Gate().Kind("read")})
	get("/hot.txt")  // a hit: no slot needed
	get("/cold.txt") // needs the slot that is held
	p.Done(admit.OutcomeOK)
	get("/cold.txt")
	// Output:
	// /hot.txt 200 from memory
	// /hot.txt 200 from memory
	// /cold.txt 503 {"error":"BUSY","gate":"disk","reason":"full"}
	// /cold.txt 200 from disk
}
