package shard

import (
	"container/heap"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"testing"
)

// The churn study behind docs/benchmarks/shard.md: churn (1% of tenants
// leave, 1% arrive) over several seeds for the load factor and for variants
// of the spill rule. It takes a few minutes, so it only runs with -study:
//
//	go test ./shard -run 'TestChurnStudy|TestChurnSpread' -v -args -study

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
	studyRow(t, "previous rule: exact weight, first shard with room", scanAssign(weightOrder, pickFirst, 10200))
	for _, c := range []float64{1.02, 1.03, 1.05, 1.10} {
		studyRow(t, fmt.Sprintf("Assign (weight class, unclaimed room first), c=%.2f", c), assignWith(t, c))
	}
	studyRow(t, "exact weight, unclaimed room first", scanAssign(weightOrder, pickUnclaimed, 10200))
	studyRow(t, "weight class, first shard with room", scanAssign(classOrder, pickFirst, 10200))
	studyRow(t, "weight class, unclaimed room with a margin of cap/100 first", scanAssign(classOrder, pickMargin(100), 10200))
	studyRow(t, "weighted-rendezvous order (key w/-ln u), unclaimed room first", scanAssign(rendezvousOrder, pickUnclaimed, 10200))
	studyRow(t, "exact weight, roomiest of the next 2 choices", scanAssign(weightOrder, pickRoomiest(2), 10200))
	studyRow(t, "exact weight, roomiest of the next 4 choices", scanAssign(weightOrder, pickRoomiest(4), 10200))
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

// TestChurnSpread reports churn over 20 seeds other than the benchmark's,
// and on the benchmark seed for every N from 8 to 64; then, per seed at
// N=64, how much weight the churn itself changes, what the previous rule and
// Assign move, what Assign moves if the capacity is held at its value before
// the change (the capacity follows the total weight, and a change of one
// release of capacity moves tenants on every full shard), and what a
// placement with memory would have to move.
func TestChurnSpread(t *testing.T) {
	if !*study {
		t.Skip("run with -args -study")
	}
	prev := scanAssign(weightOrder, pickFirst, 10200)
	rows := []struct {
		name string
		f    assignFn
	}{
		{"previous rule: exact weight, first shard with room", prev},
		{"exact weight, unclaimed room first", scanAssign(weightOrder, pickUnclaimed, 10200)},
		{"weight class, first shard with room", scanAssign(classOrder, pickFirst, 10200)},
		{"weighted-rendezvous order, unclaimed room first", scanAssign(rendezvousOrder, pickUnclaimed, 10200)},
		{"Assign: weight class, unclaimed room first", assignWith(t, 1.02)},
	}
	t.Log("| variant | benchmark seed: N over 1% among 8..64, worst (N) | N=16: mean, median, worst over 20 seeds, seeds ≤ 1% | N=64: same |")
	for _, r := range rows {
		t.Log(spreadRow(r.name, r.f))
	}
	t.Log("| variant | dist | worst max/lowerbound over 20 seeds × N=8..64 (cases over 1.02) | 16→17 moved/optimal over 20 seeds: mean, worst |")
	for _, r := range []struct {
		name string
		f    assignFn
	}{rows[0], rows[len(rows)-1]} {
		for _, dist := range []string{"lognormal", "zipf"} {
			t.Log(targetsRow(r.name, dist, r.f))
		}
	}
	t.Log("| seed | churned weight % (left + arrived) | previous rule moves % | Assign moves % | Assign, capacity held % | placement with memory moves % |")
	for s := uint64(0); s <= 20; s++ {
		seed := s * 1000
		ts := workload("lognormal", benchTenants, seed)
		next := churnFrom(ts, seed)
		if s == 0 {
			seed = benchSeed
			ts = workload("lognormal", benchTenants, seed)
			next = churn("lognormal", ts)
		}
		total, _ := totalWeight(ts)
		pct := func(x int) float64 { return 100 * float64(x) / float64(total) }
		a, b := assignWith(t, 1.02), Range(64)
		before := a(ts, b)
		// The load factor that keeps the capacity of the first snapshot for
		// the second.
		after, _ := totalWeight(next)
		held := float64((capacity(total, 64, 10200)*640000+after-1)/after) / 10000
		if capacity(after, 64, int(math.Round(held*10000))) != capacity(total, 64, 10200) {
			t.Fatalf("seed %d: capacity not held", seed)
		}
		t.Logf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f |", seed, pct(changedWeight(ts, next)),
			pct(movedWeight(prev(ts, b), prev(next, b), next)), pct(movedWeight(before, a(next, b), next)),
			pct(movedWeight(before, assignWith(t, held)(next, b), next)), pct(stickyMoves(before, next, 64)))
	}
}

// targetsRow checks the other targets over 20 seeds: balance for every N
// from 8 to 64 and movement on 16→17.
func targetsRow(name, dist string, f assignFn) string {
	worst, over, sum, most := 0.0, 0, 0.0, 0.0
	for s := uint64(1); s <= 20; s++ {
		ts := workload(dist, benchTenants, s*1000)
		total, _ := totalWeight(ts)
		for n := 8; n <= 64; n++ {
			mx, _, lower := measure(f(ts, Range(n)), ts, Range(n))
			worst = max(worst, float64(mx)/lower)
			if float64(mx)/lower > 1.02 {
				over++
			}
		}
		r := float64(movedWeight(f(ts, Range(16)), f(ts, Range(17)), ts)) / float64(total) * 17
		sum, most = sum+r, max(most, r)
	}
	return fmt.Sprintf("| %s | %s | %.4f (%d) | %.3f, %.3f |", name, dist, worst, over, sum/20, most)
}

func spreadRow(name string, f assignFn) string {
	ts := workload("lognormal", benchTenants, benchSeed)
	next := churn("lognormal", ts)
	total, _ := totalWeight(ts)
	worst, worstN, over := 0.0, 0, 0
	for n := 8; n <= 64; n++ {
		m := 100 * float64(movedWeight(f(ts, Range(n)), f(next, Range(n)), next)) / float64(total)
		if m > worst {
			worst, worstN = m, n
		}
		if m > 1 {
			over++
		}
	}
	row := fmt.Sprintf("| %s | %d, %.2f (N=%d)", name, over, worst, worstN)
	for _, n := range []int{16, 64} {
		var v []float64
		for s := uint64(1); s <= 20; s++ {
			base := workload("lognormal", benchTenants, s*1000)
			w, _ := totalWeight(base)
			nx := churnFrom(base, s*1000)
			v = append(v, 100*float64(movedWeight(f(base, Range(n)), f(nx, Range(n)), nx))/float64(w))
		}
		slices.Sort(v)
		sum, ok := 0.0, 0
		for _, x := range v {
			sum += x
			if x <= 1 {
				ok++
			}
		}
		row += fmt.Sprintf(" | %.2f, %.2f, %.2f, %d/20", sum/20, (v[9]+v[10])/2, v[19], ok)
	}
	return row + " |"
}

func assignWith(t *testing.T, c float64) assignFn {
	return func(ts []Tenant, shards []int) map[string]int {
		a, err := Assign(ts, shards, Options{LoadFactor: c})
		if err != nil {
			t.Fatal(err)
		}
		return a.Tenants
	}
}

// stickyMoves is what a placement with memory, which the package does not
// allow itself, would move: every surviving tenant stays where it was, each
// arrival (heaviest first) goes to the least-loaded shard, and where that
// has no room, the lightest tenants there are evicted and placed again the
// same way; a tenant heavier than the capacity is left alone, as Assign
// leaves it. It returns the weight of surviving tenants that moved.
func stickyMoves(before map[string]int, next []Tenant, n int) int {
	total, _ := totalWeight(next)
	cp := capacity(total, n, 10200)
	on := make([][]Tenant, n)
	load := make([]int, n)
	var queue []Tenant
	fresh := map[string]bool{}
	for _, t := range next {
		if s, ok := before[t.ID]; ok {
			on[s] = append(on[s], t)
			load[s] += t.Weight
		} else {
			queue = append(queue, t)
			fresh[t.ID] = true
		}
	}
	moved := 0
	evict := func(s, limit int) {
		slices.SortFunc(on[s], func(a, b Tenant) int { return b.Weight - a.Weight })
		if len(on[s]) > 0 {
			limit = max(limit, on[s][0].Weight) // a tenant heavier than the room stays
		}
		for load[s] > limit && len(on[s]) > 0 {
			x := on[s][len(on[s])-1]
			on[s] = on[s][:len(on[s])-1]
			load[s] -= x.Weight
			if !fresh[x.ID] {
				moved += x.Weight
			}
			queue = append(queue, x)
		}
	}
	for s := range n {
		evict(s, cp)
	}
	for len(queue) > 0 {
		slices.SortFunc(queue, func(a, b Tenant) int { return a.Weight - b.Weight })
		t := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		least := 0
		for s := range n {
			if load[s] < load[least] {
				least = s
			}
		}
		if load[least]+t.Weight > cp {
			evict(least, cp-t.Weight)
		}
		on[least] = append(on[least], t)
		load[least] += t.Weight
	}
	return moved
}

// pickFn is a spill rule for scanAssign: the shard index for e given the
// loads so far, rem (the first-choice weight of the tenants still to come,
// per shard), the capacity and e's full ranking.
type pickFn func(load, rem []int, cp int, e *entry, rank []int32) int32

// scanAssign is placement as a left-to-right scan in the given order with a
// given spill rule, written for clarity rather than speed: with weightOrder
// and pickFirst it is the previous rule, with classOrder and pickUnclaimed
// it is Assign.
func scanAssign(order func(a, b entry) int, pick pickFn, factor int) assignFn {
	return func(ts []Tenant, shards []int) map[string]int {
		es := sortedEntries(ts, nil)
		slices.SortFunc(es, order)
		p := &Placement{}
		if err := p.setShards(shards); err != nil {
			panic(err)
		}
		total := 0
		for _, e := range es {
			total += e.w
		}
		cp := capacity(total, len(shards), factor)
		load := make([]int, len(shards))
		rem := make([]int, len(shards))
		ranks := make([][]int32, len(es))
		for i := range es {
			ranks[i] = fullRanking(p, es[i].h)
			rem[ranks[i][0]] += es[i].w
		}
		out := make(map[string]int, len(es))
		for i := range es {
			rem[ranks[i][0]] -= es[i].w
			s := pick(load, rem, cp, &es[i], ranks[i])
			load[s] += es[i].w
			out[es[i].id] = shards[s]
		}
		return out
	}
}

// weightOrder is the previous placement order: heaviest first.
func weightOrder(a, b entry) int {
	if a.w != b.w {
		return b.w - a.w
	}
	return compareEntries(a, b)
}

// rendezvousOrder places tenants by their weighted-rendezvous key
// w/-ln(u), u uniform in (0, 1) from the hash, highest first: heavy tenants
// early, but not strictly by weight.
func rendezvousOrder(a, b entry) int {
	key := func(e entry) float64 {
		return -float64(e.w) / math.Log((float64(e.h>>11)+0.5)/(1<<53))
	}
	if ka, kb := key(a), key(b); ka != kb {
		if ka > kb {
			return -1
		}
		return 1
	}
	return compareEntries(a, b)
}

// classOrder is the placement order of Assign.
func classOrder(a, b entry) int { return compareEntries(a, b) }

// pickFirst: the first shard in the ranking with room, else the least
// loaded.
func pickFirst(load, _ []int, cp int, e *entry, rank []int32) int32 {
	for _, s := range rank {
		if load[s]+e.w <= cp {
			return s
		}
	}
	least := rank[0]
	for _, s := range rank {
		if load[s] < load[least] {
			least = s
		}
	}
	return least
}

// pickUnclaimed: the first choice if it has room, else the first shard
// with room on top of the first-choice weight to come, else pickFirst.
func pickUnclaimed(load, rem []int, cp int, e *entry, rank []int32) int32 {
	if load[rank[0]]+e.w <= cp {
		return rank[0]
	}
	for _, s := range rank[1:] {
		if load[s]+rem[s]+e.w <= cp {
			return s
		}
	}
	return pickFirst(load, rem, cp, e, rank)
}

// pickMargin is pickUnclaimed asking first for a margin of cap/div
// releases of unclaimed room, to spread the slack over more shards.
func pickMargin(div int) pickFn {
	return func(load, rem []int, cp int, e *entry, rank []int32) int32 {
		if load[rank[0]]+e.w <= cp {
			return rank[0]
		}
		for _, s := range rank[1:] {
			if load[s]+rem[s]+e.w+cp/div <= cp {
				return s
			}
		}
		return pickUnclaimed(load, rem, cp, e, rank)
	}
}

// pickRoomiest: the first choice if it has room, else the one of the next
// k choices with the most room, else pickFirst.
func pickRoomiest(k int) pickFn {
	return func(load, rem []int, cp int, e *entry, rank []int32) int32 {
		if load[rank[0]]+e.w <= cp {
			return rank[0]
		}
		best := int32(-1)
		for _, s := range rank[1:min(len(rank), k+1)] {
			if load[s]+e.w <= cp && (best < 0 || load[s] < load[best]) {
				best = s
			}
		}
		if best >= 0 {
			return best
		}
		return pickFirst(load, rem, cp, e, rank)
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
		slices.SortFunc(es, weightOrder) // heaviest first
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
