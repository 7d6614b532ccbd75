package engine

import (
	"sync"

	"github.com/cozystack/cozy-aio/health"
)

// localWaiter is the health.Waiter of this cluster, made on first use; it
// serves the Kustomizations' health waits and the Helm manager's.
type localWaiter struct {
	once   sync.Once
	waiter *health.Waiter
	err    error
}

// healthWaiter returns the engine's Waiter.
func (e *Engine) healthWaiter() (*health.Waiter, error) {
	e.waits.once.Do(func() {
		e.waits.waiter, e.waits.err = health.NewWaiter(e.cfg, health.WaiterOptions{Mapper: e.mgr.GetRESTMapper()})
	})
	return e.waits.waiter, e.waits.err
}
