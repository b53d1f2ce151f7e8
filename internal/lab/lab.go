package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/httpgate"
)

// Defaults used for zero Config fields.
const (
	DefaultSlots     = 1
	DefaultHoldLimit = 30 * time.Second
	// GateName is the name of the lab's gate in metrics and logs.
	GateName = "lab"
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("lab: invalid config")

// Config configures a Lab. The zero Config is the classic lab: one slot,
// a 30 s hold limit, no logging.
type Config struct {
	// Slots is the number of business slots. Zero means DefaultSlots;
	// negative or above admit.MaxCapacity is an error.
	Slots int

	// HoldLimit bounds how long /work holds its slot waiting for
	// /release. Zero means DefaultHoldLimit; negative is an error.
	HoldLimit time.Duration

	// Observer, if not nil, sees the gate's decisions and completions
	// (for metrics).
	Observer admit.Observer

	// Logger receives a record per release and per expired hold. Nil
	// means silent.
	Logger *slog.Logger
}

// A Lab is the lab server's state and handler. It is safe for concurrent
// use.
type Lab struct {
	gate      *admit.Gate
	handler   http.Handler
	holdLimit time.Duration
	logger    *slog.Logger

	released    chan struct{} // closed by the first /release
	releaseOnce sync.Once
	closed      chan struct{} // closed by Close
	closeOnce   sync.Once
}

// State is what GET /state reports.
type State struct {
	Active    int64  `json:"active"`    // slots held now
	Admitted  uint64 `json:"admitted"`  // /work requests that got a slot
	Rejected  uint64 `json:"rejected"`  // /work requests refused
	Completed uint64 `json:"completed"` // admitted /work requests whose business step ended
}

// New returns a Lab for cfg, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Lab, error) {
	slots := cfg.Slots
	switch {
	case slots == 0:
		slots = DefaultSlots
	case slots < 0 || slots > admit.MaxCapacity:
		return nil, fmt.Errorf("%w: slots %d outside 1..%d", ErrInvalidConfig, slots, admit.MaxCapacity)
	}
	hold := cfg.HoldLimit
	switch {
	case hold == 0:
		hold = DefaultHoldLimit
	case hold < 0:
		return nil, fmt.Errorf("%w: negative hold limit %v", ErrInvalidConfig, hold)
	}
	g, err := admit.New(admit.Config{Name: GateName, Capacity: int64(slots), Kinds: []string{"work"}, Observer: cfg.Observer})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	mw, err := httpgate.New(httpgate.Config{Refusal: writeBusy, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	l := &Lab{
		gate:      g,
		holdLimit: hold,
		logger:    cfg.Logger,
		released:  make(chan struct{}),
		closed:    make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.Handle("GET /work", mw.Guard(g, http.HandlerFunc(l.work)))
	mux.HandleFunc("POST /release", l.release)
	mux.HandleFunc("GET /state", l.state)
	l.handler = mux
	return l, nil
}

// Handler returns the lab's HTTP handler (/work, /release, /state).
func (l *Lab) Handler() http.Handler { return l.handler }

// Gate returns the gate that holds the business slots.
func (l *Lab) Gate() *admit.Gate { return l.gate }

// State returns the lab's counters.
func (l *Lab) State() State {
	s := l.gate.Stats()
	return State{
		Active:    s.Inflight,
		Admitted:  s.Admitted,
		Rejected:  s.Rejected.Total(),
		Completed: s.Completed.Total(),
	}
}

// Close is for shutdown: it closes the gate, so new /work is refused, and
// ends every held /work with 503 {"error":"LAB_CLOSED"}, releasing its
// slot. It is idempotent.
func (l *Lab) Close() {
	l.closeOnce.Do(func() {
		l.gate.Close()
		close(l.closed)
	})
}

// work holds the slot Guard took until the latch opens, the hold limit
// passes, the client leaves or the lab closes. Guard releases the slot
// when it returns, whichever way.
func (l *Lab) work(w http.ResponseWriter, r *http.Request) {
	t := time.NewTimer(l.holdLimit)
	defer t.Stop()
	select {
	case <-l.released:
		writeJSON(w, http.StatusOK, `{"result":"done"}`)
	case <-t.C:
		if l.logger != nil {
			l.logger.Info("lab: hold limit passed; slot released", slog.Duration("hold_limit", l.holdLimit))
		}
		writeJSON(w, http.StatusGatewayTimeout, `{"error":"LAB_WAIT_EXPIRED"}`)
	case <-l.closed:
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"LAB_CLOSED"}`)
	case <-r.Context().Done():
		// The client is gone; nothing to write. Guard records canceled.
	}
}

func (l *Lab) release(w http.ResponseWriter, r *http.Request) {
	first := false
	l.releaseOnce.Do(func() {
		close(l.released)
		first = true
	})
	if first && l.logger != nil {
		l.logger.Info("lab: latch released", slog.Int64("active", l.gate.Stats().Inflight))
	}
	writeJSON(w, http.StatusOK, `{"released":true}`)
}

func (l *Lab) state(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(l.State())
	if err != nil { // a struct of integers always marshals
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, string(b))
}

// writeBusy is the lab's refusal writer: the exact answer, 503,
// Retry-After: 1 and {"error":"BUSY"}, whatever the reason (a closed gate
// adds Connection: close).
func writeBusy(w http.ResponseWriter, _ *http.Request, err error) {
	var re *admit.RejectedError
	if errors.As(err, &re) && re.Reason() == admit.ReasonClosed {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, `{"error":"BUSY"}`)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n"))
}
