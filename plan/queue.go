package plan

import "math"

// QueueSize is the input of a queue sizing calculation.
type QueueSize struct {
	// TargetWait is how long, in seconds, an item may wait in the queue
	// before waiting stops being useful. Required.
	TargetWait float64
	// SafeRate is the items per second the work behind the queue can
	// complete and keep completing. Required.
	SafeRate float64
	// ItemBytes is the memory each queued item holds (its objects and its
	// request body). Zero means unknown: no memory figure.
	ItemBytes float64
}

// QueueResult is a starting queue capacity and the memory it may hold.
type QueueResult struct {
	// Capacity is ceil(TargetWait × SafeRate): the most items that can
	// still be served within the target wait. A starting candidate, to be
	// tried against bursts and slow items.
	Capacity int64 `json:"capacity"`
	// Bytes is Capacity × ItemBytes: the memory a full queue holds.
	Bytes float64 `json:"bytes"`
}

// Solve computes the starting capacity.
func (in QueueSize) Solve() (QueueResult, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"target-wait", in.TargetWait}, {"safe-rate", in.SafeRate}, {"item-bytes", in.ItemBytes}} {
		if err := checkFigure(f.name, f.v); err != nil {
			return QueueResult{}, err
		}
	}
	if in.TargetWait == 0 {
		return QueueResult{}, invalid("target-wait", 0, "required: how long an item may usefully wait")
	}
	if in.SafeRate == 0 {
		return QueueResult{}, invalid("safe-rate", 0, "required: the completion rate the work can sustain")
	}
	c := math.Ceil(in.TargetWait * in.SafeRate)
	b := c * in.ItemBytes
	if c > maxFigure || b > math.MaxFloat64/2 || math.IsInf(b, 0) {
		return QueueResult{}, invalid("target-wait", in.TargetWait, "with this rate the queue would be absurdly large; check the units")
	}
	return QueueResult{Capacity: int64(c), Bytes: b}, nil
}
