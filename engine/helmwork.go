package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/health"
	"github.com/cozystack/cozy-aio/shard"
)

// helmWork holds the Helm side of the engine: one Helm manager for every
// release, and the per-tenant weights the shard pool balances.
type helmWork struct {
	once    sync.Once
	manager *helm.Manager
	err     error

	mu       sync.Mutex
	releases map[string]map[frame.Ref]bool // tenant → its HelmReleases
	gone     map[frame.Ref]string          // tenant of each release being deleted
	timers   map[frame.Ref]*time.Timer
	// finalizers are the HelmReleases this process sent the finalizer
	// to, by UID, with the resourceVersion they had before: a reconcile
	// that reads that version from a cache which has not seen the patch
	// yet does not send it again (a newer version without the finalizer
	// is someone removing it, and gets it back).
	finalizers map[types.UID]string
	// backoff spaces the retries of a failed release, Flux's exponential
	// backoff (fluxcd/pkg/runtime/controller: 750 ms doubling to 15 min)
	// as helm-controller's workqueue applies it; a success resets it.
	backoff workqueue.TypedRateLimiter[reconcile.Request]
}

func (e *Engine) helmManager() (*helm.Manager, error) {
	e.helm.once.Do(func() {
		waiter, err := e.healthWaiter()
		if err != nil {
			e.helm.err = err
			return
		}
		e.helm.manager, e.helm.err = helm.New(e.cfg, e.managerOptions(waiter, e.helmCache))
	})
	return e.helm.manager, e.helm.err
}

// helmOptions are the options of a Helm manager of this engine's, on any
// cluster: one holder, and the fencing of the shard Leases.
func (e *Engine) managerOptions(waiter *health.Waiter, cache *helm.Cache) helm.Options {
	opts := helm.Options{Holder: helm.Holder{ID: e.opts.HolderID, Start: e.start}, Waiter: waiter, Cache: cache,
		MaxReleaseRecordBytes: e.opts.MaxReleaseRecordBytes}
	if e.opts.ProgressAfter > 0 {
		// A release record shows pending exactly when the status
		// shows the action running.
		opts.PendingAfter = e.opts.ProgressAfter
	}
	if e.replicas != nil {
		opts.HolderAlive = e.replicas.alive
		opts.Fence = e.replicas.fence
		opts.Claim = e.replicas.claim
	}
	return opts
}

// finalizerSent tells whether the finalizer was already sent to obj as
// the cache shows it, and records (add) or forgets (!add) the sending.
func (e *Engine) finalizerSent(obj client.Object, add bool) bool {
	e.helm.mu.Lock()
	defer e.helm.mu.Unlock()
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	sent, ok := e.helm.finalizers[uid]
	switch {
	case !add:
		delete(e.helm.finalizers, uid)
	case ok && sent == rv:
		return true
	case e.helm.finalizers == nil:
		e.helm.finalizers = map[types.UID]string{uid: rv}
	default:
		e.helm.finalizers[uid] = rv
	}
	return false
}

// weigh records that tenant holds ref, and updates the tenant's weight in
// the pool when it changed: the weight of a tenant is its number of
// HelmReleases.
func (e *Engine) weigh(tenant string, ref frame.Ref, present bool) {
	e.helm.mu.Lock()
	defer e.helm.mu.Unlock()
	if e.helm.releases == nil {
		e.helm.releases = map[string]map[frame.Ref]bool{}
	}
	set := e.helm.releases[tenant]
	if set == nil {
		set = map[frame.Ref]bool{}
		e.helm.releases[tenant] = set
	}
	if set[ref] == present {
		return
	}
	if present {
		set[ref] = true
		delete(e.helm.gone, ref)
	} else {
		delete(set, ref)
		if e.helm.gone == nil {
			e.helm.gone = map[frame.Ref]string{}
		}
		e.helm.gone[ref] = tenant
	}
	if len(set) == 0 {
		delete(e.helm.releases, tenant)
		e.pool.RemoveTenant(tenant)
		return
	}
	_ = e.pool.SetTenant(shard.Tenant{ID: tenant, Weight: len(set)})
}

// unweigh is told that HelmRelease ref is gone. Its tenant leaves the pool
// if it has no release left: the uninstall of its last release placed it
// again (with weight 1) after weigh took it out.
func (e *Engine) unweigh(ref frame.Ref) {
	e.helm.mu.Lock()
	defer e.helm.mu.Unlock()
	tenant, ok := e.helm.gone[ref]
	if !ok {
		for t, set := range e.helm.releases {
			if set[ref] {
				tenant, ok = t, true // gone before its deletion was seen here
			}
		}
	}
	delete(e.helm.gone, ref)
	if set := e.helm.releases[tenant]; ok && set[ref] {
		delete(set, ref)
		if len(set) > 0 {
			_ = e.pool.SetTenant(shard.Tenant{ID: tenant, Weight: len(set)})
			return
		}
		delete(e.helm.releases, tenant)
	}
	if ok && len(e.helm.releases[tenant]) == 0 {
		e.pool.RemoveTenant(tenant)
	}
}

// enqueueAfter wakes ref after d; a later call for the same ref replaces
// the earlier one.
func (e *Engine) enqueueAfter(ref frame.Ref, d time.Duration) {
	e.helm.mu.Lock()
	defer e.helm.mu.Unlock()
	if e.helm.timers == nil {
		e.helm.timers = map[frame.Ref]*time.Timer{}
	}
	if t, ok := e.helm.timers[ref]; ok {
		t.Stop()
	}
	e.helm.timers[ref] = time.AfterFunc(d, func() { e.enqueue(ref) })
}
