package retry

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every configuration error this package
// returns.
var ErrInvalidConfig = errors.New("retry: invalid config")

// BudgetConfig configures a Budget. The zero value is a valid default:
// retries up to 10 % of requests plus one retry per second, over a 10 s
// window.
type BudgetConfig struct {
	// Ratio is the most retries per original request over the window. 0
	// means 0.1; negative means no retries beyond the floor.
	Ratio float64
	// MinPerSecond is the floor: retries always allowed per second of
	// window, so a client with little traffic can still retry. 0 means 1;
	// negative means no floor.
	MinPerSecond float64
	// Window is how far back requests and retries are counted. 0 means
	// 10 s; negative is an error.
	Window time.Duration
	// Now is the clock; nil means time.Now (which testing/synctest fakes).
	Now func() time.Time
}

// Budget caps retries at a fraction of requests, shared by every request
// of one client (or a whole process: share the *Budget). When an upstream
// fails everywhere at once, each caller's own attempt limit would multiply
// the load by the attempt count; a shared budget lets only Ratio more
// through (plus the floor). Create one with NewBudget; the zero Budget is
// not usable. Safe for concurrent use.
type Budget struct {
	ratio, floor float64
	now          func() time.Time
	w            *window // a = original requests, b = retries
}

// NewBudget returns a Budget, or an error wrapping ErrInvalidConfig.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	if cfg.Window < 0 || cfg.Ratio != cfg.Ratio || cfg.MinPerSecond != cfg.MinPerSecond {
		return nil, fmt.Errorf("%w: budget window %v ratio %v floor %v", ErrInvalidConfig, cfg.Window, cfg.Ratio, cfg.MinPerSecond)
	}
	b := &Budget{ratio: orDefault(cfg.Ratio, 0.1), now: cfg.Now}
	if b.now == nil {
		b.now = time.Now
	}
	span := orDefault(cfg.Window, 10*time.Second)
	b.floor = max(orDefault(cfg.MinPerSecond, 1), 0) * span.Seconds()
	b.ratio = max(b.ratio, 0)
	b.w = newWindow(span, 10, b.now())
	return b, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Request counts one original request (not a retry).
func (b *Budget) Request() { b.requestAt(b.now()) }

func (b *Budget) requestAt(now time.Time) {
	w := b.w
	w.mu.Lock()
	w.roll(now)
	w.b[w.cur].a++
	w.sum.a++
	w.mu.Unlock()
}

// TryRetry takes one retry from the budget and reports whether it could:
// retries in the window stay at most Ratio × requests + the floor.
func (b *Budget) TryRetry() bool { return b.tryRetryAt(b.now()) }

func (b *Budget) tryRetryAt(now time.Time) bool {
	w := b.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	if float64(w.sum.b+1) > b.ratio*float64(w.sum.a)+b.floor {
		return false
	}
	w.b[w.cur].b++
	w.sum.b++
	return true
}

// Counts returns the requests and retries in the window now.
func (b *Budget) Counts() (requests, retries int64) {
	w := b.w
	now := b.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	return w.sum.a, w.sum.b
}
