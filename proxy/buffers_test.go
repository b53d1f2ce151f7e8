package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
)

func TestBufferPoolLendsFullBuffers(t *testing.T) {
	var bp bufferPool
	// Foreign buffers (the ReverseProxy only returns what Get lent, but
	// the interface allows any) must never come back out of Get.
	bp.Put(make([]byte, 10))
	bp.Put(make([]byte, 10, copyBufferSize+1))
	for range 8 {
		b := bp.Get()
		if len(b) != copyBufferSize || cap(b) != copyBufferSize {
			t.Fatalf("Get: len %d cap %d, want %d", len(b), cap(b), copyBufferSize)
		}
		bp.Put(b[:100]) // a resliced lent buffer is still taken back whole
	}
}

// TestConcurrentBodiesNotMixed proxies bodies larger than a copy buffer,
// each distinct, from many clients at once: a pooled buffer lent twice
// at the same time would mix their bytes.
func TestConcurrentBodiesNotMixed(t *testing.T) {
	const size = 3*copyBufferSize + 123
	body := func(id string) []byte { return bytes.Repeat([]byte(id), size/len(id)) }
	u := backend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body(r.URL.Query().Get("id")))
	})
	p := mustNew(t, Config{Upstreams: []*url.URL{u}, MaxInflight: 64})
	base, c := front(t, p)
	var wg sync.WaitGroup
	errs := make(chan error, 16*4)
	for i := range 16 {
		wg.Go(func() {
			for j := range 4 {
				id := fmt.Sprintf("<%02d-%d>", i, j)
				resp, err := c.Get(base + "/?id=" + id)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, body(id)) {
					errs <- fmt.Errorf("client %s: body of %d bytes differs from what the upstream sent", id, len(got))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
