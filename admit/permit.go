package admit

import "time"

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
// Done is not safe for concurrent use on the same Permit: the goroutine
// that owns the work ends it. (Package httpgate, whose permits a handler
// and the request's holder may both end, wraps each in its own lock.)
type Permit struct {
	ref   gateRef
	start int64  // sampled start, nanoseconds since g.epoch + 1; 0 when not timed
	meta  uint64 // weight (low 32 bits), kind (bits 32-47), flags above
}

// Four fields at most: the compiler keeps a struct of up to four fields in
// registers, and a Permit is returned from every acquisition (a fifth
// field tripled the cost of TryAcquire+Done).
const (
	metaKindShift  = 32
	metaDone       = 1 << 48
	metaFast       = 1 << 49 // one slot, first kind, admitted without queueing: counted in the state word
	metaPlain      = 1 << 50 // neither timed nor observed: nothing to do on release but the release
	metaClassShift = 51      // bits 51-52: the class
)

func permitMeta(n int64, k Kind, cl Class) uint64 {
	return uint64(n) | uint64(k)<<metaKindShift | uint64(cl)<<metaClassShift
}

func (p *Permit) weight() int64 { return int64(uint32(p.meta)) }
func (p *Permit) kind() Kind    { return Kind(uint16(p.meta >> metaKindShift)) }
func (p *Permit) class() Class  { return Class(p.meta >> metaClassShift & 3) }
func (p *Permit) ended() bool   { return p.meta&metaDone != 0 }

// Done releases the permit's slots and records how the work ended.
// Outcomes outside the defined set are recorded as OutcomeError.
func (p *Permit) Done(o Outcome) {
	// The common case, a fast untimed permit ended ok on a gate without an
	// observer, is small enough to inline: one call, one CAS.
	if p.meta == metaFast|metaPlain|1 && o == OutcomeOK {
		p.meta |= metaDone
		p.ref.g.releaseFastOK()
		return
	}
	p.done(o)
}

// done is Done for everything but the common case.
func (p *Permit) done(o Outcome) {
	g := p.ref.g
	if g == nil {
		return
	}
	if p.meta&metaDone != 0 {
		g.countMisuse()
		return
	}
	p.meta |= metaDone
	p.release(o)
}

// release is the general path: timing, any outcome, any weight, observers.
func (p *Permit) release(o Outcome) {
	g := p.ref.g
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
		g.releaseSlow(k, n, p.class(), o, p.meta&metaFast != 0)
	}
	if p.start != 0 {
		g.recordHold(hold, o)
	}
	if g.obs != nil {
		g.observeCompleted(k, o, n, hold)
	}
}

// Held reports whether the permit holds slots that Done has not released.
func (p *Permit) Held() bool {
	return p.ref.g != nil && !p.ended()
}

// Gate returns the gate the permit came from, or nil for an empty permit.
func (p *Permit) Gate() *Gate { return p.ref.g }

// Kind returns the permit's kind label ("" for an empty permit).
func (p *Permit) Kind() string {
	if p.ref.g == nil {
		return ""
	}
	return p.ref.g.kinds[p.kind()]
}

// Weight returns the number of slots the permit holds or held (0 for an
// empty one).
func (p *Permit) Weight() int64 {
	return p.weight()
}

// gateRef is the permit's gate. Its Lock and Unlock methods do nothing:
// they make go vet's copylocks check report copies of a Permit, at no
// cost in size.
type gateRef struct{ g *Gate }

func (*gateRef) Lock()   {}
func (*gateRef) Unlock() {}
