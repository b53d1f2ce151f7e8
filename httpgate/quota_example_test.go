package httpgate_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice/httpgate"
	"github.com/sluicehq/sluice/quota"
)

// A per-API-key quota in front of a handler: the third request within a
// second is answered 429 with Retry-After and the rate-limit headers.
func ExampleQuota() {
	q, _ := quota.New(quota.Config{Name: "per-client", Rate: 1, Burst: 2})
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	h, _ := httpgate.Quota(httpgate.QuotaConfig{Limiter: q, Key: httpgate.KeyHeader("X-Api-Key")}, hello)
	for range 3 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Api-Key", "alice")
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit"))
	}
	// Output:
	// 200  "per-client";r=1;t=1
	// 200  "per-client";r=0;t=2
	// 429 1 "per-client";r=0;t=1
}
