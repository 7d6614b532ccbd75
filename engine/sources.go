package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/source"
)

// ErrCrossNamespace means restricted mode refused a reference to another
// namespace.
var ErrCrossNamespace = errors.New("cross-namespace references are disabled (restricted mode)")

// sourceArtifact resolves a unit's source reference to the artifact in the
// store. The source is read from the shared cache and the artifact from the
// store directly: nothing goes over HTTP inside the process.
func (e *Engine) sourceArtifact(ctx context.Context, self Ref, kind, namespace, name string) (source.Artifact, outcome, bool) {
	if namespace == "" {
		namespace = self.Namespace
	}
	if e.opts.Restricted && namespace != self.Namespace {
		return source.Artifact{}, stalled(meta.ArtifactFailedReason,
			fmt.Errorf("%s: source %s/%s/%s: %w", self, kind, namespace, name, ErrCrossNamespace)), false
	}
	var obj interface {
		client.Object
		GetArtifact() *meta.Artifact
	}
	switch kind {
	case sourcev1.GitRepositoryKind:
		obj = &sourcev1.GitRepository{}
	case sourcev1.OCIRepositoryKind:
		obj = &sourcev1.OCIRepository{}
	case sourcev1.ExternalArtifactKind:
		obj = &sourcev1.ExternalArtifact{}
	default:
		return source.Artifact{}, stalled(meta.ArtifactFailedReason,
			fmt.Errorf("%s: source kind %q is not supported (GitRepository, OCIRepository, ExternalArtifact)", self, kind)), false
	}
	srcRef := fmt.Sprintf("%s/%s/%s", kind, namespace, name)
	if err := e.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return source.Artifact{}, failed(meta.ArtifactFailedReason, fmt.Errorf("%s: source %s not found", self, srcRef)), false
		}
		return source.Artifact{}, failed(meta.ArtifactFailedReason, fmt.Errorf("%s: reading source %s: %w", self, srcRef, err)), false
	}
	a := obj.GetArtifact()
	if a == nil {
		return source.Artifact{}, waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s has no artifact yet", srcRef), 0), false
	}
	art := fromMetaArtifact(a)
	if !e.store.Exists(art) {
		return source.Artifact{}, waiting(meta.ArtifactFailedReason, fmt.Sprintf("artifact of source %s (%s) is not in the store yet", srcRef, a.Revision), 0), false
	}
	return art, outcome{}, true
}

func sourceRefOf(self Ref, kind, namespace, name string) Ref {
	if namespace == "" {
		namespace = self.Namespace
	}
	return Ref{Kind: kind, Namespace: namespace, Name: name}
}
