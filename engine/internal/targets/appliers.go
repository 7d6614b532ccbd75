package targets

import (
	"fmt"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/apply"
)

// appliers holds one Applier per identity: the engine's own, and one per
// tenant ServiceAccount, so the API server enforces that tenant's RBAC.
type Appliers struct {
	mu sync.Mutex
	m  map[apply.ServiceAccount]*apply.Applier
}

// fieldManagers are the field manager Kustomizations apply with and the
// earlier ones handed over to it (apply.Options).
type FieldManagers struct {
	Name     string
	HandOver []string
}

// applierFor returns the Applier of a cluster (its rest.Config, and its
// watch cache when it has one) for an identity.
func (a *Appliers) ApplierFor(cfg *rest.Config, cache *apply.Cache, managers FieldManagers, namespace, serviceAccount string) (*apply.Applier, error) {
	sa := apply.ServiceAccount{}
	if serviceAccount != "" {
		sa = apply.ServiceAccount{Namespace: namespace, Name: serviceAccount}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ap, ok := a.m[sa]; ok {
		return ap, nil
	}
	ap, err := apply.New(cfg, apply.Options{FieldManager: managers.Name, HandOver: managers.HandOver, Impersonate: sa, Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("creating the applier for %v: %w", sa, err)
	}
	if a.m == nil {
		a.m = map[apply.ServiceAccount]*apply.Applier{}
	}
	a.m[sa] = ap
	return ap, nil
}
