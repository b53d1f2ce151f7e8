package httpgate_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

func TestWriteRefusal(t *testing.T) {
	tests := []struct {
		reason     admit.Reason
		retry      time.Duration
		wantStatus int
		wantCode   string
		wantRetry  string
		wantClose  bool
	}{
		{admit.ReasonFull, time.Second, 503, "BUSY", "1", false},
		{admit.ReasonQueueFull, 3 * time.Second, 503, "BUSY", "3", false},
		{admit.ReasonWaitTimeout, 2500 * time.Millisecond, 503, "BUSY", "3", false},
		{admit.ReasonDeadline, 0, 503, "BUSY", "1", false},
		{admit.ReasonShed, time.Second, 503, "BUSY", "1", false},
		{admit.ReasonBreakerOpen, 10 * time.Second, 503, "BUSY", "10", false},
		{admit.ReasonCanceled, time.Second, 503, "BUSY", "1", false},
		{admit.ReasonClosed, time.Second, 503, "BUSY", "1", true},
		{admit.ReasonRate, 7 * time.Second, 429, "RATE_LIMITED", "7", false},
	}
	for _, tt := range tests {
		t.Run(tt.reason.String(), func(t *testing.T) {
			rec := httptest.NewRecorder()
			err := error(admit.NewRejectedError("disk", "read", tt.reason, 0, 0, tt.retry))
			httpgate.WriteRefusal(rec, httptest.NewRequest("GET", "/", nil), err)
			if rec.Code != tt.wantStatus || rec.Code != httpgate.Status(tt.reason) {
				t.Errorf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			h := rec.Header()
			if h.Get("Retry-After") != tt.wantRetry || h.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", h)
			}
			if (h.Get("Connection") == "close") != tt.wantClose {
				t.Errorf("Connection = %q", h.Get("Connection"))
			}
			if h.Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
				t.Errorf("Content-Length %q for %d bytes", h.Get("Content-Length"), rec.Body.Len())
			}
			var b refusalBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
				t.Fatal(err)
			}
			if b != (refusalBody{tt.wantCode, "disk", tt.reason.String()}) {
				t.Errorf("body %+v", b)
			}
		})
	}
}

func TestWriteRefusalOtherErrors(t *testing.T) {
	for _, err := range []error{httpgate.ErrNoHolder, httpgate.ErrHandlerDone, errors.New("x")} {
		rec := httptest.NewRecorder()
		httpgate.WriteRefusal(rec, httptest.NewRequest("GET", "/", nil), err)
		var b refusalBody
		if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &b) != nil || b.Error != "INTERNAL" {
			t.Errorf("%v: %d %q", err, rec.Code, rec.Body)
		}
	}
}

// TestRefuseOutsideMiddleware falls back to WriteRefusal.
func TestRefuseOutsideMiddleware(t *testing.T) {
	rec := httptest.NewRecorder()
	httpgate.Refuse(rec, httptest.NewRequest("GET", "/", nil), admit.NewRejectedError("g", "default", admit.ReasonFull, 0, 0, 0))
	if rec.Code != 503 {
		t.Errorf("status %d", rec.Code)
	}
}

// TestWriterForwardsFlushAndReadFrom: the status-recording wrapper keeps
// streaming and sendfile paths working and unwraps for
// http.ResponseController.
func TestWriterForwardsFlushAndReadFrom(t *testing.T) {
	mw := newMW(t, httpgate.Config{})
	ts := serve(t, "http1", mw.Lazy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("wrapper is not a Flusher")
		}
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController does not reach the connection: %v", err)
		}
		w.(http.Flusher).Flush()
		if _, ok := w.(io.ReaderFrom); !ok {
			t.Error("wrapper is not an io.ReaderFrom: sendfile would be lost")
		}
		_, _ = copyString(w, "streamed")
	})))
	resp, body, err := get(t, t.Context(), ts, "/")
	if err != nil || resp.StatusCode != 200 || string(body) != "streamed" {
		t.Fatalf("%v %v %q", resp, err, body)
	}
}
