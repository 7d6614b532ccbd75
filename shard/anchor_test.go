package shard

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// TestAnchoredPlacementIsAssign applies random additions, removals, weight
// changes and resizes to an anchored Placement and checks after each that
// it equals Assign over the snapshot with the anchor as Previous, whatever
// came before; now and then it re-anchors to its own assignment, as a
// leader publishing it does, which must move nobody where the tenants are
// many and settle within a few rounds where they are few.
func TestAnchoredPlacementIsAssign(t *testing.T) {
	cases := []struct {
		dist    string
		tenants int
		shards  []int
	}{
		{"lognormal", 300, Range(4)},
		{"zipf", 500, []int{1, 5, 7, 11, 13}},
		{"noisy", 400, Range(8)},
		{"lognormal", 12, Range(16)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/tenants=%d/N=%d", c.dist, c.tenants, len(c.shards)), func(t *testing.T) {
			r := newRand(uint64(c.tenants) + 3)
			snap := map[string]int{}
			for _, tn := range workload(c.dist, c.tenants, 5) {
				snap[tn.ID] = tn.Weight
			}
			p, err := NewPlacement(tenantsOf(snap), c.shards, Options{})
			if err != nil {
				t.Fatal(err)
			}
			shards := c.shards
			anchor := p.Assignment().Tenants
			if moves, err := p.Anchor(shards, anchor); err != nil || len(moves) != 0 {
				t.Fatalf("anchoring to its own assignment: moves %v, error %v", moves, err)
			}
			for step := range 200 {
				ids := slices.Sorted(maps.Keys(snap))
				before := p.Assignment().Tenants
				var moves []Move
				switch op := r.IntN(20); {
				case op < 6 || len(ids) == 0:
					id := fmt.Sprintf("new-%d", step)
					snap[id] = r.IntN(30)
					moves, err = p.Set(Tenant{ID: id, Weight: snap[id]})
				case op < 12:
					id := ids[r.IntN(len(ids))]
					delete(snap, id)
					moves = p.Remove(id)
				case op < 18:
					id := ids[r.IntN(len(ids))]
					snap[id] = max(0, snap[id]+r.IntN(7)-3)
					moves, err = p.Set(Tenant{ID: id, Weight: snap[id]})
				default:
					shards = slices.Clone(shards)
					if r.IntN(2) == 0 || len(shards) == 1 {
						shards = append(shards, slices.Max(shards)+1+r.IntN(3))
					} else {
						i := r.IntN(len(shards))
						shards = append(shards[:i], shards[i+1:]...)
					}
					moves, err = p.Resize(shards)
				}
				if err != nil {
					t.Fatal(err)
				}
				want, err := Assign(tenantsOf(snap), shards, Options{Previous: anchor})
				if err != nil {
					t.Fatal(err)
				}
				got := p.Assignment()
				if !maps.Equal(got.Tenants, want.Tenants) || !slices.Equal(got.Load, want.Load) || got.Capacity != want.Capacity {
					t.Fatalf("step %d: anchored placement differs from Assign with the anchor as Previous", step)
				}
				for id := range snap {
					if s, ok := p.Lookup(id); !ok || s != got.Tenants[id] {
						t.Fatalf("step %d: Lookup(%s) = %d, %v; want %d", step, id, s, ok, got.Tenants[id])
					}
				}
				checkMoves(t, before, got.Tenants, moves)
				if r.IntN(4) == 0 {
					// The leader publishes its assignment as the new anchor
					// until that moves nobody: at once where the tenants
					// are many, within a few rounds where a shard was left
					// empty (a fresh shard is then filled).
					for round := 0; ; round++ {
						anchor = p.Assignment().Tenants
						moves, err := p.Anchor(shards, anchor)
						if err != nil {
							t.Fatal(err)
						}
						if len(moves) == 0 {
							break
						}
						if round == 3 {
							t.Fatalf("step %d: re-anchoring to the assignment still moves %d tenants after %d rounds", step, len(moves), round+1)
						}
						if len(snap) > 50 {
							t.Fatalf("step %d: re-anchoring to the assignment of %d tenants moved %d", step, len(snap), len(moves))
						}
					}
				}
			}
		})
	}
}

// TestAnchorFixedPoint checks, on every weight shape, after a churn and
// after a resize, that Assign with its own result as Previous returns that
// result: publishing an assignment as the shared anchor moves no tenant.
func TestAnchorFixedPoint(t *testing.T) {
	for _, shape := range shapes {
		for _, seed := range shapeSeeds[:2] {
			ts := shapeWorkload(shape, seed)
			for _, n := range []int{8, 16, 64} {
				a0, err := Assign(ts, Range(n), Options{})
				if err != nil {
					t.Fatal(err)
				}
				steps := []struct {
					name   string
					ts     []Tenant
					shards []int
				}{
					{"churn", shapeChurn(shape, ts, seed, false), Range(n)},
					{"churn-giant", shapeChurn(shape, ts, seed, true), Range(n)},
					{"grow", ts, Range(n + 1)},
					{"shrink", ts, Range(n - 1)},
				}
				for _, s := range steps {
					a1, err := Assign(s.ts, s.shards, Options{Previous: a0.Tenants})
					if err != nil {
						t.Fatal(err)
					}
					a2, err := Assign(s.ts, s.shards, Options{Previous: a1.Tenants})
					if err != nil {
						t.Fatal(err)
					}
					if !maps.Equal(a1.Tenants, a2.Tenants) {
						moved := 0
						for id, s := range a1.Tenants {
							if a2.Tenants[id] != s {
								moved++
							}
						}
						t.Errorf("%s seed %d N=%d %s: re-anchoring to the result moves %d tenants", shape, seed, n, s.name, moved)
					}
				}
			}
		}
	}
}

// TestAnchoredPoolsAgree gives two pools the same tenants in different
// orders, one of them with detours (a tenant added and removed, a weight
// changed and changed back), and the same anchor: they place alike.
func TestAnchoredPoolsAgree(t *testing.T) {
	ts := shapeWorkload("giants", 71)[:2000]
	anchorA, err := Assign(ts[:1900], Range(8), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewPool(PoolOptions{Shards: 8}), NewPool(PoolOptions{})
	if err := a.Anchor(Range(8), anchorA.Tenants); err != nil {
		t.Fatal(err)
	}
	for _, tn := range ts {
		if err := a.SetTenant(tn); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(ts) - 1; i >= 0; i-- {
		tn := ts[i]
		if i%50 == 0 {
			_ = b.SetTenant(Tenant{ID: "detour", Weight: 900})
			_ = b.SetTenant(Tenant{ID: tn.ID, Weight: tn.Weight + 400})
			b.RemoveTenant("detour")
		}
		if err := b.SetTenant(tn); err != nil {
			t.Fatal(err)
		}
	}
	// b anchors only now, over a different automatic count.
	if err := b.Anchor(Range(8), anchorA.Tenants); err != nil {
		t.Fatal(err)
	}
	ga, gb := a.Assignment(), b.Assignment()
	if !maps.Equal(ga.Tenants, gb.Tenants) {
		t.Fatal("two pools with the same tenants and anchor place differently")
	}
	want, _ := Assign(ts, Range(8), Options{Previous: anchorA.Tenants})
	if !maps.Equal(ga.Tenants, want.Tenants) {
		t.Fatal("anchored pool differs from Assign with the anchor as Previous")
	}
	if got := b.Shards(); !slices.Equal(got, Range(8)) {
		t.Fatalf("anchored pool shards %v, want 0..7", got)
	}
	total, heaviest := a.Weights()
	wt, wh := totalWeight(ts)
	if total != wt || heaviest.Weight != wh {
		t.Fatalf("Weights() = %d, %v; want %d and weight %d", total, heaviest, wt, wh)
	}
}
