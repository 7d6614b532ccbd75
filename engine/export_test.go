package engine

import "github.com/cozystack/cozy-aio/apply/helm"

// HolderAlive is what this engine tells its Helm manager about the holder
// of a pending revision (helm.Options.HolderAlive); false without replicas.
func (e *Engine) HolderAlive(h helm.Holder) bool {
	return e.replicas != nil && e.replicas.Alive(h)
}

// WithPrivateExtraction returns o for an engine whose generators extract
// their sources into trees of their own on every reconcile, as before the
// shared trees (generator/extractcache.go): the benchmark's peer.
func WithPrivateExtraction(o Options) Options {
	o.privateExtraction = true
	return o
}

// Extractions is the number of source extractions the engine's
// ArtifactGenerators started.
func (e *Engine) Extractions() int64 { return e.generator.Extractions() }

// PublishedTenants is the tenant placement of the shard assignment this
// replica last read from the published ConfigMap; nil before it read one.
func (e *Engine) PublishedTenants() map[string]int {
	if e.replicas == nil {
		return nil
	}
	e.replicas.PubMu.Lock()
	defer e.replicas.PubMu.Unlock()
	if e.replicas.Pub == nil {
		return nil
	}
	return e.replicas.Pub.Tenants
}
