package shard

// CountOptions tune Count. The zero value is the documented default.
type CountOptions struct {
	// Target is the weight each shard should carry, in HelmReleases.
	// Zero means 100.
	Target int
	// Max is the largest shard count Count returns. Zero means 64.
	Max int
	// Hysteresis is how far, as a fraction, the total weight must leave the
	// band of the current count before the count changes, and the margin by
	// which total/heaviest must exceed a count before Count rises to it.
	// Zero means 0.10; a negative value disables it.
	Hysteresis float64
}

func (o CountOptions) normalize() CountOptions {
	if o.Target <= 0 {
		o.Target = 100
	}
	if o.Max <= 0 {
		o.Max = 64
	}
	switch {
	case o.Hysteresis == 0:
		o.Hysteresis = 0.10
	case o.Hysteresis < 0:
		o.Hysteresis = 0
	}
	return o
}

// Count returns the shard count for a total weight and the weight of the
// heaviest tenant, given the count in use now (0 if none).
//
// It aims at ceil(total/Target) shards, never fewer than 1, never more than
// Max, and never more than floor(total/heaviest): beyond that, more shards
// cannot lower the largest load. The current count is kept while the total
// stays within its band, ((current-1)·Target, current·Target], widened by
// Hysteresis on each side, so that noise around a boundary does not resize.
//
// The floor(total/heaviest) limit has hysteresis too, on the way up only:
// a count above the limit drops to it at once, but the count rises towards
// the limit only as far as floor(total/(heaviest·(1+Hysteresis))), so that a
// heaviest tenant that gains and loses a release does not resize the pool
// back and forth. With Hysteresis disabled the two limits are the same.
func Count(current, total, heaviest int, opts CountOptions) int {
	o := opts.normalize()
	hard, soft := o.Max, o.Max
	if heaviest > 0 {
		hard = min(hard, max(1, total/heaviest))
		rise := total / heaviest
		if o.Hysteresis > 0 {
			rise = int(float64(total) / (float64(heaviest) * (1 + o.Hysteresis)))
		}
		soft = min(soft, max(1, rise))
	}
	want := min(max(1, (total+o.Target-1)/o.Target), hard)
	if current <= 0 || current > hard {
		return want
	}
	lo := float64((current-1)*o.Target) * (1 - o.Hysteresis)
	hi := float64(current*o.Target) * (1 + o.Hysteresis)
	if t := float64(total); t > lo && t <= hi {
		return current
	}
	if want > current {
		// Rising: by the band, but towards the heaviest tenant's limit
		// only as far as its hysteresis allows.
		return min(want, max(current, soft))
	}
	return want
}
