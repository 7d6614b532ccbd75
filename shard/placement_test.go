package shard

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// TestIncrementalEqualsRecompute applies random additions, removals and
// weight changes and checks after each that the Placement equals Assign
// over the same snapshot, and that the returned moves explain the change.
func TestIncrementalEqualsRecompute(t *testing.T) {
	cases := []struct {
		dist    string
		tenants int
		shards  []int
		opts    Options
	}{
		{"lognormal", 300, Range(4), Options{}},
		{"lognormal", 1000, Range(16), Options{}},
		{"zipf", 500, []int{1, 5, 7, 11, 13}, Options{}},
		{"noisy", 400, Range(8), Options{}},
		{"lognormal", 200, Range(3), Options{LoadFactor: 1.2}},
		{"lognormal", 50, Range(1), Options{}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/tenants=%d/N=%d", c.dist, c.tenants, len(c.shards)), func(t *testing.T) {
			r := newRand(uint64(c.tenants))
			snap := map[string]int{}
			for _, tn := range workload(c.dist, c.tenants, 3) {
				snap[tn.ID] = tn.Weight
			}
			p, err := NewPlacement(tenantsOf(snap), c.shards, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			prev := p.Assignment().Tenants
			for step := range 400 {
				ids := slices.Sorted(maps.Keys(snap))
				var moves []Move
				switch op := r.IntN(10); {
				case op < 3 || len(ids) == 0:
					id := fmt.Sprintf("new-%d", step)
					w := r.IntN(30)
					snap[id] = w
					moves, err = p.Set(Tenant{ID: id, Weight: w})
				case op < 6:
					id := ids[r.IntN(len(ids))]
					delete(snap, id)
					moves = p.Remove(id)
				default:
					id := ids[r.IntN(len(ids))]
					w := max(0, snap[id]+r.IntN(7)-3)
					if r.IntN(10) == 0 {
						w = r.IntN(200)
					}
					snap[id] = w
					moves, err = p.Set(Tenant{ID: id, Weight: w})
				}
				if err != nil {
					t.Fatal(err)
				}
				want, err := Assign(tenantsOf(snap), c.shards, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				got := p.Assignment()
				if !maps.Equal(got.Tenants, want.Tenants) || !slices.Equal(got.Load, want.Load) || got.Capacity != want.Capacity {
					t.Fatalf("step %d: incremental placement differs from recompute", step)
				}
				checkMoves(t, prev, got.Tenants, moves)
				prev = got.Tenants
			}
		})
	}
}

func TestResizeEqualsRecompute(t *testing.T) {
	ts := workload("lognormal", 2000, 8)
	p, err := NewPlacement(ts, Range(16), Options{})
	if err != nil {
		t.Fatal(err)
	}
	prev := p.Assignment().Tenants
	for _, shards := range [][]int{Range(17), slices.Delete(Range(17), 8, 9), Range(32), Range(1), Range(5)} {
		moves, err := p.Resize(shards)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Assign(ts, shards, Options{})
		got := p.Assignment()
		if !maps.Equal(got.Tenants, want.Tenants) || !slices.Equal(got.Load, want.Load) {
			t.Fatalf("Resize(%v) differs from recompute", shards)
		}
		checkMoves(t, prev, got.Tenants, moves)
		prev = got.Tenants
	}
	if _, err := p.Resize(nil); err == nil {
		t.Fatal("Resize(nil) with tenants: want error")
	}
	if s, ok := p.Lookup(ts[0].ID); !ok || s < 0 || s >= 5 {
		t.Fatalf("after failed Resize: Lookup = %d, %v", s, ok)
	}
}

// checkMoves checks that applying moves to before gives after.
func checkMoves(t *testing.T, before, after map[string]int, moves []Move) {
	t.Helper()
	got := maps.Clone(before)
	seen := map[string]bool{}
	for _, m := range moves {
		if seen[m.Tenant] {
			t.Fatalf("tenant %q moved twice in one update", m.Tenant)
		}
		seen[m.Tenant] = true
		if from, ok := before[m.Tenant]; (ok && from != m.From) || (!ok && m.From != -1) {
			t.Fatalf("move %+v: tenant was on %d (present %v)", m, from, ok)
		}
		if m.To == -1 {
			delete(got, m.Tenant)
		} else {
			got[m.Tenant] = m.To
		}
	}
	if !maps.Equal(got, after) {
		t.Fatalf("moves do not explain the change")
	}
}

func tenantsOf(snap map[string]int) []Tenant {
	ts := make([]Tenant, 0, len(snap))
	for id, w := range snap {
		ts = append(ts, Tenant{ID: id, Weight: w})
	}
	return ts
}

func TestPlacementNoOps(t *testing.T) {
	p, err := NewPlacement([]Tenant{{"a", 3}}, Range(2), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Remove("missing"); m != nil {
		t.Errorf("Remove(missing) = %v, want nil", m)
	}
	if m, err := p.Set(Tenant{"a", 3}); m != nil || err != nil {
		t.Errorf("Set(same weight) = %v, %v; want nil, nil", m, err)
	}
	if _, err := p.Set(Tenant{"a", -1}); err == nil {
		t.Error("Set(negative weight): want error")
	}
	if _, ok := p.Lookup("missing"); ok {
		t.Error("Lookup(missing) ok")
	}
	if p.Len() != 1 {
		t.Errorf("Len() = %d, want 1", p.Len())
	}
}
