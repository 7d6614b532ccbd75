package helmrelease

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/shard"
)

// helmWork holds the Helm side of the engine: one Helm manager for every
// release, and the per-tenant weights the shard pool balances.
type helmWork struct {
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

// finalizerSent tells whether the finalizer was already sent to obj as
// the cache shows it, and records (add) or forgets (!add) the sending.
func (r *Reconciler) finalizerSent(obj client.Object, add bool) bool {
	r.work.mu.Lock()
	defer r.work.mu.Unlock()
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	sent, ok := r.work.finalizers[uid]
	switch {
	case !add:
		delete(r.work.finalizers, uid)
	case ok && sent == rv:
		return true
	case r.work.finalizers == nil:
		r.work.finalizers = map[types.UID]string{uid: rv}
	default:
		r.work.finalizers[uid] = rv
	}
	return false
}

// weigh records that tenant holds ref, and updates the tenant's weight in
// the pool when it changed: the weight of a tenant is its number of
// HelmReleases.
func (r *Reconciler) weigh(tenant string, ref frame.Ref, present bool) {
	r.work.mu.Lock()
	defer r.work.mu.Unlock()
	if r.work.releases == nil {
		r.work.releases = map[string]map[frame.Ref]bool{}
	}
	set := r.work.releases[tenant]
	if set == nil {
		set = map[frame.Ref]bool{}
		r.work.releases[tenant] = set
	}
	if set[ref] == present {
		return
	}
	if present {
		set[ref] = true
		delete(r.work.gone, ref)
	} else {
		delete(set, ref)
		if r.work.gone == nil {
			r.work.gone = map[frame.Ref]string{}
		}
		r.work.gone[ref] = tenant
	}
	if len(set) == 0 {
		delete(r.work.releases, tenant)
		r.deps.Pool.RemoveTenant(tenant)
		return
	}
	_ = r.deps.Pool.SetTenant(shard.Tenant{ID: tenant, Weight: len(set)})
}

// unweigh is told that HelmRelease ref is gone. Its tenant leaves the pool
// if it has no release left: the uninstall of its last release placed it
// again (with weight 1) after weigh took it out.
func (r *Reconciler) unweigh(ref frame.Ref) {
	r.work.mu.Lock()
	defer r.work.mu.Unlock()
	tenant, ok := r.work.gone[ref]
	if !ok {
		for t, set := range r.work.releases {
			if set[ref] {
				tenant, ok = t, true // gone before its deletion was seen here
			}
		}
	}
	delete(r.work.gone, ref)
	if set := r.work.releases[tenant]; ok && set[ref] {
		delete(set, ref)
		if len(set) > 0 {
			_ = r.deps.Pool.SetTenant(shard.Tenant{ID: tenant, Weight: len(set)})
			return
		}
		delete(r.work.releases, tenant)
	}
	if ok && len(r.work.releases[tenant]) == 0 {
		r.deps.Pool.RemoveTenant(tenant)
	}
}

// enqueueAfter wakes ref after d; a later call for the same ref replaces
// the earlier one.
func (r *Reconciler) enqueueAfter(ref frame.Ref, d time.Duration) {
	r.work.mu.Lock()
	defer r.work.mu.Unlock()
	if r.work.timers == nil {
		r.work.timers = map[frame.Ref]*time.Timer{}
	}
	if t, ok := r.work.timers[ref]; ok {
		t.Stop()
	}
	r.work.timers[ref] = time.AfterFunc(d, func() { r.deps.Enqueue(ref) })
}

// Releases returns the HelmReleases of the tenants keep accepts, as this
// engine last weighed them.
func (r *Reconciler) Releases(keep func(tenant string) bool) []frame.Ref {
	r.work.mu.Lock()
	defer r.work.mu.Unlock()
	var refs []frame.Ref
	for tenant, set := range r.work.releases {
		if keep(tenant) {
			for ref := range set {
				refs = append(refs, ref)
			}
		}
	}
	return refs
}
