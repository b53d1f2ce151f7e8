package promsluice

import (
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota"
)

// Refusal is a count of refusals given outside any gate by something Add
// does not take (a reverse proxy's own answers for its retry policy, say;
// quotas and breakers passed to Add are counted without it). Gate is the
// name the refusal's body names, so that `sluice load --metrics` can
// match the two.
type Refusal struct {
	Gate, Kind, Reason string // Kind "" means "default"
	Count              uint64
}

// AddRefusals exports the refusals read returns, at every scrape, in
// sluice_admission_rejected_total{gate,kind,reason} beside the gates'
// own: Metrics owns that family, so a refusal made outside a gate is
// attributable like any other without a second collector writing the
// same metric. Counts must be cumulative (never go down). A series that
// a gate or an earlier source also reports is summed, never exported
// twice. read is called from the scrape's goroutine and must be safe for
// concurrent use. AddRefusals is safe for concurrent use, with scrapes
// too; a source added during a scrape shows from the next one.
func (m *Metrics) AddRefusals(read func() []Refusal) { m.addRefusals(read) }

func (m *Metrics) addRefusals(read func() []Refusal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refusals = append(m.refusals, read)
}

// quotaRefusals reads quotas' Stats as refusals: gate is the quota's name,
// reason rate for Limited (the 429s), full for RejectedFull and
// breaker_open for RejectedStore, the reasons the quotas' own refusals
// carry.
func quotaRefusals(read func() []quota.Stats) func() []Refusal {
	return func() []Refusal {
		stats := read()
		out := make([]Refusal, 0, 3*len(stats))
		for _, s := range stats {
			out = append(out,
				Refusal{Gate: s.Quota, Reason: admit.ReasonRate.String(), Count: s.Limited},
				Refusal{Gate: s.Quota, Reason: admit.ReasonFull.String(), Count: s.RejectedFull},
				Refusal{Gate: s.Quota, Reason: admit.ReasonBreakerOpen.String(), Count: s.RejectedStore})
		}
		return out
	}
}

type refusalKey struct{ gate, kind, reason string }

// readRefusals sums every source's refusals by series.
func (m *Metrics) readRefusals() map[refusalKey]uint64 {
	m.mu.Lock()
	sources := append([]func() []Refusal(nil), m.refusals...)
	m.mu.Unlock()
	if len(sources) == 0 {
		return nil
	}
	sum := map[refusalKey]uint64{}
	for _, read := range sources {
		for _, r := range read() {
			kind := r.Kind
			if kind == "" {
				kind = "default"
			}
			sum[refusalKey{r.Gate, kind, r.Reason}] += r.Count
		}
	}
	return sum
}
