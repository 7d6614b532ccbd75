package shard

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// The replicas study: the engine's replicas each keep an anchored
// placement (Placement.Anchor) and the leader publishes its assignment as
// the shared anchor. This simulates that protocol with three placements,
// fed the same changes in different orders, against one process with a
// sticky placement fed them in the leader's order. The full report runs
// only with -replicas:
//
//	go test ./shard -run TestReplicaProtocol -v -args -replicas

var replicasFlag = flag.Bool("replicas", false, "run the replicas protocol report (slow)")

// replicaFigures are one run of the protocol.
type replicaFigures struct {
	churn, sticky, snapshot float64 // moved % of the surviving weight: replicas, one sticky process, Assign with Previous
	up, upSticky            float64 // N→N+1 moved/optimal: replicas, one sticky process
	publications, rounds    int     // publications over the run; most rounds one needed to settle
}

// runReplicaProtocol applies 1% churn one tenant at a time, the leader
// publishing every `every` changes, then a resize to N+1.
func runReplicaProtocol(t testing.TB, shape string, seed uint64, n, every int) replicaFigures {
	ts := shapeWorkload(shape, seed)
	after := shapeChurn(shape, ts, seed, false)
	a0, err := Assign(ts, Range(n), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var reps [3]*Placement
	for i := range reps {
		if reps[i], err = NewPlacement(ts, Range(n), Options{}); err != nil {
			t.Fatal(err)
		}
		if moves, err := reps[i].Anchor(Range(n), a0.Tenants); err != nil || len(moves) != 0 {
			t.Fatalf("anchoring to the placement itself moved %d (error %v)", len(moves), err)
		}
	}
	sticky, err := NewPlacement(ts, Range(n), Options{Sticky: true})
	if err != nil {
		t.Fatal(err)
	}
	// The changes: removals and arrivals interleaved; replica i sees them
	// in its own order (a rotation and a reversal of the leader's).
	in := map[string]bool{}
	for _, tn := range after {
		in[tn.ID] = true
	}
	type change struct {
		t      Tenant
		remove bool
	}
	var changes []change
	was := map[string]bool{}
	for _, tn := range ts {
		was[tn.ID] = true
		if !in[tn.ID] {
			changes = append(changes, change{t: tn, remove: true})
		}
	}
	for _, tn := range after {
		if !was[tn.ID] {
			changes = append(changes, change{t: tn})
		}
	}
	r := newRand(seed + uint64(n))
	r.Shuffle(len(changes), func(i, j int) { changes[i], changes[j] = changes[j], changes[i] })
	orders := [3][]change{changes, append(slices.Clone(changes[len(changes)/3:]), changes[:len(changes)/3]...), slices.Clone(changes)}
	slices.Reverse(orders[2])
	apply := func(p *Placement, c change) {
		if c.remove {
			p.Remove(c.t.ID)
		} else if _, err := p.Set(c.t); err != nil {
			t.Fatal(err)
		}
	}
	var f replicaFigures
	// publish is the leader's loop: publish its assignment until it stays.
	publish := func(shards []int, tenants map[string]int) {
		for round := 1; ; round++ {
			f.publications++
			f.rounds = max(f.rounds, round)
			var moved int
			for i, p := range reps {
				moves, err := p.Anchor(shards, tenants)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					moved = len(moves)
				}
			}
			next := reps[0].Assignment()
			if moved == 0 && maps.Equal(next.Tenants, tenants) || round == 10 {
				return
			}
			shards, tenants = next.Shards, next.Tenants
		}
	}
	for k := range changes {
		for i, p := range reps {
			apply(p, orders[i][k])
		}
		apply(sticky, changes[k])
		if (k+1)%every == 0 {
			publish(Range(n), reps[0].Assignment().Tenants)
		}
	}
	publish(Range(n), reps[0].Assignment().Tenants)
	final := reps[0].Assignment()
	for i, p := range reps[1:] {
		if !maps.Equal(p.Assignment().Tenants, final.Tenants) {
			t.Fatalf("%s seed %d N=%d: replica %d disagrees with the leader", shape, seed, n, i+1)
		}
	}
	surv := float64(survivingWeight(ts, after))
	f.churn = 100 * float64(movedWeight(a0.Tenants, final.Tenants, after)) / surv
	f.sticky = 100 * float64(movedWeight(a0.Tenants, sticky.Assignment().Tenants, after)) / surv
	snap, err := Assign(after, Range(n), Options{Previous: a0.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	f.snapshot = 100 * float64(movedWeight(a0.Tenants, snap.Tenants, after)) / surv

	// A shard count change: the leader publishes the new shard IDs with
	// the assignment it has, then the result.
	total, _ := totalWeight(after)
	opt := float64(total) / float64(n+1)
	publish(Range(n+1), final.Tenants)
	up := reps[0].Assignment()
	for i, p := range reps[1:] {
		if !maps.Equal(p.Assignment().Tenants, up.Tenants) {
			t.Fatalf("%s seed %d N=%d→%d: replica %d disagrees with the leader", shape, seed, n, n+1, i+1)
		}
	}
	f.up = float64(movedWeight(final.Tenants, up.Tenants, after)) / opt
	sb := sticky.Assignment().Tenants
	if _, err := sticky.Resize(Range(n + 1)); err != nil {
		t.Fatal(err)
	}
	f.upSticky = float64(movedWeight(sb, sticky.Assignment().Tenants, after)) / opt
	return f
}

// TestReplicaProtocol checks that three replicas fed the same changes in
// different orders agree after each publication settles, and that they
// move no more than one sticky process; with -replicas it prints the
// report of docs/benchmarks/shard.md.
func TestReplicaProtocol(t *testing.T) {
	shapesRun, ns, seeds := []string{"giants"}, []int{16}, shapeSeeds[:1]
	if *replicasFlag {
		shapesRun, ns, seeds = shapes, []int{8, 16, 32, 64}, shapeSeeds[:3]
	}
	var b strings.Builder
	fmt.Fprintln(&b, "| shape | N | churn 1%, replicas | one sticky process | Assign with Previous | N→N+1 moved/optimal, replicas | one sticky process | anchor rounds, total | most rounds per publication |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|")
	for _, shape := range shapesRun {
		for _, n := range ns {
			var fs []replicaFigures
			for _, seed := range seeds {
				if shape == "equal" && seed != seeds[0] {
					continue // 50,000 tenants: one seed
				}
				f := runReplicaProtocol(t, shape, seed, n, 20)
				fs = append(fs, f)
				if f.churn > f.sticky+0.5 || f.up > f.upSticky+0.1 {
					t.Errorf("%s seed %d N=%d: replicas moved %.3f%% / %.3f, one sticky process %.3f%% / %.3f", shape, seed, n, f.churn, f.up, f.sticky, f.upSticky)
				}
			}
			span := func(get func(replicaFigures) float64, format string) string {
				v := make([]float64, len(fs))
				for i, f := range fs {
					v[i] = get(f)
				}
				slices.Sort(v)
				return fmt.Sprintf(format+" / "+format+" / "+format, v[0], v[len(v)/2], v[len(v)-1])
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", shape, n,
				span(func(f replicaFigures) float64 { return f.churn }, "%.3f"),
				span(func(f replicaFigures) float64 { return f.sticky }, "%.3f"),
				span(func(f replicaFigures) float64 { return f.snapshot }, "%.3f"),
				span(func(f replicaFigures) float64 { return f.up }, "%.3f"),
				span(func(f replicaFigures) float64 { return f.upSticky }, "%.3f"),
				span(func(f replicaFigures) float64 { return float64(f.publications) }, "%.0f"),
				span(func(f replicaFigures) float64 { return float64(f.rounds) }, "%.0f"))
		}
	}
	t.Log("\n" + b.String())
}

// BenchmarkAnchoredChurn times what a replica does per HelmRelease tenant
// change: one update of an anchored Placement (the 1% churn of
// BenchmarkChurn, one tenant at a time), beside the same churn on a sticky
// Placement in the same run.
func BenchmarkAnchoredChurn(b *testing.B) {
	ts := workload("lognormal", benchTenants, benchSeed)
	next := churn("lognormal", ts)
	in := map[string]bool{}
	for _, t := range next {
		in[t.ID] = true
	}
	for _, n := range []int{16, 64} {
		for _, mode := range []string{"anchored", "sticky"} {
			b.Run(fmt.Sprintf("mode=%s/tenants=%d/N=%d", mode, len(ts), n), func(b *testing.B) {
				var updates int
				var p *Placement
				for b.Loop() {
					b.StopTimer()
					p, _ = NewPlacement(ts, Range(n), Options{Sticky: mode == "sticky"})
					if mode == "anchored" {
						if _, err := p.Anchor(Range(n), p.Assignment().Tenants); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					updates = 0
					for _, t := range ts {
						if !in[t.ID] {
							p.Remove(t.ID)
							updates++
						}
					}
					for _, t := range next {
						if old, ok := p.tenants[t.ID]; ok && old.w == t.Weight {
							continue
						}
						if _, err := p.Set(t); err != nil {
							b.Fatal(err)
						}
						updates++
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(max(updates, 1)), "us/update")
			})
		}
	}
}
