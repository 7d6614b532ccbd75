package engine

import (
	"sync"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/shard"
)

// helmWork holds the Helm side of the engine: one Helm manager for every
// release, and the per-tenant weights the shard pool balances.
type helmWork struct {
	once    sync.Once
	manager *helm.Manager
	err     error

	mu       sync.Mutex
	releases map[string]map[Ref]bool // tenant → its HelmReleases
	timers   map[Ref]*time.Timer
}

func (e *Engine) helmManager() (*helm.Manager, error) {
	e.helm.once.Do(func() {
		waiter, err := e.healthWaiter()
		if err != nil {
			e.helm.err = err
			return
		}
		opts := helm.Options{Holder: helm.Holder{ID: e.opts.HolderID, Start: e.start}, Waiter: waiter}
		if e.replicas != nil {
			opts.HolderAlive = e.replicas.alive
			opts.Fence = e.replicas.fence
		}
		e.helm.manager, e.helm.err = helm.New(e.cfg, opts)
	})
	return e.helm.manager, e.helm.err
}

// weigh records that tenant holds ref, and updates the tenant's weight in
// the pool when it changed: the weight of a tenant is its number of
// HelmReleases.
func (e *Engine) weigh(tenant string, ref Ref, present bool) {
	e.helm.mu.Lock()
	defer e.helm.mu.Unlock()
	if e.helm.releases == nil {
		e.helm.releases = map[string]map[Ref]bool{}
	}
	set := e.helm.releases[tenant]
	if set == nil {
		set = map[Ref]bool{}
		e.helm.releases[tenant] = set
	}
	if set[ref] == present {
		return
	}
	if present {
		set[ref] = true
	} else {
		delete(set, ref)
	}
	if len(set) == 0 {
		delete(e.helm.releases, tenant)
		e.pool.RemoveTenant(tenant)
		return
	}
	_ = e.pool.SetTenant(shard.Tenant{ID: tenant, Weight: len(set)})
}

// enqueueAfter wakes ref after d; a later call for the same ref replaces
// the earlier one.
func (e *Engine) enqueueAfter(ref Ref, d time.Duration) {
	e.helm.mu.Lock()
	defer e.helm.mu.Unlock()
	if e.helm.timers == nil {
		e.helm.timers = map[Ref]*time.Timer{}
	}
	if t, ok := e.helm.timers[ref]; ok {
		t.Stop()
	}
	e.helm.timers[ref] = time.AfterFunc(d, func() { e.enqueue(ref) })
}
