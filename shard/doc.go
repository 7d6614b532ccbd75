// Package shard assigns tenants to in-process workers with weighted,
// deterministic, bounded-load rendezvous hashing, chooses the shard count
// automatically when asked, and runs a worker pool whose queues are fair
// across tenants. It does not import Helm or Kubernetes: tenants are IDs
// with a weight, and work items are plain funcs.
//
// # Assignment
//
// Assign is a pure function of a snapshot. Each tenant ranks the shards by
// score(xxhash64(tenant), shard); tenants are placed heaviest weight class
// first, and each takes the first shard in its ranking whose load stays
// within the capacity floor(c·W/N) (never below ceil(W/N)), with c = 1.02 by
// default, preferring, when its first choice is full, room that no tenant
// still to come claims as its first choice.
// The result does not depend on input order, and the hash and tie-breaks are
// frozen by a golden test.
//
//	a, err := shard.Assign(tenants, shard.Range(16), shard.Options{})
//	s, ok := a.Lookup("tenant-a") // no allocation
//
// Placement keeps an assignment up to date under Set, Remove and Resize,
// with the same result as Assign over the same snapshot, and reports the
// tenants that moved. Count picks a shard count from the total weight with
// hysteresis, also at the floor(W/w_max) limit; Placement.Total and
// Placement.Heaviest are its inputs.
//
// # Memory
//
// Without memory a resize or a churn replays the whole placement, and where
// a few tenants are very heavy that cascades through the full shards. With
// Options.Previous, Assign keeps every tenant on its previous shard unless
// the balance target makes it move: shards over the bound shed their
// lightest tenants, which go back home, to new shards or by the rule above,
// so a resize moves about the optimal 1/N and a churn of small tenants
// moves none. A Placement or Pool with Options.Sticky updates this way. A
// sticky placement depends on its history, so replicas that each derive the
// placement cannot use it; they anchor instead (Placement.Anchor,
// Pool.Anchor): each places as Assign with the same published Previous
// does, after every change, which depends on the tenants, the shards and
// that Previous only.
//
//	next, err := shard.Assign(tenants, shard.Range(17), shard.Options{Previous: a.Tenants})
//
// # Pool
//
// Pool runs work items keyed by (tenant, key) on N shards of workers. Inside
// a shard, tenants share workers by deficit round-robin over run time, each
// tenant has a concurrency cap, failing items back off exponentially without
// blocking the queue, and a key never runs on two workers at once, even
// while a resize moves its tenant. AddAfter queues a key after a delay, for
// periodic reconciliation. Start(ctx) blocks until ctx ends and the
// running items finish or the grace period expires. Stats returns load per
// shard, queue depths and wait times per tenant as data.
//
//	pool := shard.NewPool(shard.PoolOptions{Shards: 4})
//	pool.SetTenant(shard.Tenant{ID: "tenant-a", Weight: 12})
//	pool.Add("tenant-a", "tenant-a/redis", func(ctx context.Context) error {
//		return reconcile(ctx)
//	})
//	go pool.Start(ctx)
//
// # Replicas
//
// Several replicas of one process can share the shards, each shard run by
// the replica that holds its Lease. Spread is the pure function that says
// which replica should own each shard: rendezvous hashing of the replica
// IDs, bounded to ceil(S/R) shards per replica, so that a replica joining or
// leaving moves few shards; the hash is frozen by a golden test. A Pool with
// PoolOptions.Owned runs only the items of the shards it owns and keeps the
// others queued; Recheck wakes it when it gains a shard, and Drain waits for
// a shard's running items before its Lease is released.
//
//	owner := shard.Spread(shard.Range(16), []string{"cozy-aio-0", "cozy-aio-1"})
//	pool := shard.NewPool(shard.PoolOptions{Shards: 16, Owned: func(s int) bool {
//		return held[s].Load() // an atomic.Bool per Lease held
//	}})
//	// Lease of shard s acquired:
//	held[s].Store(true)
//	pool.Recheck()
//	// Before releasing it:
//	held[s].Store(false)
//	pool.Recheck()
//	err := pool.Drain(ctx, s)
package shard
