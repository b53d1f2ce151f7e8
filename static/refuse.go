package static

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/admit"
)

// writeRefusal answers a gate refusal following the sluice HTTP contract:
// 503, Retry-After, JSON {"error":"BUSY","gate":...,"reason":...}.
// TODO(httpgate): swap for httpgate's writer once that package lands.
func writeRefusal(w http.ResponseWriter, err error) {
	var re *admit.RejectedError
	if !errors.As(err, &re) {
		http.Error(w, "500 internal server error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", strconv.Itoa(re.RetryAfterSeconds()))
	if re.Reason == admit.ReasonClosed {
		h.Set("Connection", "close")
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	// Gate names and reasons are labels ([A-Za-z0-9_.-]): no escaping needed.
	w.Write([]byte(`{"error":"BUSY","gate":"` + re.Gate + `","reason":"` + re.Reason.String() + `"}` + "\n"))
}
