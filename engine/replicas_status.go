package engine

import (
	"context"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/engine/internal/replicas"
	"github.com/cozystack/cozy-aio/shard"
)

// elected is closed once this engine's manager leads (at once without
// leader election).
func (e *Engine) elected() <-chan struct{} { return e.mgr.Elected() }

// leading tells whether this engine leads: alone, it always does.
func (e *Engine) leading() bool {
	if e.replicas == nil {
		return true
	}
	return e.replicas.Leading()
}

// ownsShard tells whether Helm work of shard i runs here: alone, every
// shard does.
func (e *Engine) ownsShard(i int) bool {
	if e.replicas == nil {
		return true
	}
	return e.replicas.Owns(i)
}

// ownsTenant tells whether the Helm work of tenant runs here now.
func (e *Engine) ownsTenant(tenant string) bool {
	if e.replicas == nil {
		return true
	}
	i, ok := e.pool.Lookup(tenant)
	return ok && e.replicas.Owns(i)
}

// mayWriteStatus tells whether this engine may still write obj's status:
// a HelmRelease's while it holds the release's shard (the shard its action
// runs on, else its tenant's), any other kind's while it leads.
func (e *Engine) mayWriteStatus(ctx context.Context, kind string, obj client.Object) bool {
	if e.replicas == nil {
		return true
	}
	if k, _ := kinds.Get(kind); !k.Sharded {
		return e.replicas.Leading()
	}
	i, ok := shard.FromContext(ctx)
	if !ok {
		i, ok = e.pool.Lookup(e.helmrelease.TenantOf(obj))
	}
	return ok && e.replicas.MayWrite(i)
}

// The labels of the replicas' Leases (replicas.LabelLeaseRole and the rest).
const (
	// LabelLeaseRole is "replica" on a replica's own Lease and "shard" on a
	// Helm shard's Lease.
	LabelLeaseRole = replicas.LabelLeaseRole
	// LabelReplicaStart is, on a replica's Lease, when this incarnation of
	// the replica started (Unix nanoseconds).
	LabelReplicaStart = replicas.LabelReplicaStart
	// LabelShard is the shard number on a shard's Lease.
	LabelShard = replicas.LabelShard
	// LabelShardTerm is, on a shard's Lease, the term of its holder.
	LabelShardTerm = replicas.LabelShardTerm
)

// Replica describes this engine's part among replicas, for /readyz and
// embedders.
type Replica struct {
	// ID names the replica (Options.HolderID).
	ID string
	// Leader is true while this engine leads (always when alone).
	Leader bool
	// Shards are the Helm shards whose work runs here.
	Shards []int
	// Live are the replicas this one sees alive, and Holders which one
	// holds each Helm shard's Lease, from the Leases; empty when alone.
	Live    []string
	Holders map[int]string
}

// Replica returns this engine's part among replicas now.
func (e *Engine) Replica() Replica {
	r := Replica{ID: e.opts.HolderID, Leader: e.leading()}
	if e.replicas != nil {
		v := e.replicas.View()
		r.Live, r.Holders = v.Live, v.Holders
	}
	for _, id := range e.pool.Shards() {
		if e.ownsShard(id) {
			r.Shards = append(r.Shards, id)
		}
	}
	return r
}

func (r Replica) String() string {
	ids := make([]string, len(r.Shards))
	for i, s := range r.Shards {
		ids[i] = strconv.Itoa(s)
	}
	leader := "no"
	if r.Leader {
		leader = "yes"
	}
	return "replica " + r.ID + ": leader " + leader + ", shards [" + strings.Join(ids, ",") + "]"
}

// wakeTenant reconciles every HelmRelease of tenant.
func (e *Engine) wakeTenant(tenant string) {
	for _, ref := range e.helmrelease.Releases(func(t string) bool { return t == tenant }) {
		e.controllers.Enqueue(ref)
	}
}

// wakeShard reconciles every HelmRelease whose tenant is on shard i.
func (e *Engine) wakeShard(i int) {
	for _, ref := range e.helmrelease.Releases(func(tenant string) bool {
		s, ok := e.pool.Lookup(tenant)
		return ok && s == i
	}) {
		e.controllers.Enqueue(ref)
	}
}

// Assignment returns the placement of tenants on Helm shards this engine
// uses now. Replicas that see the same HelmReleases and the same published
// assignment return the same one.
func (e *Engine) Assignment() shard.Assignment { return e.pool.Assignment() }
