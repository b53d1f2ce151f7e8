package plan

import (
	"math"
)

// MaxLayers bounds Retry.Layers: beyond it the arithmetic is meaningless.
const MaxLayers = 64

// Retry is the input of a retry amplification calculation: a call that
// passes through Layers layers, each of which makes up to Attempts
// attempts at the layer below it.
type Retry struct {
	// Attempts is the most attempts each layer makes per request it
	// receives, the first included (1 = no retries). Required.
	Attempts int
	// Layers is the number of layers that retry, 1 to MaxLayers. Required.
	Layers int
	// Budget is a retry budget ratio: each layer's retries are at most
	// Budget × its original requests (0.1 = 10 % extra). Zero means no
	// budget; negative is refused.
	Budget float64
	// Rate is the original requests per second at the top. Zero means not
	// given: no per-second figures.
	Rate float64
}

// RetryResult is the amplification a retry policy allows in the worst case
// (every attempt fails).
type RetryResult struct {
	// WorstCase is Attempts^Layers: attempts reaching the bottom layer per
	// original request with no budget.
	WorstCase float64 `json:"worst_case"`
	// PerLayer[i] is the worst case at depth i+1 (PerLayer[Layers-1] ==
	// WorstCase).
	PerLayer []float64 `json:"per_layer"`
	// WithBudget is min(Attempts, 1+Budget)^Layers: the same with the
	// budget capping each layer. Equal to WorstCase without a budget.
	WithBudget float64 `json:"with_budget"`
	// BottomRate and BottomRateWithBudget are Rate × WorstCase and Rate ×
	// WithBudget, per second; zero when Rate was not given.
	BottomRate           float64 `json:"bottom_rate_per_second,omitempty"`
	BottomRateWithBudget float64 `json:"bottom_rate_with_budget_per_second,omitempty"`
}

// Solve computes the amplification.
func (in Retry) Solve() (RetryResult, error) {
	if in.Attempts < 1 {
		return RetryResult{}, invalid("attempts", float64(in.Attempts), "must be at least 1 (the first attempt counts)")
	}
	if in.Layers < 1 || in.Layers > MaxLayers {
		return RetryResult{}, invalid("layers", float64(in.Layers), "must be from 1 to 64")
	}
	if err := checkFigure("budget", in.Budget); err != nil {
		return RetryResult{}, err
	}
	if err := checkFigure("rate", in.Rate); err != nil {
		return RetryResult{}, err
	}
	perLayer := float64(in.Attempts)
	capped := perLayer
	if in.Budget > 0 {
		capped = math.Min(perLayer, 1+in.Budget)
	}
	r := RetryResult{PerLayer: make([]float64, in.Layers)}
	for i := range r.PerLayer {
		r.PerLayer[i] = math.Pow(perLayer, float64(i+1))
	}
	r.WorstCase = r.PerLayer[in.Layers-1]
	r.WithBudget = math.Pow(capped, float64(in.Layers))
	r.BottomRate = in.Rate * r.WorstCase
	r.BottomRateWithBudget = in.Rate * r.WithBudget
	if math.IsInf(r.WorstCase, 0) || r.WorstCase > maxFigure || r.BottomRate > maxFigure {
		return RetryResult{}, invalid("attempts", float64(in.Attempts), "to this many layers the worst case is beyond counting")
	}
	return r, nil
}
