package shard

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// Benchmarks report balance and movement with b.ReportMetric; the figures
// are deterministic (seeded workloads), only ns/op depends on the machine.
// Run: go test -run '^$' -bench . -benchtime 3x ./shard

func benchName(a, dist string, n any) string {
	return fmt.Sprintf("algo=%s/dist=%s/tenants=%d/N=%v", a, dist, benchTenants, n)
}

func BenchmarkAssign(b *testing.B) {
	for _, dist := range dists {
		ts := workload(dist, benchTenants, benchSeed)
		for _, n := range []int{8, 16, 32, 64} {
			shards := Range(n)
			for _, al := range algos {
				if al.name == "sticky" {
					continue // from scratch it is bounded
				}
				b.Run(benchName(al.name, dist, n), func(b *testing.B) {
					b.ReportAllocs()
					var a map[string]int
					cpu := cpuTime()
					for b.Loop() {
						a = al.next(nil, ts, shards)
					}
					if cpu > 0 {
						b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
					}
					mx, mean, lower := measure(a, ts, shards)
					b.ReportMetric(float64(mx)/mean, "max/mean")
					b.ReportMetric(float64(mx)/lower, "max/lowerbound")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ts)), "ns/tenant")
				})
			}
		}
	}
}

func BenchmarkResize(b *testing.B) {
	cases := []struct {
		name     string
		from, to []int
	}{
		{"16to17", Range(16), Range(17)},
		{"17to16", Range(17), without(Range(17), 8)}, // a middle shard removed
		{"16to32", Range(16), Range(32)},
	}
	for _, dist := range dists {
		ts := workload(dist, benchTenants, benchSeed)
		total, _ := totalWeight(ts)
		for _, c := range cases {
			optimal := math.Abs(float64(len(c.to)-len(c.from))) / float64(max(len(c.to), len(c.from)))
			for _, al := range algos {
				b.Run(benchName(al.name, dist, c.name), func(b *testing.B) {
					before := al.next(nil, ts, c.from)
					var after map[string]int
					for b.Loop() {
						after = al.next(before, ts, c.to)
					}
					moved := float64(movedWeight(before, after, ts)) / float64(total)
					mx, mean, _ := measure(after, ts, c.to)
					b.ReportMetric(100*moved, "moved-%")
					b.ReportMetric(moved/optimal, "moved/optimal")
					b.ReportMetric(float64(mx)/mean, "max/mean-after")
				})
			}
		}
	}
}

// churn returns the snapshot after 1% of tenants leave and 1% arrive.
func churn(dist string, ts []Tenant) []Tenant {
	r := newRand(benchSeed + 1)
	out := slices.Clone(ts)
	k := len(ts) / 100
	for range k {
		i := r.IntN(len(out))
		if out[i].ID == noisyID {
			continue
		}
		out = slices.Delete(out, i, i+1)
	}
	fresh := workload(dist, k, benchSeed+2)
	for i, t := range fresh {
		out = append(out, Tenant{ID: fmt.Sprintf("arrival-%05d", i), Weight: t.Weight})
	}
	return out
}

// drift returns the snapshot after 10% of tenants gain or lose a release.
func drift(ts []Tenant) []Tenant {
	r := newRand(benchSeed + 3)
	out := slices.Clone(ts)
	for _, i := range r.Perm(len(out))[:len(out)/10] {
		if r.IntN(2) == 0 || out[i].Weight == 0 {
			out[i].Weight++
		} else {
			out[i].Weight--
		}
	}
	return out
}

func BenchmarkChurn(b *testing.B) { benchChange(b, churn) }

func BenchmarkDrift(b *testing.B) {
	benchChange(b, func(_ string, ts []Tenant) []Tenant { return drift(ts) })
}

// benchChange measures one change of the snapshot. For bounded and sticky
// the timed operation is the incremental update of a Placement, as the pool
// does it, one tenant at a time; for the baselines it is their update rule.
func benchChange(b *testing.B, change func(dist string, ts []Tenant) []Tenant) {
	for _, dist := range dists {
		ts := workload(dist, benchTenants, benchSeed)
		next := change(dist, ts)
		total, _ := totalWeight(ts)
		for _, n := range []int{16, 64} {
			shards := Range(n)
			for _, al := range algos {
				b.Run(benchName(al.name, dist, n), func(b *testing.B) {
					before := al.next(nil, ts, shards)
					var after map[string]int
					switch al.name {
					case "bounded":
						after = benchIncremental(b, ts, next, shards)
					case "sticky":
						after = benchSticky(b, ts, next, shards)
					default:
						for b.Loop() {
							after = al.next(before, next, shards)
						}
					}
					moved := float64(movedWeight(before, after, next)) / float64(total)
					mx, mean, _ := measure(after, next, shards)
					b.ReportMetric(100*moved, "moved-%")
					b.ReportMetric(100*float64(changedWeight(ts, next))/float64(total), "changed-%")
					b.ReportMetric(float64(mx)/mean, "max/mean-after")
				})
			}
		}
	}
}

// changedWeight is the weight the change itself adds or removes, tenant by
// tenant: that of tenants that left or arrived, and the difference for
// those whose weight changed. moved-% counts none of it, only surviving
// tenants that change shard; changed-% puts it in proportion.
func changedWeight(before, after []Tenant) int {
	w := map[string]int{}
	for _, t := range before {
		w[t.ID] -= t.Weight
	}
	for _, t := range after {
		w[t.ID] += t.Weight
	}
	sum := 0
	for _, d := range w {
		sum += max(d, -d)
	}
	return sum
}

// benchIncremental times applying the difference between two snapshots to
// a Placement, and checks the result against a full recompute.
func benchIncremental(b *testing.B, from, to []Tenant, shards []int) map[string]int {
	want, err := Assign(to, shards, Options{})
	if err != nil {
		b.Fatal(err)
	}
	weights := map[string]int{}
	for _, t := range to {
		weights[t.ID] = t.Weight
	}
	var p *Placement
	var updates int
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		p, _ = NewPlacement(from, shards, Options{})
		b.StartTimer()
		start := time.Now()
		updates = 0
		for _, t := range from {
			if _, ok := weights[t.ID]; !ok {
				p.Remove(t.ID)
				updates++
			}
		}
		for _, t := range to {
			if old, ok := p.tenants[t.ID]; ok && old.w == t.Weight {
				continue
			}
			if _, err := p.Set(t); err != nil {
				b.Fatal(err)
			}
			updates++
		}
		took += time.Since(start)
	}
	b.ReportMetric(float64(updates), "updates")
	b.ReportMetric(float64(took.Microseconds())/float64(b.N)/float64(max(updates, 1)), "us/update")
	got := p.Assignment().Tenants
	for id, s := range want.Tenants {
		if got[id] != s {
			b.Fatalf("incremental placement of %s differs from recompute", id)
		}
	}
	return got
}

// benchSticky times applying the difference between two snapshots to a
// sticky Placement, removals first, and returns the assignment after.
func benchSticky(b *testing.B, from, to []Tenant, shards []int) map[string]int {
	weights := map[string]int{}
	for _, t := range to {
		weights[t.ID] = t.Weight
	}
	var p *Placement
	var updates int
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		p, _ = NewPlacement(from, shards, Options{Sticky: true})
		b.StartTimer()
		start := time.Now()
		updates = 0
		for _, t := range from {
			if _, ok := weights[t.ID]; !ok {
				p.Remove(t.ID)
				updates++
			}
		}
		for _, t := range to {
			if old, ok := p.tenants[t.ID]; ok && old.w == t.Weight {
				continue
			}
			if _, err := p.Set(t); err != nil {
				b.Fatal(err)
			}
			updates++
		}
		took += time.Since(start)
	}
	b.ReportMetric(float64(updates), "updates")
	b.ReportMetric(float64(took.Microseconds())/float64(b.N)/float64(max(updates, 1)), "us/update")
	return p.Assignment().Tenants
}

func BenchmarkNoisy(b *testing.B) {
	ts := workload("noisy", benchTenants, benchSeed)
	for _, n := range []int{16, 32, 64} {
		shards := Range(n)
		for _, al := range algos {
			if al.name == "sticky" {
				continue // from scratch it is bounded
			}
			b.Run(benchName(al.name, "noisy", n), func(b *testing.B) {
				var a map[string]int
				for b.Loop() {
					a = al.next(nil, ts, shards)
				}
				mx, mean, lower := measure(a, ts, shards)
				cotenants, coload := 0, 0
				for _, t := range ts {
					if t.ID != noisyID && a[t.ID] == a[noisyID] {
						cotenants++
						coload += t.Weight
					}
				}
				b.ReportMetric(float64(mx)/lower, "max/lowerbound")
				b.ReportMetric(float64(coload)/mean, "cotenant-load/mean")
				b.ReportMetric(float64(cotenants), "cotenants")
			})
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	ts := workload("lognormal", benchTenants, benchSeed)
	shards := Range(64)
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	for _, al := range algos {
		if al.name == "sticky" {
			continue // a Placement's Lookup, as bounded
		}
		b.Run(benchName(al.name, "lognormal", 64), func(b *testing.B) {
			b.ReportAllocs()
			var lookup func(string) (int, bool)
			switch al.name {
			case "bounded":
				p, _ := NewPlacement(ts, shards, Options{})
				lookup = p.Lookup
			case "rendezvous":
				// Plain rendezvous needs no table: it scores every shard.
				seeds := make([]uint64, len(shards))
				for i, s := range shards {
					seeds[i] = shardSeed(s)
				}
				lookup = func(id string) (int, bool) { return shards[rendezvousIndex(tenantHash(id), seeds)], true }
			default:
				a := al.next(nil, ts, shards)
				lookup = func(id string) (int, bool) { s, ok := a[id]; return s, ok }
			}
			// One op looks up every tenant once, so that a few iterations
			// are enough for a stable figure.
			for b.Loop() {
				for _, id := range ids {
					if _, ok := lookup(id); !ok {
						b.Fatal("tenant not found")
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ids)), "ns/lookup")
		})
	}
}
