package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/source"
)

// ErrCrossNamespace means restricted mode refused a reference to another
// namespace.
var ErrCrossNamespace = errors.New("cross-namespace references are disabled (restricted mode)")

// sourceArtifact resolves a unit's source reference to the artifact in the
// store. The source is read from the shared cache and the artifact from the
// store directly: nothing goes over HTTP inside the process. An artifact
// that status names but the store lacks (on a replica that does not run
// the source reconcilers, or after the data directory was lost) is
// materialised: rebuilt from upstream and checked against status.
func (e *Engine) sourceArtifact(ctx context.Context, self nodeRef, kind, namespace, name string) (source.Artifact, outcome, bool) {
	if namespace == "" {
		namespace = self.Namespace
	}
	if e.opts.Restricted && namespace != self.Namespace {
		return source.Artifact{}, stalled(meta.ArtifactFailedReason,
			fmt.Errorf("%s: source %s/%s/%s: %w", self, kind, namespace, name, ErrCrossNamespace)), false
	}
	obj, ok := newArtifactObject(kind)
	if !ok {
		return source.Artifact{}, stalled(meta.ArtifactFailedReason,
			fmt.Errorf("%s: source kind %q is not supported (GitRepository, OCIRepository, Bucket, ExternalArtifact, HelmChart)", self, kind)), false
	}
	srcRef := fmt.Sprintf("%s/%s/%s", kind, namespace, name)
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := e.mgr.GetClient().Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		// Each kind has its own informer: an object that names a source
		// created just before it can reach this cache before the source
		// does. Ask the API server before calling the source missing.
		err = e.mgr.GetAPIReader().Get(ctx, key, obj)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			// helm- and kustomize-controller mark Ready=False and retry,
			// recording no Event: a source created with or after its
			// users (Cozystack's operator creates an ArtifactGenerator
			// and the HelmReleases of its ExternalArtifacts together) is
			// not there yet, which they do not report. source-watcher
			// and source-controller's HelmChart record a Warning.
			out := failed(meta.ArtifactFailedReason, fmt.Errorf("%s: source %s not found", self, srcRef))
			out.quiet = self.Kind == helmv2.HelmReleaseKind || self.Kind == kustomizev1.KustomizationKind
			return source.Artifact{}, out, false
		}
		return source.Artifact{}, failed(meta.ArtifactFailedReason, fmt.Errorf("%s: reading source %s: %w", self, srcRef, err)), false
	}
	a := obj.GetArtifact()
	if a == nil {
		return source.Artifact{}, waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s has no artifact yet", srcRef), 0), false
	}
	art := fromMetaArtifact(a)
	if e.stored(art) {
		return art, outcome{}, true
	}
	if local, ok := e.store.Local(source.Object{Kind: kind, Namespace: namespace, Name: name}, art); ok {
		return local, outcome{}, true
	}
	want := art
	art, err = e.materialize(ctx, self, nodeRef{Kind: kind, Namespace: namespace, Name: name}, obj, art)
	if err != nil {
		if e.foreign(want) && errors.Is(err, source.ErrDigestMismatch) && e.reconciles(kind) && isDone(e.elected()) {
			// Another engine's artifact (source-controller's before a
			// switch) that its server no longer gives: this engine's own
			// reconciler of the source (it runs on the leader, which this
			// engine is) replaces it with its archive of the same
			// revision, whose new status wakes this dependent. A wait,
			// not a failure: nothing is wrong on switch day.
			return source.Artifact{}, waiting(meta.ArtifactFailedReason, fmt.Sprintf(
				"source %s: its artifact was made by another server (%s); waiting for the source to be reconciled here", srcRef, want.URL), materializeRetry), false
		}
		if aw := (*awaitedError)(nil); errors.As(err, &aw) {
			// An input of the artifact's rebuild is awaited likewise.
			return source.Artifact{}, waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s: %s", srcRef, aw.msg), materializeRetry), false
		}
		return source.Artifact{}, materializedOutcome(fmt.Errorf("%s: %w", self, err)), false
	}
	return art, outcome{}, true
}

// artifactObject is a source kind with an artifact.
type artifactObject interface {
	client.Object
	GetArtifact() *meta.Artifact
}

// newArtifactObject returns an empty object of a source kind whose
// artifact consumers read.
func newArtifactObject(kind string) (artifactObject, bool) {
	switch kind {
	case sourcev1.GitRepositoryKind:
		return &sourcev1.GitRepository{}, true
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}, true
	case sourcev1.ExternalArtifactKind:
		return &sourcev1.ExternalArtifact{}, true
	case sourcev1.HelmChartKind:
		return &sourcev1.HelmChart{}, true
	case sourcev1.BucketKind:
		return &sourcev1.Bucket{}, true
	}
	return nil, false
}

// serveMissing puts in the store, when it can, the artifact at p
// (<kind>/<namespace>/<name>/<file>, as the artifact server is asked for
// it) that the object's status.artifact names and the store lacks: this
// engine is a replica behind the address another replica advertised
// (--artifact-base-url, a Service in front of them), or its data
// directory was emptied. As a consumer's materialisation: fetched from
// status.artifact.url (asking the server not to fetch in turn) or rebuilt
// from upstream, and kept only if its digest is status's.
func (e *Engine) serveMissing(ctx context.Context, p string) bool {
	segs := strings.Split(p, "/")
	if len(segs) != 4 {
		return false
	}
	for _, kind := range []string{sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.ExternalArtifactKind, sourcev1.HelmChartKind, sourcev1.BucketKind} {
		if strings.ToLower(kind) != segs[0] {
			continue
		}
		obj, _ := newArtifactObject(kind)
		if err := e.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: segs[1], Name: segs[2]}, obj); err != nil {
			return false
		}
		a := obj.GetArtifact()
		if a == nil || a.Path != p {
			return false
		}
		src := nodeRef{Kind: kind, Namespace: segs[1], Name: segs[2]}
		_, err := e.materialize(ctx, nodeRef{}, src, obj, fromMetaArtifact(a))
		return err == nil
	}
	return false
}

// foreign tells whether a's URL is not under this engine's artifact base
// URL: another engine (Flux's source-controller, another cozy-aio's
// server) wrote the status.
func (e *Engine) foreign(a source.Artifact) bool {
	return a.URL != "" && !strings.HasPrefix(a.URL, e.store.BaseURL()+"/")
}

func sourceRefOf(self nodeRef, kind, namespace, name string) nodeRef {
	if namespace == "" {
		namespace = self.Namespace
	}
	return nodeRef{Kind: kind, Namespace: namespace, Name: name}
}

// toMetaArtifact converts a store artifact to Flux's status shape.
func toMetaArtifact(a source.Artifact) *meta.Artifact {
	size := a.Size
	return &meta.Artifact{
		Path: a.Path, URL: a.URL, Revision: a.Revision, Digest: a.Digest,
		Size: &size, LastUpdateTime: metav1.NewTime(a.LastUpdateTime), Metadata: a.Metadata,
	}
}

// fromMetaArtifact converts Flux's status shape back to a store artifact.
func fromMetaArtifact(a *meta.Artifact) source.Artifact {
	out := source.Artifact{
		Path: a.Path, URL: a.URL, Revision: a.Revision, Digest: a.Digest,
		LastUpdateTime: a.LastUpdateTime.Time, Metadata: a.Metadata,
	}
	if a.Size != nil {
		out.Size = *a.Size
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
