package engine

import "github.com/cozystack/cozy-aio/apply/helm"

// HolderAlive is what this engine tells its Helm manager about the holder
// of a pending revision (helm.Options.HolderAlive); false without replicas.
func (e *Engine) HolderAlive(h helm.Holder) bool {
	return e.replicas != nil && e.replicas.alive(h)
}
