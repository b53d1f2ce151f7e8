package pool

// ring is a FIFO of items that grows by doubling. A bounded pool's ring
// never holds more than Config.Queue items. Not safe for concurrent use
// (the pool guards it with its mutex).
type ring struct {
	buf  []item
	head int
	n    int
}

func (r *ring) push(it item) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = it
	r.n++
}

// pop removes and returns the oldest item; the ring must not be empty.
func (r *ring) pop() item {
	it := r.buf[r.head]
	r.buf[r.head] = item{} // let the task and its context be collected
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return it
}

// peek returns the oldest item; the ring must not be empty.
func (r *ring) peek() item { return r.buf[r.head] }

func (r *ring) grow() {
	buf := make([]item, max(2*len(r.buf), 8))
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}
