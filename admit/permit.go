package admit

// A Permit is the proof that a slot (or n slots, for weighted work) is
// held. End it with Done exactly once, on every path: success, error,
// panic, client gone, deadline. A `defer p.Done(...)` right after a
// successful acquisition is the usual shape.
//
// The zero Permit, and the Permit returned with a refusal, hold nothing:
// their Done does nothing. Done on a permit that is already done is a
// no-op that is counted as misuse (Stats.Misuse); it never frees a slot
// that the permit did not take.
//
// A Permit must not be copied after it is returned (go vet's copylocks
// check reports copies): two copies would each be able to release. Pass a
// *Permit around instead. Done is not safe for concurrent use on the same
// Permit; the goroutine that owns the work ends it.
type Permit struct {
	_     noCopy
	g     *Gate
	start int64  // nanoseconds since g.epoch; 0 when the gate does not time
	meta  uint64 // weight (low 32 bits), kind (bits 32-47), done (bit 48)
}

// Four fields at most keep a Permit in registers when it is returned.
const (
	metaKindShift = 32
	metaDone      = 1 << 48
)

func permitMeta(n int64, k Kind) uint64 { return uint64(n) | uint64(k)<<metaKindShift }

func (p *Permit) weight() int64 { return int64(uint32(p.meta)) }
func (p *Permit) kind() Kind    { return Kind(p.meta >> metaKindShift) }
func (p *Permit) done() bool    { return p.meta&metaDone != 0 }

// Done releases the permit's slots and records how the work ended.
func (p *Permit) Done(o Outcome) {
	g := p.g
	if g == nil {
		return
	}
	if p.done() {
		g.misuse.Add(1)
		return
	}
	p.meta |= metaDone
	if o == OutcomeOK && g.bare && p.meta == 1|metaDone {
		// Inlined release of the common case: one add frees the slot and
		// counts the completion.
		if s := g.state.Add(completedOne - 1); s>>usedBits == 0 || g.nwait.Load() > 0 {
			g.afterRelease(s)
		}
		return
	}
	if o >= numOutcomes {
		o = OutcomeError
	}
	g.release(p, o)
}

// Held reports whether the permit holds slots that Done has not released.
func (p *Permit) Held() bool { return p.g != nil && !p.done() }

// Gate returns the gate the permit came from, or nil for an empty permit.
func (p *Permit) Gate() *Gate { return p.g }

// Kind returns the permit's kind label ("" for an empty permit).
func (p *Permit) Kind() string {
	if p.g == nil {
		return ""
	}
	return p.g.kinds[p.kind()]
}

// Weight returns the number of slots the permit holds (0 for an empty one).
func (p *Permit) Weight() int64 { return p.weight() }

// noCopy makes go vet's copylocks check report copies of a Permit.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
