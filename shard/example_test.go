package shard_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/cozystack/cozy-aio/shard"
)

func ExampleAssign() {
	tenants := []shard.Tenant{
		{ID: "tenant-a", Weight: 40},
		{ID: "tenant-b", Weight: 25},
		{ID: "tenant-c", Weight: 20},
		{ID: "tenant-d", Weight: 10},
		{ID: "tenant-e", Weight: 5},
	}
	a, err := shard.Assign(tenants, shard.Range(3), shard.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("capacity:", a.Capacity)
	fmt.Println("load:", a.Load)
	s, _ := a.Lookup("tenant-a")
	fmt.Println("tenant-a on shard", s)
	// Output:
	// capacity: 34
	// load: [40 30 30]
	// tenant-a on shard 0
}

func ExampleCount() {
	// 5,200 releases at 100 per shard, the heaviest tenant holding 400:
	// more than 13 shards could not lower the largest load.
	fmt.Println(shard.Count(0, 5200, 400, shard.CountOptions{}))
	// Later, with the heaviest tenant at 100: 1,350 releases would want
	// 14 shards, but that is within 10% of 13·100, so the count stays.
	fmt.Println(shard.Count(13, 1350, 100, shard.CountOptions{}))
	// At 1,450 it would grow to 14, floor(1450/100), but the heaviest
	// tenant's limit rises with the same 10% hysteresis: 1450/(100·1.1)
	// allows 13, so the count stays.
	fmt.Println(shard.Count(13, 1450, 100, shard.CountOptions{}))
	// At 1,600 it grows to 14 = floor(1600/110), not 16.
	fmt.Println(shard.Count(13, 1600, 100, shard.CountOptions{}))
	// Output:
	// 13
	// 13
	// 13
	// 14
}

func ExamplePool() {
	pool := shard.NewPool(shard.PoolOptions{Shards: 2, Workers: 2})
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := map[string]bool{}
	for _, key := range []string{"tenant-a/redis", "tenant-a/postgres", "tenant-b/kafka"} {
		wg.Add(1)
		tenant := key[:len("tenant-a")]
		pool.Add(tenant, key, func(ctx context.Context) error {
			defer wg.Done()
			mu.Lock()
			done[key] = true
			mu.Unlock()
			return nil
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- pool.Start(ctx) }()
	wg.Wait()
	cancel()
	fmt.Println("start:", <-errc)
	fmt.Println("done:", len(done))
	for _, t := range pool.Stats().Tenants {
		fmt.Printf("%s: %d succeeded\n", t.ID, t.Succeeded)
	}
	// Output:
	// start: <nil>
	// done: 3
	// tenant-a: 2 succeeded
	// tenant-b: 1 succeeded
}

func ExampleSpread() {
	replicas := []string{"cozy-aio-0", "cozy-aio-1", "cozy-aio-2"}
	shards := shard.Range(8)
	owner := shard.Spread(shards, replicas)
	for _, r := range replicas {
		var own []int
		for _, s := range shards {
			if owner[s] == r {
				own = append(own, s)
			}
		}
		fmt.Println(r, "holds the Leases of shards", own)
	}
	// When cozy-aio-1 leaves, its shards need a new owner; here no other
	// shard moves.
	after := shard.Spread(shards, []string{"cozy-aio-2", "cozy-aio-0"})
	for _, s := range shards {
		if after[s] != owner[s] {
			fmt.Printf("shard %d: %s → %s\n", s, owner[s], after[s])
		}
	}
	// Output:
	// cozy-aio-0 holds the Leases of shards [2 3 7]
	// cozy-aio-1 holds the Leases of shards [1 4 6]
	// cozy-aio-2 holds the Leases of shards [0 5]
	// shard 1: cozy-aio-1 → cozy-aio-2
	// shard 4: cozy-aio-1 → cozy-aio-0
	// shard 6: cozy-aio-1 → cozy-aio-2
}

func ExampleOptions_previous() {
	// 1,000 tenants, one of them heavy, on 16 shards, then on 17.
	var tenants []shard.Tenant
	total := 0
	for i := range 1000 {
		w := 1 + i%9
		if i == 0 {
			w = 250
		}
		tenants = append(tenants, shard.Tenant{ID: fmt.Sprintf("tenant-%04d", i), Weight: w})
		total += w
	}
	before, _ := shard.Assign(tenants, shard.Range(16), shard.Options{})
	moved := func(after shard.Assignment) int {
		w := 0
		for _, t := range tenants {
			if before.Tenants[t.ID] != after.Tenants[t.ID] {
				w += t.Weight
			}
		}
		return w
	}
	without, _ := shard.Assign(tenants, shard.Range(17), shard.Options{})
	with, _ := shard.Assign(tenants, shard.Range(17), shard.Options{Previous: before.Tenants})
	// Without memory the placement is replayed and tenants move between
	// old shards too; with memory only what the old shards hold above the
	// new bound moves, to the new shard.
	fmt.Printf("optimal %d, without memory %d, with memory %d\n", total/17, moved(without), moved(with))
	// Output:
	// optimal 308, without memory 421, with memory 224
}
