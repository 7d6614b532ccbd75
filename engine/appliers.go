package engine

import (
	"fmt"
	"sync"

	"github.com/cozystack/cozy-aio/apply"
)

// appliers holds one Applier per identity: the engine's own, and one per
// tenant ServiceAccount, so the API server enforces that tenant's RBAC.
type appliers struct {
	mu sync.Mutex
	m  map[apply.ServiceAccount]*apply.Applier
}

// serviceAccount returns the account a unit's objects are applied as: the
// one it names, else in restricted mode the default account, else none
// (the engine's own identity).
func (e *Engine) serviceAccount(name string) string {
	if name == "" && e.opts.Restricted {
		return e.opts.DefaultServiceAccount
	}
	return name
}

func (e *Engine) applierFor(namespace, serviceAccount string) (*apply.Applier, error) {
	sa := apply.ServiceAccount{}
	if serviceAccount != "" {
		sa = apply.ServiceAccount{Namespace: namespace, Name: serviceAccount}
	}
	e.appliers.mu.Lock()
	defer e.appliers.mu.Unlock()
	if a, ok := e.appliers.m[sa]; ok {
		return a, nil
	}
	a, err := apply.New(e.cfg, apply.Options{FieldManager: e.opts.FieldManager, Impersonate: sa, Cache: e.applyCache})
	if err != nil {
		return nil, fmt.Errorf("creating the applier for %v: %w", sa, err)
	}
	if e.appliers.m == nil {
		e.appliers.m = map[apply.ServiceAccount]*apply.Applier{}
	}
	e.appliers.m[sa] = a
	return a, nil
}
