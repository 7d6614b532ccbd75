package shard

import (
	"fmt"
	"math"
	"testing"
)

// noisyCounts runs Count for steps steps over base weights, each step
// drawing every weight anew within ±5% of its base, and returns how often
// the count changed. It fails if the count ever exceeds floor(W/w_max).
func noisyCounts(t *testing.T, base []int, steps int, opts CountOptions, seed uint64) int {
	t.Helper()
	r := newRand(seed)
	cur, changes := 0, 0
	for step := range steps {
		total, heaviest := 0, 0
		for _, b := range base {
			w := max(1, int(math.Round(float64(b)*(0.95+0.1*r.Float64()))))
			total += w
			heaviest = max(heaviest, w)
		}
		n := Count(cur, total, heaviest, opts)
		if n > max(1, total/heaviest) {
			t.Fatalf("step %d: Count = %d > floor(%d/%d) = %d", step, n, total, heaviest, total/heaviest)
		}
		if cur != 0 && n != cur {
			changes++
		}
		cur = n
	}
	return changes
}

// TestCountStableUnderNoise checks the count under ±5% weight noise, 1,000
// steps: where the heaviest tenant's limit binds (the case of issue 21),
// where the band of the target binds, and with few tenants whose total is
// as noisy as each weight.
func TestCountStableUnderNoise(t *testing.T) {
	giant := func(body, bodyWeight, heaviest int) []int {
		ws := []int{heaviest}
		for i := range body {
			ws = append(ws, bodyWeight/body+boolInt(i < bodyWeight%body))
		}
		return ws
	}
	cases := []struct {
		name string
		base []int
	}{
		// W/w_max around 15: the 56,435 releases, heaviest 3,763.
		{"heaviest limit binds", giant(1000, 56435-3763, 3763)},
		{"heaviest limit binds, 20 tenants", giant(19, 56435-3763, 3763)},
		// 1,000 releases in 100 tenants: 10 shards, at the band's edge.
		{"band binds", giant(99, 1000-10, 10)},
		{"band and limit bind, 8 tenants", giant(7, 700-100, 100)},
	}
	for _, c := range cases {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", c.name, seed), func(t *testing.T) {
				n := noisyCounts(t, c.base, 1000, CountOptions{}, seed)
				t.Logf("%d changes", n)
				if n > 3 {
					t.Errorf("count changed %d times in 1,000 noisy steps, want at most 3", n)
				}
			})
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestPoolAutoCountHeaviestFlip is issue 21's pool: an automatic count at
// the heaviest tenant's limit must not resize on every SetTenant that moves
// the heaviest tenant by one release.
func TestPoolAutoCountHeaviestFlip(t *testing.T) {
	p := NewPool(PoolOptions{})
	body := 56435 - 3763
	for i := range 500 {
		w := body/500 + boolInt(i < body%500)
		if err := p.SetTenant(Tenant{ID: fmt.Sprintf("t%03d", i), Weight: w}); err != nil {
			t.Fatal(err)
		}
	}
	shards := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.s.place.ids)
	}
	if err := p.SetTenant(Tenant{ID: "giant", Weight: 3763}); err != nil {
		t.Fatal(err)
	}
	if n := shards(); n != 14 {
		t.Fatalf("count with the giant at 3,763 = %d, want floor(56435/3763) = 14", n)
	}
	resizes, last := 0, shards()
	for i := range 200 {
		if err := p.SetTenant(Tenant{ID: "giant", Weight: 3762 + i%2}); err != nil {
			t.Fatal(err)
		}
		if n := shards(); n != last {
			resizes++
			last = n
		}
	}
	if resizes != 0 {
		t.Errorf("the pool resized %d times while the giant went 3,762 ↔ 3,763, want 0", resizes)
	}
	if last != 14 {
		t.Errorf("count = %d, want 14", last)
	}
	// Well past the margin the count does rise to the limit.
	if err := p.SetTenant(Tenant{ID: "giant", Weight: 3000}); err != nil {
		t.Fatal(err)
	}
	// 55,672/3,000 = 18.6 allows 18; with the 10% margin, 16.
	if n := shards(); n != 16 {
		t.Errorf("count with the giant at 3,000 = %d, want 16", n)
	}
}
