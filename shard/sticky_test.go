package shard

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
)

func stickyNext(prev map[string]int, ts []Tenant, shards []int) map[string]int {
	a, err := Assign(ts, shards, Options{Previous: prev})
	if err != nil {
		panic(err)
	}
	return a.Tenants
}

// TestStickyWithoutMemoryIsAssign checks that with a Previous that names no
// tenant of the snapshot, placement with memory is placement without.
func TestStickyWithoutMemoryIsAssign(t *testing.T) {
	for _, shape := range shapes {
		ts := shapeWorkload(shape, 9)
		for _, n := range []int{3, 16, 64} {
			want, err := Assign(ts, Range(n), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Assign(ts, Range(n), Options{Previous: map[string]int{"gone": 0}})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Tenants, want.Tenants) || !slices.Equal(got.Load, want.Load) {
				t.Errorf("%s N=%d: with an unrelated Previous the assignment differs from Assign", shape, n)
			}
		}
	}
}

// TestStickyPlacementEqualsAssign applies random additions, removals,
// weight changes and resizes to a sticky Placement and checks after each
// that it equals Assign over the snapshot with the assignment before as
// Previous, that the moves explain the change, and that the balance holds.
func TestStickyPlacementEqualsAssign(t *testing.T) {
	cases := []struct {
		dist    string
		tenants int
		shards  []int
	}{
		{"lognormal", 300, Range(4)},
		{"zipf", 500, []int{1, 5, 7, 11, 13}},
		{"noisy", 400, Range(8)},
		{"lognormal", 50, Range(1)},
		{"lognormal", 12, Range(16)}, // empty shards: fresh ones get filled
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/tenants=%d/N=%d", c.dist, c.tenants, len(c.shards)), func(t *testing.T) {
			r := newRand(uint64(c.tenants) + 1)
			snap := map[string]int{}
			for _, tn := range workload(c.dist, c.tenants, 4) {
				snap[tn.ID] = tn.Weight
			}
			opts := Options{Sticky: true}
			p, err := NewPlacement(tenantsOf(snap), c.shards, opts)
			if err != nil {
				t.Fatal(err)
			}
			shards := c.shards
			prev := p.Assignment().Tenants
			for step := range 300 {
				ids := slices.Sorted(maps.Keys(snap))
				var moves []Move
				switch op := r.IntN(20); {
				case op < 6 || len(ids) == 0:
					id := fmt.Sprintf("new-%d", step)
					w := r.IntN(30)
					if r.IntN(20) == 0 {
						w = r.IntN(2000)
					}
					snap[id] = w
					moves, err = p.Set(Tenant{ID: id, Weight: w})
				case op < 12:
					id := ids[r.IntN(len(ids))]
					delete(snap, id)
					moves = p.Remove(id)
				case op < 19:
					id := ids[r.IntN(len(ids))]
					w := max(0, snap[id]+r.IntN(7)-3)
					if r.IntN(10) == 0 {
						w = r.IntN(300)
					}
					snap[id] = w
					moves, err = p.Set(Tenant{ID: id, Weight: w})
				default:
					// Add a shard or drop a random one, not the last.
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
				want, err := Assign(tenantsOf(snap), shards, Options{Previous: prev})
				if err != nil {
					t.Fatal(err)
				}
				got := p.Assignment()
				if !maps.Equal(got.Tenants, want.Tenants) || !slices.Equal(got.Load, want.Load) || got.Capacity != want.Capacity {
					t.Fatalf("step %d: sticky placement differs from Assign with Previous", step)
				}
				for id := range snap {
					if s, ok := p.Lookup(id); !ok || s != got.Tenants[id] {
						t.Fatalf("step %d: Lookup(%s) = %d, %v; want %d", step, id, s, ok, got.Tenants[id])
					}
				}
				checkMoves(t, prev, got.Tenants, moves)
				if len(snap) > 0 {
					mx, _, lower := measure(got.Tenants, tenantsOf(snap), shards)
					if float64(mx) > 1.02*lower {
						fresh, _ := Assign(tenantsOf(snap), shards, Options{})
						fm, _, _ := measure(fresh.Tenants, tenantsOf(snap), shards)
						t.Fatalf("step %d: max/lowerbound = %.4f (without memory %.4f) shards %v loads %v cap %d heaviest %v total %d lower %v", step, float64(mx)/lower, float64(fm)/lower, shards, got.Load, got.Capacity, p.Heaviest(), p.Total(), lower)
					}
				}
				prev = got.Tenants
			}
		})
	}
}

// TestStickyInputOrderAndProcs checks that placement with memory does not
// depend on input order or GOMAXPROCS.
func TestStickyInputOrderAndProcs(t *testing.T) {
	ts := shapeWorkload("giants", 3)
	prev := stickyNext(nil, ts, Range(17))
	next := shapeChurn("giants", ts, 3, true)
	want, err := Assign(next, Range(16), Options{Previous: prev})
	if err != nil {
		t.Fatal(err)
	}
	r := newRand(11)
	for _, procs := range []int{1, 2, 7} {
		was := runtime.GOMAXPROCS(procs)
		shuffled := slices.Clone(next)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shards := Range(16)
		slices.Reverse(shards)
		got, err := Assign(shuffled, shards, Options{Previous: maps.Clone(prev)})
		runtime.GOMAXPROCS(was)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Tenants, want.Tenants) || !slices.Equal(got.Load, want.Load) {
			t.Fatalf("GOMAXPROCS=%d: sticky assignment depends on input order", procs)
		}
	}
}

// TestStickyTargets checks issue 21's targets for placement with memory on
// every weight shape, seed 73 (it holds the hardest bimodal resize) and
// N = 8, 16, 32, 64: max/lowerbound ≤ 1.02 in every state; N→N+1 and
// N+1→N move at most 1.3 times the optimal 1/(N+1) of the weight; a churn
// of 1% of the tenants moves at most 1% of the surviving weight. Where the
// balance target itself forces more (forcedMove: a giant on the removed
// shard, a heavy tenant leaving), the movement must be within 5% of that
// least possible instead. The full table is TestShapeReport.
func TestStickyTargets(t *testing.T) {
	al := algo{"sticky", stickyNext}
	for _, shape := range shapes {
		for _, seed := range []uint64{73} {
			for _, n := range []int{8, 16, 32, 64} {
				sc := runScenario(al, shape, seed, n)
				name := fmt.Sprintf("%s seed %d N=%d", shape, seed, n)
				if sc.balance > 1.02 {
					t.Errorf("%s: max/lowerbound %.4f > 1.02", name, sc.balance)
				}
				check := func(what string, got, least, target float64) {
					if got > target && got > 1.05*least {
						t.Errorf("%s: %s %.3f > %.3f, and the least possible is %.3f", name, what, got, target, least)
					}
				}
				check("N→N+1 moved/optimal", sc.up, sc.upForced, 1.3)
				check("N+1→N moved/optimal", sc.down, sc.downForced, 1.3)
				check("N+1→N, last shard removed, moved/optimal", sc.downLast, sc.downLastForced, 1.3)
				check("churn moved %", sc.churn, sc.churnF, 1)
				check("churn with the heaviest leaving moved %", sc.giantChurn, sc.giantChurF, 1)
			}
		}
	}
}
