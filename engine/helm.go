package engine

import (
	"sync"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/health"
)

// localHelm is the Helm manager of this cluster's releases, made on first
// use.
type localHelm struct {
	once    sync.Once
	manager *helm.Manager
	err     error
}

func (e *Engine) helmManager() (*helm.Manager, error) {
	e.helmMgr.once.Do(func() {
		waiter, err := e.healthWaiter()
		if err != nil {
			e.helmMgr.err = err
			return
		}
		e.helmMgr.manager, e.helmMgr.err = helm.New(e.cfg, e.managerOptions(waiter, e.helmCache))
	})
	return e.helmMgr.manager, e.helmMgr.err
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
		opts.HolderAlive = e.replicas.Alive
		opts.Fence = e.replicas.Fence
		opts.Claim = e.replicas.Claim
	}
	return opts
}
