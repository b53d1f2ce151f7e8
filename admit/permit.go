package admit

import (
	"sync"
	"time"
)

// A Permit is the proof that a slot (or n slots, for weighted work) is
// held. End it with Done exactly once, on every path: success, error,
// panic, client gone, deadline. A `defer p.Done(...)` right after a
// successful acquisition is the usual shape.
//
// The zero Permit, and the Permit returned with a refusal, hold nothing:
// their Done does nothing. Done on a permit that is already done is a
// no-op counted as misuse (Stats.Misuse); it never frees a slot.
//
// # Passing permits around
//
// A Permit is a claim, and a copy is a second claim on the same slots.
// Pass a *Permit (or keep permits in a slice and end them by index:
// `for i := range ps { ps[i].Done(o) }`); never copy one after it is
// returned. go vet's copylocks check reports most copies, but not all
// (sending a Permit on a channel, for one). If two copies are both ended,
// the second release is checked against the slots in use: when it would
// free more than are held, Done panics with ErrOverRelease, as
// x/sync/semaphore does for "released more than held". That is a bug in
// the caller, and a panic at the release names it; counting it quietly
// would let the gate admit more than its capacity. When other permits
// still hold slots, the check cannot tell the copy from them: that is why
// copies must not happen at all.
//
// Done is not safe for concurrent use on the same Permit unless the
// permit was guarded (Guard): the goroutine that owns the work ends it.
type Permit struct {
	_     noCopy
	g     *Gate
	start int64       // sampled start, nanoseconds since g.epoch + 1; 0 when not timed
	meta  uint64      // weight (low 32 bits), kind (bits 32-47), flags above
	guard *sync.Mutex // when not nil, every method takes it
}

// Four words at most keep a Permit in registers when it is returned.
const (
	metaKindShift = 32
	metaDone      = 1 << 48
	metaFast      = 1 << 49 // one slot, first kind, admitted without queueing: counted in the state word
)

func permitMeta(n int64, k Kind) uint64 { return uint64(n) | uint64(k)<<metaKindShift }

func (p *Permit) weight() int64 { return int64(uint32(p.meta)) }
func (p *Permit) kind() Kind    { return Kind(uint16(p.meta >> metaKindShift)) }
func (p *Permit) done() bool    { return p.meta&metaDone != 0 }

// Done releases the permit's slots and records how the work ended.
// Outcomes outside the defined set are recorded as OutcomeError.
func (p *Permit) Done(o Outcome) {
	if p.guard != nil {
		p.guard.Lock()
		defer p.guard.Unlock()
	}
	g := p.g
	if g == nil {
		return
	}
	if p.done() {
		g.countMisuse()
		return
	}
	p.meta |= metaDone
	if p.meta == metaDone|metaFast|1 && o == OutcomeOK && p.start == 0 && g.obs == nil {
		g.releaseFastOK()
		return
	}
	p.release(o)
}

// release is the general path: timing, any outcome, any weight, observers.
func (p *Permit) release(o Outcome) {
	g := p.g
	if o >= numOutcomes {
		o = OutcomeError
	}
	var hold time.Duration
	if p.start != 0 {
		hold = time.Since(g.epoch) - time.Duration(p.start-1)
	}
	k, n := p.kind(), p.weight()
	if p.meta&metaFast != 0 && o == OutcomeOK {
		g.releaseFastOK()
	} else {
		g.releaseSlow(k, n, o, p.meta&metaFast != 0)
	}
	if p.start != 0 {
		g.recordHold(hold, o)
	}
	if g.obs != nil {
		g.observeCompleted(k, o, n, hold)
	}
}

// Guard makes the permit safe to end from more than one goroutine: Done,
// Held, Weight and Kind take mu first, so the first Done releases and any
// later one is a counted no-op. A request holder that hands a permit to a
// handler and ends it itself when the handler returns uses it (package
// httpgate does). Call Guard before sharing the permit; mu must not be
// held by the caller of Done.
func (p *Permit) Guard(mu *sync.Mutex) { p.guard = mu }

// Held reports whether the permit holds slots that Done has not released.
func (p *Permit) Held() bool {
	if p.guard != nil {
		p.guard.Lock()
		defer p.guard.Unlock()
	}
	return p.g != nil && !p.done()
}

// Gate returns the gate the permit came from, or nil for an empty permit.
func (p *Permit) Gate() *Gate { return p.g }

// Kind returns the permit's kind label ("" for an empty permit).
func (p *Permit) Kind() string {
	if p.guard != nil {
		p.guard.Lock()
		defer p.guard.Unlock()
	}
	if p.g == nil {
		return ""
	}
	return p.g.kinds[p.kind()]
}

// Weight returns the number of slots the permit holds or held (0 for an
// empty one).
func (p *Permit) Weight() int64 {
	if p.guard != nil {
		p.guard.Lock()
		defer p.guard.Unlock()
	}
	return p.weight()
}

// noCopy makes go vet's copylocks check report copies of a Permit.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
