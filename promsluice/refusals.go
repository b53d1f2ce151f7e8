package promsluice

import (
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/quota"
)

// Refusal is a count of refusals made by a policy outside any gate: a
// quota (reason rate), a breaker (breaker_open), a retry policy (shed,
// deadline). Gate is the name the refusal's body names, so that
// `sluice load --metrics` can match the two.
type Refusal struct {
	Gate, Kind, Reason string // Kind "" means "default"
	Count              uint64
}

// AddRefusals exports the refusals read returns, at every scrape, in
// sluice_admission_rejected_total{gate,kind,reason} beside the gates'
// own: GateMetrics owns that family, so a refusal made outside a gate is
// attributable like any other without a second collector writing the
// same metric. Counts must be cumulative (never go down). A series that
// a gate or an earlier source also reports is summed, never exported
// twice. read is called from the scrape's goroutine and must be safe for
// concurrent use. AddRefusals is safe for concurrent use, with scrapes
// too; a source added during a scrape shows from the next one.
func (m *GateMetrics) AddRefusals(read func() []Refusal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refusals = append(m.refusals, read)
}

// QuotaRefusals reads quotas' Stats (a *quota.Quota's or a fleet quota's
// Stats method) as refusals for AddRefusals: gate is the quota's name,
// reason rate for Limited (the 429s), full for RefusedFull and
// breaker_open for RefusedStore, the reasons the quotas' own refusals
// carry.
func QuotaRefusals(sources ...func() quota.Stats) func() []Refusal {
	return QuotaRefusalsFunc(readAll(sources))
}

// QuotaRefusalsFunc is QuotaRefusals over the quotas read returns at each
// scrape, for a set of quotas that changes while the process runs.
func QuotaRefusalsFunc(read func() []quota.Stats) func() []Refusal {
	return func() []Refusal {
		stats := read()
		out := make([]Refusal, 0, 3*len(stats))
		for _, s := range stats {
			out = append(out,
				Refusal{Gate: s.Quota, Reason: admit.ReasonRate.String(), Count: s.Limited},
				Refusal{Gate: s.Quota, Reason: admit.ReasonFull.String(), Count: s.RefusedFull},
				Refusal{Gate: s.Quota, Reason: admit.ReasonBreakerOpen.String(), Count: s.RefusedStore})
		}
		return out
	}
}

type refusalKey struct{ gate, kind, reason string }

// readRefusals sums every source's refusals by series.
func (m *GateMetrics) readRefusals() map[refusalKey]uint64 {
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
