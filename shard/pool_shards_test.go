package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestPoolRemoveMiddleShard drops a shard that is not the last: the other
// shards keep their IDs and, with a sticky placement, their tenants, and
// items of every tenant still run.
func TestPoolRemoveMiddleShard(t *testing.T) {
	var mu sync.Mutex
	var moved []Move
	p := NewPool(PoolOptions{Shards: 4, Assign: Options{Sticky: true}, Moved: func(m Move) {
		mu.Lock()
		moved = append(moved, m)
		mu.Unlock()
	}})
	before := map[string]int{}
	for i := range 40 {
		id := fmt.Sprintf("t%02d", i)
		if err := p.SetTenant(Tenant{ID: id, Weight: 1 + i%5}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		id := fmt.Sprintf("t%02d", i)
		before[id], _ = p.Lookup(id)
	}
	mu.Lock()
	moved = nil
	mu.Unlock()
	if err := p.RemoveShard(1); err != nil {
		t.Fatal(err)
	}
	if got := p.Shards(); !slices.Equal(got, []int{0, 2, 3}) {
		t.Fatalf("Shards() = %v, want [0 2 3]", got)
	}
	if ids := statIDs(p.Stats()); !slices.Equal(ids, []int{0, 2, 3}) {
		t.Fatalf("Stats shard IDs = %v, want [0 2 3]", ids)
	}
	movedFrom1 := 0
	for id, was := range before {
		now, _ := p.Lookup(id)
		switch {
		case now == 1:
			t.Errorf("tenant %s still on the removed shard", id)
		case was == 1:
			movedFrom1++
		case now != was:
			// The three shards must absorb shard 1's weight within the
			// bound; a tenant of another shard moves only if its shard
			// is over it.
			t.Logf("tenant %s moved from %d to %d", id, was, now)
		}
	}
	mu.Lock()
	if len(moved) < movedFrom1 || movedFrom1 == 0 {
		t.Errorf("Moved reported %d moves, %d tenants left shard 1", len(moved), movedFrom1)
	}
	mu.Unlock()

	stop := startPool(t, p)
	var wg sync.WaitGroup
	ran := map[int]int{}
	var rmu sync.Mutex
	for id := range before {
		wg.Add(1)
		p.Add(id, id+"/x", func(ctx context.Context) error {
			s, _ := FromContext(ctx)
			rmu.Lock()
			ran[s]++
			rmu.Unlock()
			wg.Done()
			return nil
		})
	}
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ran[1] != 0 || ran[0]+ran[2]+ran[3] != len(before) {
		t.Errorf("items ran per shard: %v", ran)
	}

	for _, bad := range []func() error{
		func() error { return p.RemoveShard(7) },
		func() error { return p.SetShards(nil) },
		func() error { return p.SetShards([]int{2, -1}) },
		func() error { return p.SetShards([]int{2, 2}) },
	} {
		if err := bad(); err == nil {
			t.Error("want an error")
		}
	}
	if err := p.SetShards([]int{5}); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveShard(5); err == nil {
		t.Error("RemoveShard of the only shard: want an error")
	}
}

func statIDs(st Stats) []int {
	var ids []int
	for _, s := range st.Shards {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestPlacementTotalAndHeaviest(t *testing.T) {
	p, err := NewPlacement([]Tenant{{"a", 3}, {"b", 9}, {"c", 9}, {"d", 0}}, Range(2), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total() != 21 {
		t.Errorf("Total() = %d, want 21", p.Total())
	}
	h := p.Heaviest()
	if h.Weight != 9 || (h.ID != "b" && h.ID != "c") {
		t.Errorf("Heaviest() = %+v, want b or c with 9", h)
	}
	p.Remove(h.ID)
	p.Set(Tenant{"a", 40})
	if h := p.Heaviest(); h != (Tenant{"a", 40}) || p.Total() != 49 {
		t.Errorf("after changes Heaviest() = %+v, Total() = %d; want a 40, 49", h, p.Total())
	}
	empty, _ := NewPlacement(nil, Range(1), Options{})
	if h := empty.Heaviest(); h != (Tenant{}) || empty.Total() != 0 {
		t.Errorf("empty: Heaviest() = %+v, Total() = %d", h, empty.Total())
	}
}
