package httpgate

import (
	"io"
	"net/http"
)

// statusWriter records the status a handler answers with, so the holder
// can tell a 5xx from a success. It forwards the optional interfaces that
// matter for serving (Flush, ReadFrom for sendfile) and unwraps for
// http.ResponseController.
type statusWriter struct {
	rw     http.ResponseWriter
	status int
}

func (w *statusWriter) Header() http.Header { return w.rw.Header() }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.rw.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.rw.Write(b)
}

// ReadFrom lets io.Copy reach the underlying writer's ReadFrom (sendfile
// on HTTP/1.1 connections).
func (w *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.rw.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{w.rw}, src)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError flushes like http.ResponseController.Flush does.
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.rw).Flush()
}

// Unwrap returns the ResponseWriter the holder wraps, for
// http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.rw }

// writerOnly hides every method but Write, so io.Copy does not loop back
// into ReadFrom.
type writerOnly struct{ io.Writer }
