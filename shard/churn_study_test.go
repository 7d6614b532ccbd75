package shard

import (
	"container/heap"
	"flag"
	"fmt"
	"math/bits"
	"slices"
	"testing"
)

// The churn study behind docs/benchmarks/shard.md: churn (1% of tenants
// leave, 1% arrive) over several seeds for the load factor and for
// deferred-acceptance variants of the spill rule. It takes a few minutes,
// so it only runs with -study:
//
//	go test ./shard -run TestChurnStudy -v -args -study

var study = flag.Bool("study", false, "run the churn study (slow)")

// assignFn maps a snapshot to tenant → shard ID.
type assignFn func(ts []Tenant, shards []int) map[string]int

// churnFrom is churn with its own seed, so that the study does not depend
// on the benchmark seed alone.
func churnFrom(ts []Tenant, seed uint64) []Tenant {
	r := newRand(seed + 1)
	out := slices.Clone(ts)
	k := len(ts) / 100
	for range k {
		i := r.IntN(len(out))
		out = slices.Delete(out, i, i+1)
	}
	for i, t := range workload("lognormal", k, seed+2) {
		out = append(out, Tenant{ID: fmt.Sprintf("arrival-%05d", i), Weight: t.Weight})
	}
	return out
}

// studyRow reports, for one algorithm: churn, drift and the worst
// max/lowerbound over N=8..64 on the benchmark seed, 16→17 moved/optimal,
// and churn averaged over six other seeds with their worst.
func studyRow(t *testing.T, name string, f assignFn) {
	ts := workload("lognormal", benchTenants, benchSeed)
	total, _ := totalWeight(ts)
	pct := func(before, after map[string]int, snap []Tenant, w int) float64 {
		return 100 * float64(movedWeight(before, after, snap)) / float64(w)
	}
	row := "| " + name
	for _, n := range []int{16, 64} {
		a, b, d := f(ts, Range(n)), f(churn("lognormal", ts), Range(n)), f(drift(ts), Range(n))
		row += fmt.Sprintf(" | %.2f / %.2f", pct(a, b, churn("lognormal", ts), total), pct(a, d, drift(ts), total))
	}
	worst := 0.0
	for n := 8; n <= 64; n++ {
		mx, _, lower := measure(f(ts, Range(n)), ts, Range(n))
		worst = max(worst, float64(mx)/lower)
	}
	row += fmt.Sprintf(" | %.4f | %.3f", worst, pct(f(ts, Range(16)), f(ts, Range(17)), ts, total)/100*17)
	for _, n := range []int{16, 64} {
		sum, hi := 0.0, 0.0
		for s := uint64(1); s <= 6; s++ {
			base := workload("lognormal", benchTenants, s*1000)
			w, _ := totalWeight(base)
			next := churnFrom(base, s*1000)
			m := pct(f(base, Range(n)), f(next, Range(n)), next, w)
			sum, hi = sum+m, max(hi, m)
		}
		row += fmt.Sprintf(" | %.2f (%.2f)", sum/6, hi)
	}
	t.Log(row + " |")
}

func TestChurnStudy(t *testing.T) {
	if !*study {
		t.Skip("run with -args -study")
	}
	t.Log("| variant | churn / drift moved-% N=16 | N=64 | worst max/lowerbound N=8..64 | 16→17 moved/optimal | churn over 6 seeds N=16 avg (worst) | N=64 |")
	for _, c := range []float64{1.02, 1.03, 1.05, 1.10} {
		studyRow(t, fmt.Sprintf("greedy spill, c=%.2f", c), func(ts []Tenant, shards []int) map[string]int {
			a, err := Assign(ts, shards, Options{LoadFactor: c})
			if err != nil {
				t.Fatal(err)
			}
			return a.Tenants
		})
	}
	classes := []struct {
		name  string
		class func(w int) int
	}{
		{"exact weight", func(w int) int { return w }},
		{"weight class ⌊log2 w⌋", func(w int) int { return bits.Len(uint(w)) }},
		{"weight class ⌊log4 w⌋", func(w int) int { return bits.Len(uint(w)) / 2 }},
		{"weight class ⌊log2(w+1)⌋", func(w int) int { return bits.Len(uint(w + 1)) }},
		{"weight class ⌊log4(w+1)⌋", func(w int) int { return bits.Len(uint(w+1)) / 2 }},
		{"none (hash only)", func(int) int { return 0 }},
	}
	for _, c := range classes {
		studyRow(t, "deferred acceptance, priority "+c.name+" then score", deferredAcceptance(c.class))
	}
}

// deferredAcceptance is the spill rule the study compares with ours:
// tenants propose to shards in ranking order, heaviest first; a shard over
// capacity rejects its lowest-priority tenants, priority being (class(w),
// the tenant's score on that shard); a rejected tenant proposes to its next
// shard. Tenants rejected everywhere go to the least-loaded shard. With a
// global priority instead of a per-shard one, this is Assign.
func deferredAcceptance(class func(w int) int) assignFn {
	return func(ts []Tenant, shards []int) map[string]int {
		es := sortedEntries(ts, nil)
		n := len(shards)
		p := &Placement{}
		if err := p.setShards(shards); err != nil {
			panic(err)
		}
		total := 0
		for _, e := range es {
			total += e.w
		}
		cp := capacity(total, n, 10200)
		load := make([]int, n)
		held := make([]daHeap, n)
		rankings := make([][]int32, len(es))
		next := make([]int, len(es))
		at := make([]int, len(es))
		var fallback, stack []int32
		for i := range es {
			stack = append(stack[:0], int32(i))
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				e := &es[x]
				if rankings[x] == nil {
					rankings[x] = fullRanking(p, e.h)
				}
				if next[x] >= n {
					fallback = append(fallback, x)
					continue
				}
				s := rankings[x][next[x]]
				next[x]++
				heap.Push(&held[s], daHeld{class(e.w), score(e.h, p.seeds[s]), x})
				load[s] += e.w
				at[x] = int(s)
				for load[s] > cp {
					r := heap.Pop(&held[s]).(daHeld)
					load[s] -= es[r.i].w
					stack = append(stack, r.i)
					if r.i == x {
						break
					}
				}
			}
		}
		slices.Sort(fallback)
		for _, x := range fallback {
			least := 0
			for j := range load {
				if load[j] < load[least] {
					least = j
				}
			}
			load[least] += es[x].w
			at[x] = least
		}
		out := make(map[string]int, len(es))
		for i, e := range es {
			out[e.id] = shards[at[i]]
		}
		return out
	}
}

// fullRanking returns every shard index for hash h, best first.
func fullRanking(p *Placement, h uint64) []int32 {
	keys := make([]uint64, len(p.seeds))
	for i, seed := range p.seeds {
		keys[i] = rankKey(score(h, seed), i, p.mask)
	}
	slices.Sort(keys)
	idx := make([]int32, len(keys))
	for j := range idx {
		idx[j] = keyIndex(keys[len(keys)-1-j], p.mask)
	}
	return idx
}

type daHeld struct {
	class int
	score uint64
	i     int32
}

// daHeap is a min-heap of held tenants: the lowest priority on top.
type daHeap []daHeld

func (h daHeap) Len() int { return len(h) }
func (h daHeap) Less(a, b int) bool {
	if h[a].class != h[b].class {
		return h[a].class < h[b].class
	}
	return h[a].score < h[b].score
}
func (h daHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *daHeap) Push(x any)   { *h = append(*h, x.(daHeld)) }
func (h *daHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
