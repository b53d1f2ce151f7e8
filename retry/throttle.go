package retry

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// ThrottleConfig configures a Throttle. The zero value is a valid default:
// K = 2 over a 10 s window, from 20 requests on.
type ThrottleConfig struct {
	// K is how many requests per accepted one the client may send before it
	// starts refusing locally. 0 means 2; values below 1 (other than 0) are
	// errors: K < 1 refuses work the upstream would take.
	K float64
	// MinRequests is the fewest requests in the window before the throttle
	// refuses anything, so one early refusal does not halve a fresh
	// client's traffic. 0 means 20; negative means none.
	MinRequests int
	// Window is how far back requests and accepts are counted. 0 means
	// 10 s; negative is an error.
	Window time.Duration
	// Now is the clock; nil means time.Now (which testing/synctest fakes).
	Now func() time.Time
	// Rand returns a uniform number in [0, 1) and must be safe for
	// concurrent use; nil means math/rand/v2.
	Rand func() float64
}

// Throttle is client-side adaptive throttling: it refuses requests locally
// with probability max(0, (requests − K·accepts) / (requests + 1)), where
// both counts cover the window and requests include those refused locally
// (and nothing is refused before MinRequests requests are in the window).
//
// A sent request counts once its answer is known (Accepted or Refused),
// not when it leaves: a request still in flight is neither accepted nor
// refused yet, and counting it early would make a burst of concurrent
// first requests, or a few long polls, look like refusals and throttle an
// upstream that refused nothing.
// While the upstream accepts everything the probability is 0; when it
// refuses most requests, the client stops sending most of them, so the
// upstream sees about K times what it accepts instead of the full offered
// load, and spends nothing on work it would refuse anyway. Create one with
// NewThrottle; the zero Throttle is not usable. Safe for concurrent use.
type Throttle struct {
	k    float64
	min  float64
	now  func() time.Time
	rand func() float64
	w    *window // a = requests, b = accepts
}

// NewThrottle returns a Throttle, or an error wrapping ErrInvalidConfig.
func NewThrottle(cfg ThrottleConfig) (*Throttle, error) {
	if cfg.Window < 0 || (cfg.K != 0 && !(cfg.K >= 1)) {
		return nil, fmt.Errorf("%w: throttle K %v window %v", ErrInvalidConfig, cfg.K, cfg.Window)
	}
	t := &Throttle{k: orDefault(cfg.K, 2), min: float64(max(orDefault(cfg.MinRequests, 20), 0)), now: cfg.Now, rand: cfg.Rand}
	if t.now == nil {
		t.now = time.Now
	}
	if t.rand == nil {
		t.rand = rand.Float64
	}
	t.w = newWindow(orDefault(cfg.Window, 10*time.Second), 10, t.now())
	return t, nil
}

// Allow reports whether to send a request (true) or refuse it locally
// (false). A local refusal counts as a request at once; a request it lets
// through counts when its answer is recorded with Accepted or Refused (a
// request abandoned without an answer, such as one its caller canceled,
// is simply not recorded).
func (t *Throttle) Allow() bool { return t.allowAt(t.now()) }

func (t *Throttle) allowAt(now time.Time) bool {
	w := t.w
	w.mu.Lock()
	w.roll(now)
	p := t.probability(float64(w.sum.a), float64(w.sum.b))
	send := p <= 0 || t.rand() >= p
	if !send {
		w.b[w.cur].a++
		w.sum.a++
	}
	w.mu.Unlock()
	return send
}

// Accepted counts one sent request the upstream accepted (answered without
// refusing for overload).
func (t *Throttle) Accepted() { t.answeredAt(t.now(), true) }

// Refused counts one sent request the upstream refused or did not answer
// (a refusal for overload, a connection failure).
func (t *Throttle) Refused() { t.answeredAt(t.now(), false) }

func (t *Throttle) answeredAt(now time.Time, accepted bool) {
	w := t.w
	w.mu.Lock()
	w.roll(now)
	w.b[w.cur].a++
	w.sum.a++
	if accepted {
		w.b[w.cur].b++
		w.sum.b++
	}
	w.mu.Unlock()
}

// RejectProbability returns the probability that Allow refuses now.
func (t *Throttle) RejectProbability() float64 {
	w := t.w
	now := t.now()
	w.mu.Lock()
	w.roll(now)
	req, acc := float64(w.sum.a), float64(w.sum.b)
	w.mu.Unlock()
	return t.probability(req, acc)
}

func (t *Throttle) probability(req, acc float64) float64 {
	if req < t.min {
		return 0
	}
	return max(0, (req-t.k*acc)/(req+1))
}
