package plan

// Fleet is the input of a fleet total calculation: a per-instance pool
// (database connections, upstream slots) multiplied by the instances that
// each hold one, against the shared resource they all draw on.
type Fleet struct {
	// PerInstance is each instance's pool size. Required.
	PerInstance int64
	// Instances is how many instances run. Required.
	Instances int64
	// Shared is the shared resource's own limit (the database's
	// max_connections, an upstream's quota). Zero means unknown: no
	// comparison.
	Shared int64
}

// FleetResult is the fleet's total against the shared limit.
type FleetResult struct {
	// Total is PerInstance × Instances: what the fleet may hold at once.
	Total int64 `json:"total"`
	// Over is true when Total exceeds Shared; Excess is by how much.
	Over   bool  `json:"over"`
	Excess int64 `json:"excess"`
	// MaxInstances is Shared / PerInstance: instances the shared limit
	// admits at this pool size. FairPerInstance is Shared / Instances:
	// the pool size that fits at this instance count. Both zero when
	// Shared is unknown.
	MaxInstances    int64 `json:"max_instances"`
	FairPerInstance int64 `json:"fair_per_instance"`
}

// Solve computes the total.
func (in Fleet) Solve() (FleetResult, error) {
	if in.PerInstance < 1 {
		return FleetResult{}, invalid("per-instance", float64(in.PerInstance), "must be at least 1")
	}
	if in.Instances < 1 {
		return FleetResult{}, invalid("instances", float64(in.Instances), "must be at least 1")
	}
	if in.Shared < 0 {
		return FleetResult{}, invalid("shared", float64(in.Shared), "must not be negative (0 = unknown)")
	}
	if in.PerInstance > maxFigure/in.Instances {
		return FleetResult{}, invalid("per-instance", float64(in.PerInstance), "times instances overflows; check the figures")
	}
	r := FleetResult{Total: in.PerInstance * in.Instances}
	if in.Shared > 0 {
		r.Over = r.Total > in.Shared
		if r.Over {
			r.Excess = r.Total - in.Shared
		}
		r.MaxInstances = in.Shared / in.PerInstance
		r.FairPerInstance = in.Shared / in.Instances
	}
	return r, nil
}
