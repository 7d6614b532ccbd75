package shard

import (
	"slices"
	"strings"
	"time"
)

// Stats is a snapshot of a pool, for metrics and tests.
type Stats struct {
	// Shards are the shards in ascending ID order.
	Shards []ShardStats
	// Tenants are the tenants the pool knows, in ascending ID order.
	Tenants []TenantStats
}

// ShardStats describes one shard.
type ShardStats struct {
	ID int
	// Load is the total weight of the tenants placed on the shard.
	Load int
	// Tenants is the number of tenants placed on the shard.
	Tenants int
	// Workers is the number of workers the shard runs its items on
	// (PoolOptions.Workers).
	Workers int
	// Owned is what PoolOptions.Owned answers for the shard: whether the
	// pool may start its items.
	Owned bool
	// Queued is the number of items ready to run; Waiting the number
	// waiting for a failure backoff or an AddAfter delay to end; Running the
	// number running now. All are counted on the tenant's current shard.
	Queued, Waiting, Running int
}

// TenantStats describes one tenant.
type TenantStats struct {
	ID string
	// Shard is the tenant's shard, -1 once removed while items still run.
	Shard                    int
	Weight                   int
	Queued, Waiting, Running int
	// Succeeded and Failed count finished runs.
	Succeeded, Failed uint64
	// Waits counts started runs; WaitTotal and WaitMax are the time items
	// spent ready before a worker started them.
	Waits              uint64
	WaitTotal, WaitMax time.Duration
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.s.stats()
	for i := range st.Shards {
		st.Shards[i].Owned = p.owned(st.Shards[i].ID)
	}
	return st
}

func (s *sched) stats() Stats {
	var st Stats
	at := map[int]int{}
	for i, id := range s.place.ids {
		at[id] = i
		st.Shards = append(st.Shards, ShardStats{ID: id, Load: s.place.load[i], Workers: s.o.Workers})
	}
	for _, e := range s.place.entries {
		st.Shards[e.at].Tenants++
	}
	byID := map[string]int{}
	for _, t := range s.tenants {
		ts := TenantStats{
			ID: t.id, Shard: t.shard, Queued: len(t.ready), Running: t.running,
			Succeeded: t.succeeded, Failed: t.failed,
			Waits: t.waits, WaitTotal: t.waitSum, WaitMax: t.waitMax,
		}
		if sl, ok := s.place.tenants[t.id]; ok {
			ts.Weight = sl.w
		}
		byID[t.id] = len(st.Tenants)
		st.Tenants = append(st.Tenants, ts)
	}
	for _, it := range s.items {
		if it.state == waiting {
			st.Tenants[byID[it.k.tenant]].Waiting++
		}
	}
	for _, ts := range st.Tenants {
		if i, ok := at[ts.Shard]; ok {
			st.Shards[i].Queued += ts.Queued
			st.Shards[i].Waiting += ts.Waiting
			st.Shards[i].Running += ts.Running
		}
	}
	slices.SortFunc(st.Tenants, func(a, b TenantStats) int { return strings.Compare(a.ID, b.ID) })
	return st
}
