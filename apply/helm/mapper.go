package helm

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// mapperRefresh bounds how often a "no matches for kind" resets the REST
// mapper of one cluster: a kind that does not exist costs one discovery
// read per interval, however many releases ask for it.
const mapperRefresh = time.Second

// refreshingMapper is the REST mapper Helm's actions get. The getter, and
// so its discovery cache, lives as long as the cluster's Manager, while
// other releases install CRDs into the same cluster (a CRD chart, then
// the charts that use its kinds, each a HelmRelease of its own with
// dependsOn). A kind the cache does not know resets the mapper, at most
// once per mapperRefresh, and is looked up again, as helm-controller,
// which builds a fresh mapper for every reconcile, sees it at once.
type refreshingMapper struct {
	meta.ResettableRESTMapper

	mu    sync.Mutex
	reset time.Time
}

// refresh resets the mapper unless it was reset less than mapperRefresh
// ago, and says whether a lookup should be tried again.
func (m *refreshingMapper) refresh(err error) bool {
	if !meta.IsNoMatchError(err) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.reset) < mapperRefresh {
		return false
	}
	m.reset = time.Now()
	m.ResettableRESTMapper.Reset()
	return true
}

func (m *refreshingMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	gvk, err := m.ResettableRESTMapper.KindFor(resource)
	if err != nil && m.refresh(err) {
		return m.ResettableRESTMapper.KindFor(resource)
	}
	return gvk, err
}

func (m *refreshingMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	gvks, err := m.ResettableRESTMapper.KindsFor(resource)
	if err != nil && m.refresh(err) {
		return m.ResettableRESTMapper.KindsFor(resource)
	}
	return gvks, err
}

func (m *refreshingMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	gvr, err := m.ResettableRESTMapper.ResourceFor(input)
	if err != nil && m.refresh(err) {
		return m.ResettableRESTMapper.ResourceFor(input)
	}
	return gvr, err
}

func (m *refreshingMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	gvrs, err := m.ResettableRESTMapper.ResourcesFor(input)
	if err != nil && m.refresh(err) {
		return m.ResettableRESTMapper.ResourcesFor(input)
	}
	return gvrs, err
}

func (m *refreshingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mapping, err := m.ResettableRESTMapper.RESTMapping(gk, versions...)
	if err != nil && m.refresh(err) {
		return m.ResettableRESTMapper.RESTMapping(gk, versions...)
	}
	return mapping, err
}

func (m *refreshingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	mappings, err := m.ResettableRESTMapper.RESTMappings(gk, versions...)
	if err != nil && m.refresh(err) {
		return m.ResettableRESTMapper.RESTMappings(gk, versions...)
	}
	return mappings, err
}
