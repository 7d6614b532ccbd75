package frame

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/source"
)

// Registration is what a family does for one kind of the kind table
// (engine/internal/kinds): the facade sets up a controller for each
// Reconciler and rebuilds an artifact the store lacks with its kind's
// Rebuild.
type Registration struct {
	// Kind is the kind's name in the table.
	Kind string
	// Reconciler reconciles the kind; nil for a kind the family only
	// rebuilds (ExternalArtifact).
	Reconciler reconcile.Reconciler
	// Rebuild builds an artifact of the kind again from upstream into
	// staging, as its reconciler built it; nil for a kind without one.
	Rebuild Rebuild
}

// Rebuild builds the artifact of revision of obj again into staging;
// sobj is obj as the store names it.
type Rebuild func(ctx context.Context, staging *source.Store, sobj source.Object, obj client.Object, revision string) (source.Artifact, error)

// RebuildAs adapts a rebuild of objects of type T.
func RebuildAs[T client.Object](f func(ctx context.Context, staging *source.Store, sobj source.Object, obj T, revision string) (source.Artifact, error)) Rebuild {
	return func(ctx context.Context, staging *source.Store, sobj source.Object, obj client.Object, revision string) (source.Artifact, error) {
		return f(ctx, staging, sobj, obj.(T), revision)
	}
}
