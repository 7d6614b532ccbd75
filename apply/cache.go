package apply

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cozystack/cozy-aio/health"
)

// Cache lets Appliers skip writes that would change nothing.
//
// For every object an Applier writes, the Cache remembers a hash of what
// was applied (the object, the field manager and the impersonated identity)
// and the resourceVersion the API server answered. It also watches the
// metadata of the live objects of every resource it has seen. A write is
// skipped only when the hash is the same and the watched resourceVersion
// is still the one the write produced: any change by anyone else (a manual
// edit, another controller) bumps the resourceVersion, and the object is
// sent again, so drift is still corrected. A write that does go out also
// needs no GET first: the watched state says whether the object exists.
//
// Start runs the watches; until it is called, or while a resource's watch
// is syncing, the Cache knows nothing and Appliers write every object. The
// watches use the Cache's own rest.Config, so it can be shared by Appliers
// that impersonate tenants who may not list cluster-wide. The watch may
// lag behind the API server by a few milliseconds; an edit made in that
// window is corrected by the next apply.
type Cache struct {
	client metadata.Interface

	mu        sync.Mutex
	ctx       context.Context
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	last      map[health.ObjectRef]applied
}

type applied struct {
	sum             [32]byte
	resourceVersion string
}

// NewCache returns a Cache that watches with cfg. The identity of cfg needs
// list and watch on the resources the Appliers write.
func NewCache(cfg *rest.Config) (*Cache, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the metadata client: %w", err)
	}
	return &Cache{
		client:    mc,
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		last:      map[health.ObjectRef]applied{},
	}, nil
}

// Start runs the watches until ctx ends. It returns nil on cancellation.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	for _, inf := range c.informers {
		go inf.Run(ctx.Done())
	}
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	c.ctx = nil
	c.informers = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	c.mu.Unlock()
	return nil
}

// informer returns the synced informer of gvr, starting it when needed;
// nil while it is not synced or the Cache is not started.
func (c *Cache) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	inf, ok := c.informers[gvr]
	if !ok {
		inf = metadatainformer.NewFilteredMetadataInformer(c.client, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(stripMetadata)
		c.informers[gvr] = inf
		if c.ctx != nil {
			go inf.Run(c.ctx.Done())
		}
	}
	if c.ctx == nil || !inf.HasSynced() {
		return nil
	}
	return inf
}

// warm starts the watches of gvrs and waits, at most until timeout, for
// them to sync, so that a large apply needs no GET per object. It does
// nothing when the Cache is not started.
func (c *Cache) warm(ctx context.Context, gvrs []schema.GroupVersionResource, timeout time.Duration) {
	c.mu.Lock()
	started := c.ctx != nil
	c.mu.Unlock()
	if !started {
		return
	}
	var syncs []cache.InformerSynced
	for _, gvr := range gvrs {
		c.informer(gvr)
		c.mu.Lock()
		inf := c.informers[gvr]
		c.mu.Unlock()
		if inf != nil {
			syncs = append(syncs, inf.HasSynced)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cache.WaitForCacheSync(ctx.Done(), syncs...)
}

// stripMetadata keeps only what the Cache reads, to hold thousands of
// objects in little memory.
func stripMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, UID: m.UID,
		Labels: selectorSubset(m.Labels), Annotations: selectorSubset(m.Annotations),
		ManagedFields: appliers(m.ManagedFields),
	}}, nil
}

// appliers keeps the names of the Apply managers of entries, the only part
// of managedFields an Applier reads (Options.HandOver); nil when there are
// none.
func appliers(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			out = append(out, metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation})
		}
	}
	return out
}

// lookup tells what the watch knows of ref before writing sum.
func (c *Cache) lookup(gvr schema.GroupVersionResource, ref health.ObjectRef, sum [32]byte) liveState {
	inf := c.informer(gvr)
	if inf == nil {
		return liveState{}
	}
	key := ref.Name
	if ref.Namespace != "" {
		key = ref.Namespace + "/" + ref.Name
	}
	item, exists, err := inf.GetStore().GetByKey(key)
	if err != nil {
		return liveState{}
	}
	if !exists {
		return liveState{known: true}
	}
	pom := item.(*metav1.PartialObjectMetadata)
	rv := pom.ResourceVersion
	c.mu.Lock()
	last, ok := c.last[keyOf(ref)]
	c.mu.Unlock()
	return liveState{
		known:           true,
		exists:          true,
		resourceVersion: rv,
		unchanged:       ok && last.sum == sum && last.resourceVersion == rv,
		labels:          pom.Labels,
		annotations:     pom.Annotations,
		appliers:        managerNames(pom.ManagedFields),
	}
}

func (c *Cache) record(_ schema.GroupVersionResource, ref health.ObjectRef, sum [32]byte, rv string) {
	c.mu.Lock()
	c.last[keyOf(ref)] = applied{sum: sum, resourceVersion: rv}
	c.mu.Unlock()
}

func (c *Cache) forget(_ schema.GroupVersionResource, ref health.ObjectRef) {
	c.mu.Lock()
	delete(c.last, keyOf(ref))
	c.mu.Unlock()
}
