package engine

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
)

// ErrCrossNamespace means restricted mode refused a reference to another
// namespace.
var ErrCrossNamespace = frame.ErrCrossNamespace

// sourceArtifact resolves a unit's source reference (artifacts.Resolve).
func (e *Engine) sourceArtifact(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool) {
	return e.artifacts.Resolve(ctx, self, kind, namespace, name)
}

// stored tells whether the store holds a.
func (e *Engine) stored(a source.Artifact) bool { return e.artifacts.Stored(a) }

// foreign tells whether another engine's server wrote a.
func (e *Engine) foreign(a source.Artifact) bool { return e.artifacts.Foreign(a) }

// materialize stores an artifact the store lacks (artifacts.Materialize).
func (e *Engine) materialize(ctx context.Context, self, src frame.Ref, obj client.Object, want source.Artifact) (source.Artifact, error) {
	return e.artifacts.Materialize(ctx, self, src, obj, want)
}

// mirrorLanding returns a channel closed when the replicas' mirror next
// stores an artifact; nil without a mirror.
func (e *Engine) mirrorLanding() <-chan struct{} {
	if e.replicas == nil || e.replicas.Mirror == nil {
		return nil
	}
	return e.replicas.Mirror.Landing()
}
