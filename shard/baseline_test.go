package shard

import (
	"slices"
)

// The three baselines the benchmarks run beside Assign, without and with
// memory. Each maps a snapshot
// (tenants in arrival order) and a shard list to tenant → shard ID, given
// the previous assignment, which only the sticky greedy uses.
type algo struct {
	name string
	next func(prev map[string]int, ts []Tenant, shards []int) map[string]int
}

var algos = []algo{
	{"bounded", func(_ map[string]int, ts []Tenant, shards []int) map[string]int {
		a, err := Assign(ts, shards, Options{})
		if err != nil {
			panic(err)
		}
		return a.Tenants
	}},
	{"greedy-sticky", greedySticky},
	{"greedy-recomputed", func(_ map[string]int, ts []Tenant, shards []int) map[string]int {
		return greedySticky(nil, ts, shards)
	}},
	{"rendezvous", func(_ map[string]int, ts []Tenant, shards []int) map[string]int {
		out := make(map[string]int, len(ts))
		seeds := make([]uint64, len(shards))
		for i, s := range shards {
			seeds[i] = shardSeed(s)
		}
		for _, t := range ts {
			out[t.ID] = shards[rendezvousIndex(tenantHash(t.ID), seeds)]
		}
		return out
	}},
	// sticky is Assign with memory: the previous assignment as
	// Options.Previous. Without one it is bounded, so the benchmarks that
	// place from scratch skip it.
	{"sticky", stickyNext},
}

// rendezvousIndex is plain rendezvous hashing, with the same score as Assign.
func rendezvousIndex(h uint64, seeds []uint64) int {
	best := 0
	var bs uint64
	for i, s := range seeds {
		if v := score(h, s); i == 0 || v > bs {
			best, bs = i, v
		}
	}
	return best
}

// greedySticky is the production reference: tenants keep their shard while
// it exists; the others go, in arrival order, to the least-loaded shard.
// With prev == nil it is greedy least-load recomputed from scratch.
func greedySticky(prev map[string]int, ts []Tenant, shards []int) map[string]int {
	at := make(map[int]int, len(shards))
	for i, s := range shards {
		at[s] = i
	}
	load := make([]int, len(shards))
	out := make(map[string]int, len(ts))
	var rest []Tenant
	for _, t := range ts {
		if s, ok := prev[t.ID]; ok {
			if i, live := at[s]; live {
				out[t.ID] = s
				load[i] += t.Weight
				continue
			}
		}
		rest = append(rest, t)
	}
	for _, t := range rest {
		i := 0
		for j := range load {
			if load[j] < load[i] {
				i = j
			}
		}
		out[t.ID] = shards[i]
		load[i] += t.Weight
	}
	return out
}

// measure returns the maximum load and the lower bound max(w_max, ceil(W/N)).
func measure(a map[string]int, ts []Tenant, shards []int) (maxLoad int, mean, lower float64) {
	load := map[int]int{}
	total, heaviest := totalWeight(ts)
	for _, t := range ts {
		load[a[t.ID]] += t.Weight
	}
	for _, s := range shards {
		maxLoad = max(maxLoad, load[s])
	}
	n := len(shards)
	return maxLoad, float64(total) / float64(n), float64(max(heaviest, (total+n-1)/n))
}

// movedWeight is the weight of tenants present in both assignments whose
// shard changed, weighted as in ts.
func movedWeight(before, after map[string]int, ts []Tenant) int {
	moved := 0
	for _, t := range ts {
		if b, ok := before[t.ID]; ok && b != after[t.ID] {
			moved += t.Weight
		}
	}
	return moved
}

func without(ids []int, id int) []int {
	return slices.DeleteFunc(slices.Clone(ids), func(x int) bool { return x == id })
}
