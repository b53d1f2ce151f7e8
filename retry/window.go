package retry

import (
	"sync"
	"time"
)

// window counts two quantities over a sliding window made of buckets, so
// old counts fall out one bucket at a time. Safe for concurrent use.
type window struct {
	width time.Duration

	mu    sync.Mutex // guards everything below
	start time.Time  // when buckets[cur] began
	cur   int
	b     []pair
	sum   pair
}

type pair struct{ a, b int64 }

func newWindow(span time.Duration, buckets int, now time.Time) *window {
	return &window{width: max(span/time.Duration(buckets), 1), start: now, b: make([]pair, buckets)}
}

// roll drops buckets older than the window. Callers hold mu.
func (w *window) roll(now time.Time) {
	steps := int64(now.Sub(w.start) / w.width)
	if steps <= 0 {
		return
	}
	w.start = w.start.Add(time.Duration(steps) * w.width)
	if steps >= int64(len(w.b)) {
		clear(w.b)
		w.sum = pair{}
		return
	}
	for range steps {
		w.cur = (w.cur + 1) % len(w.b)
		w.sum.a -= w.b[w.cur].a
		w.sum.b -= w.b[w.cur].b
		w.b[w.cur] = pair{}
	}
}
