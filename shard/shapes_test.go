package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The weight shapes of issue 21, each drawn from its own seeds (shapeSeeds),
// separate from the benchmark seed of workload_test.go:
//
//   - zipf: 1 + Zipf(s=2, imax=2999), 10,000 tenants;
//   - pareto-cap: Pareto with α=1.1 and scale 1, rounded down and capped at
//     2,000 releases, 10,000 tenants;
//   - giants: lognormal σ=1.5 body of 10,000 tenants beside three giant
//     tenants that hold a fifth of all releases between them;
//   - bimodal: 95% of tenants with 1–4 releases, 5% around 150
//     (lognormal, σ=0.3), 10,000 tenants;
//   - equal: 50,000 tenants of 2 releases each;
//   - lognormal: the σ=1.5 lognormal of workload_test.go, for reference.
var shapes = []string{"zipf", "pareto-cap", "giants", "bimodal", "equal", "lognormal"}

// shapeSeeds are the seeds of the shape study: five, other than benchSeed.
var shapeSeeds = []uint64{71, 72, 73, 74, 75}

// shapeWorkload returns the tenants of a shape in arrival order,
// deterministically from seed.
func shapeWorkload(shape string, seed uint64) []Tenant {
	r := newRand(seed*7919 + 17)
	n := 10000
	if shape == "equal" {
		n = 50000
	}
	ts := make([]Tenant, 0, n+3)
	z := newZipf(r)
	for i := range n {
		var w int
		switch shape {
		case "zipf":
			w = 1 + int(z.Uint64())
		case "pareto-cap":
			w = min(2000, int(math.Floor(1/math.Pow(1-r.Float64(), 1/1.1))))
		case "bimodal":
			if r.IntN(20) == 0 {
				w = int(math.Round(math.Exp(math.Log(150) + 0.3*r.NormFloat64())))
			} else {
				w = 1 + r.IntN(4)
			}
		case "equal":
			w = 2
		default: // lognormal, giants
			w = max(1, int(math.Round(math.Exp(0.5+1.5*r.NormFloat64()))))
		}
		ts = append(ts, Tenant{ID: fmt.Sprintf("s%d-%05d", seed, i), Weight: w})
	}
	if shape == "giants" {
		body, _ := totalWeight(ts)
		// Three giants with a fifth of the final total: g = body/12, split
		// unevenly (0.4, 0.33, 0.27 of the fifth).
		fifth := float64(body) / 4
		for j, share := range []float64{0.40, 0.33, 0.27} {
			at := r.IntN(len(ts) + 1)
			g := Tenant{ID: fmt.Sprintf("s%d-giant-%d", seed, j), Weight: int(math.Round(fifth * share))}
			ts = append(ts[:at], append([]Tenant{g}, ts[at:]...)...)
		}
	}
	return ts
}

// shapeChurn returns ts after 1% of tenants leave and 1% arrive, the
// arrivals drawn from the same shape; with giant, the heaviest tenant is
// among those that leave.
func shapeChurn(shape string, ts []Tenant, seed uint64, giant bool) []Tenant {
	r := newRand(seed*104729 + 3)
	k := len(ts) / 100
	gone := map[int]bool{}
	if giant {
		h := 0
		for i, t := range ts {
			if t.Weight > ts[h].Weight {
				h = i
			}
		}
		gone[h] = true
	}
	for len(gone) < k {
		gone[r.IntN(len(ts))] = true
	}
	out := make([]Tenant, 0, len(ts))
	for i, t := range ts {
		if !gone[i] {
			out = append(out, t)
		}
	}
	if shape == "giants" {
		shape = "lognormal" // arrivals from the body, not new giants
	}
	fresh := shapeWorkload(shape, seed+1000)
	for i := range k {
		w := fresh[r.IntN(len(fresh))].Weight
		out = append(out, Tenant{ID: fmt.Sprintf("arrival-%d-%05d", seed, i), Weight: w})
	}
	return out
}

// survivingWeight is the weight, in after, of the tenants present in both.
func survivingWeight(before, after []Tenant) int {
	in := make(map[string]bool, len(before))
	for _, t := range before {
		in[t.ID] = true
	}
	w := 0
	for _, t := range after {
		if in[t.ID] {
			w += t.Weight
		}
	}
	return w
}

func newZipf(r *rand.Rand) *rand.Zipf { return rand.NewZipf(r, 2, 1, 2999) }

// balanceBound is the balance target's largest shard load for ts on n
// shards: floor(1.02·max(w_max, ceil(W/n))).
func balanceBound(ts []Tenant, n int) int {
	total, heaviest := totalWeight(ts)
	return int(1.02 * float64(max(heaviest, (total+n-1)/n)))
}

// forcedMove is a lower bound on the weight any placement must move from
// before to meet the balance target on after's shards: the weight of the
// surviving tenants on shards that are gone, plus, on each shard that
// stays, what the surviving tenants left on it weigh beyond
// floor(1.02·max(w_max, ceil(W/N))), or more if no set of its tenants
// weighs exactly that (see below); plus what the shard that takes the
// heaviest tenant that must move (one of a shard that is gone, or new) must
// shed to make room for it, on the shard where that is least. Beyond that
// heaviest tenant it ignores that tenants do not split, so the true least
// can be higher.
func forcedMove(before map[string]int, next []Tenant, shards []int) int {
	bound := balanceBound(next, len(shards))
	live := map[int]bool{}
	for _, s := range shards {
		live[s] = true
	}
	kept := map[int][]int{}
	forced, homeless := 0, 0
	for _, t := range next {
		s, ok := before[t.ID]
		switch {
		case !ok:
			homeless = max(homeless, t.Weight)
		case !live[s]:
			forced += t.Weight
			homeless = max(homeless, t.Weight)
		default:
			kept[s] = append(kept[s], t.Weight)
		}
	}
	load, shed := map[int]int{}, map[int]int{}
	for s, ws := range kept {
		for _, w := range ws {
			load[s] += w
		}
		excess := load[s] - bound
		if excess <= 0 {
			continue
		}
		// The least a set of its tenants weighing at least excess can
		// weigh: excess if those lighter than excess add up to it, else
		// the lightest tenant of at least excess.
		small, big := 0, -1
		for _, w := range ws {
			if w < excess {
				small += w
			} else if big < 0 || w < big {
				big = w
			}
		}
		if small >= excess {
			shed[s] = excess
		} else {
			shed[s] = big
		}
		forced += shed[s]
	}
	room := -1
	for _, s := range shards {
		l := load[s]
		if extra := max(0, l+homeless-bound-shed[s]); room < 0 || extra < room {
			room = extra
		}
	}
	return forced + max(room, 0)
}
