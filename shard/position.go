package shard

import (
	"fmt"
	"time"
)

// Place says where a queued item stands and why it has not started, for
// an operator asking "is it waiting its turn, or was it never seen?".
type Place struct {
	// Shard is the shard the item's tenant is placed on.
	Shard int
	// Position is the item's place in its tenant's queue, from 1.
	Position int
	// TenantQueued is the number of the tenant's items ready to run.
	TenantQueued int
	// ShardQueued is the number of items ready to run on the shard, of
	// every tenant placed there.
	ShardQueued int
	// TenantRunning and TenantLimit are the tenant's running items and its
	// cap (PoolOptions.TenantLimit).
	TenantRunning, TenantLimit int
	// ShardRunning and Workers are the items running on the shard and its
	// number of workers.
	ShardRunning, Workers int
	// Owned is false when the shard belongs to another replica
	// (PoolOptions.Owned).
	Owned bool
	// Waited is how long the item has been ready to run.
	Waited time.Duration
}

// Reason says in words why the item has not started.
func (p Place) Reason(tenant string) string {
	switch {
	case !p.Owned:
		return fmt.Sprintf("shard %d is owned by another replica", p.Shard)
	case p.TenantRunning >= p.TenantLimit:
		return fmt.Sprintf("tenant %s is at its concurrency cap of %d", tenant, p.TenantLimit)
	case p.ShardRunning >= p.Workers:
		return fmt.Sprintf("all %d workers of shard %d are busy", p.Workers, p.Shard)
	default:
		return "waiting its turn"
	}
}

// String is a one-line summary: shard, position and reason.
func (p Place) String() string {
	return fmt.Sprintf("shard %d, position %d of the tenant's %d queued, %d queued on the shard",
		p.Shard, p.Position, p.TenantQueued, p.ShardQueued)
}

// Queued returns where the item (tenant, key) stands when it is ready to
// run and has not started; false when it is running, backing off, done or
// unknown.
func (p *Pool) Queued(tenant, key string) (Place, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	it := p.s.items[itemKey{tenant, key}]
	t := p.s.tenants[tenant]
	if it == nil || t == nil || it.state != queued || t.shard < 0 {
		return Place{}, false
	}
	pl := Place{
		Shard:         t.shard,
		TenantQueued:  len(t.ready),
		TenantRunning: t.running,
		TenantLimit:   p.s.o.TenantLimit,
		ShardRunning:  p.runningOn[t.shard],
		Workers:       p.s.o.Workers,
		Owned:         p.owned(t.shard),
		Waited:        p.now().Sub(it.readyAt),
	}
	for i, x := range t.ready {
		if x == it {
			pl.Position = i + 1
			break
		}
	}
	for _, o := range p.s.tenants {
		if o.shard == t.shard {
			pl.ShardQueued += len(o.ready)
		}
	}
	return pl, true
}

// Item is what the pool does with an item now, for an operator asking
// "is it running, waiting for a retry, or done?".
type Item struct {
	// State is "queued" (ready, waiting for a worker), "running",
	// "waiting" (backing off after a failure, or delayed by AddAfter) or
	// "idle" (done, or parked).
	State string
	// Due is when a waiting item becomes ready.
	Due time.Time
	// Failures counts the item's failures in a row, which set its
	// backoff.
	Failures int
}

// Item returns what the pool does with the item (tenant, key) now; false
// when it does not know it.
func (p *Pool) Item(tenant, key string) (Item, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	it := p.s.items[itemKey{tenant, key}]
	if it == nil {
		return Item{}, false
	}
	out := Item{Failures: it.failures}
	switch it.state {
	case queued:
		out.State = "queued"
	case running:
		out.State = "running"
	case waiting:
		out.State, out.Due = "waiting", it.due
	default:
		out.State = "idle"
	}
	return out, true
}
