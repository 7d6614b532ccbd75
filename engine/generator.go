package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// artifactGeneratorReconciler composes ExternalArtifacts from several
// sources, as Flux's source-watcher does.
type artifactGeneratorReconciler struct{ e *Engine }

func (r *artifactGeneratorReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	e := r.e
	obj := &swv1beta1.ArtifactGenerator{}
	if err := e.mgr.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	self := nodeRef{Kind: swv1beta1.ArtifactGeneratorKind, Namespace: obj.Namespace, Name: obj.Name}
	start := time.Now()
	orig := obj.DeepCopy()
	out := r.reconcile(ctx, obj, self)
	return e.finish(ctx, swv1beta1.ArtifactGeneratorKind, obj, orig, start, out, timing{interval: e.opts.DefaultInterval, retry: time.Minute})
}

func (r *artifactGeneratorReconciler) reconcile(ctx context.Context, obj *swv1beta1.ArtifactGenerator, self nodeRef) outcome {
	e := r.e
	if err := artifactGeneratorUnsupported(obj); err != nil {
		return stalled(UnsupportedFieldReason, err)
	}
	var srcRefs []nodeRef
	for _, s := range obj.Spec.Sources {
		srcRefs = append(srcRefs, sourceRefOf(self, s.Kind, s.Namespace, s.Name))
	}
	e.graph.Set(self, srcRefs)
	sources, done, out, ok := e.generatorSources(ctx, obj, self)
	if !ok {
		return out
	}
	defer done()
	var inventory []swv1beta1.InventoryEntry
	for _, o := range obj.Spec.OutputArtifacts {
		art, err := buildOutput(ctx, e.store, obj.Namespace, sources, o)
		if err != nil {
			return failed(meta.BuildFailedReason, fmt.Errorf("%s: artifact %s: %w", self, o.Name, err))
		}
		if err := r.writeExternalArtifact(ctx, obj, o.Name, art); err != nil {
			return failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)).at(string(swv1beta1.ActionPublish))
		}
		if _, err := e.store.GC(ctx, outputObject(obj.Namespace, o.Name), art); err != nil {
			return failed(meta.ArtifactFailedReason, err).at(string(swv1beta1.ActionPublish))
		}
		inventory = append(inventory, swv1beta1.InventoryEntry{
			Kind: sourcev1.ExternalArtifactKind, Name: o.Name, Namespace: obj.Namespace, Digest: art.Digest, Filename: filepath.Base(art.Path),
		})
	}
	obj.Status.Inventory = inventory
	return succeeded("reconciliation succeeded, generated %d artifact(s)", len(inventory))
}

// generatorSources extracts the artifact of each of the generator's
// sources, materialising those the store lacks, and returns them by alias
// with a function that releases the extracted trees. The trees are shared
// with the other generators reading the same artifacts (extractCache). The
// reconciler and the rebuild of an ExternalArtifact both use it, so that
// they compose the same inputs.
func (e *Engine) generatorSources(ctx context.Context, obj *swv1beta1.ArtifactGenerator, self nodeRef) (map[string]generate.Source, func(), outcome, bool) {
	var releases []func()
	done := func() {
		for _, release := range releases {
			release()
		}
	}
	sources := map[string]generate.Source{}
	for _, s := range obj.Spec.Sources {
		art, out, ok := e.sourceArtifact(ctx, self, s.Kind, s.Namespace, s.Name)
		if !ok {
			done()
			return nil, nil, out, false
		}
		fsys, release, err := e.extracts.acquire(ctx, art)
		if err != nil {
			done()
			return nil, nil, failed(meta.ArtifactFailedReason, fmt.Errorf("%s: extracting source %s: %w", self, s.Name, err)).at(string(swv1beta1.ActionFetchSource)), false
		}
		releases = append(releases, release)
		// The origin revision is the source artifact's
		// org.opencontainers.image.revision, as source-watcher reads it.
		sources[s.Alias] = generate.Source{FS: fsys, Revision: art.Revision,
			OriginRevision: art.Metadata[swv1beta1.ArtifactOriginRevisionAnnotation]}
	}
	return sources, done, outcome{}, true
}

// buildOutput composes one output of a generator from its sources and
// stores it as the ExternalArtifact's artifact.
func buildOutput(ctx context.Context, store *source.Store, namespace string, sources map[string]generate.Source, o swv1beta1.OutputArtifact) (source.Artifact, error) {
	spec := generate.Spec{Revision: o.Revision, OriginRevision: o.OriginRevision}
	for _, c := range o.Copy {
		spec.Copy = append(spec.Copy, generate.Copy{From: c.From, To: c.To, Exclude: c.Exclude, Strategy: generate.Strategy(c.Strategy)})
	}
	art, _, err := generate.Build(ctx, store, outputObject(namespace, o.Name), sources, spec)
	return art, err
}

// outputObject is the store object of a generator's output.
func outputObject(namespace, name string) source.Object {
	return source.Object{Kind: sourcev1.ExternalArtifactKind, Namespace: namespace, Name: name}
}

// writeExternalArtifact applies the ExternalArtifact that points back at
// the generator, then writes its artifact and Ready condition in one
// status patch.
func (r *artifactGeneratorReconciler) writeExternalArtifact(ctx context.Context, gen *swv1beta1.ArtifactGenerator, name string, art source.Artifact) error {
	c := r.e.mgr.GetClient()
	ea := &sourcev1.ExternalArtifact{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.ExternalArtifactKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gen.Namespace},
		Spec: sourcev1.ExternalArtifactSpec{SourceRef: &meta.NamespacedObjectKindReference{
			APIVersion: swv1beta1.GroupVersion.String(), Kind: swv1beta1.ArtifactGeneratorKind, Name: gen.Name, Namespace: gen.Namespace,
		}},
	}
	if err := c.Patch(ctx, ea, client.Apply, client.FieldOwner(r.e.opts.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ExternalArtifact %s/%s: %w", gen.Namespace, name, err)
	}
	orig := ea.DeepCopy()
	ea.Status.Artifact = toMetaArtifact(art)
	conditions.MarkTrue(ea, meta.ReadyCondition, meta.SucceededReason, "Artifact revision %s", art.Revision)
	if err := c.Status().Patch(ctx, ea, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing ExternalArtifact %s/%s status: %w", gen.Namespace, name, err)
	}
	return nil
}

// artifactGeneratorUnsupported names the spec fields of obj that are set and not honoured.
func artifactGeneratorUnsupported(obj *swv1beta1.ArtifactGenerator) error {
	return unsupported(swv1beta1.ArtifactGeneratorKind,
		fieldCheck{"spec.commonMetadata", obj.Spec.CommonMetadata != nil},
		fieldCheck{"spec.pathPattern", obj.Spec.PathPattern != ""},
		fieldCheck{"spec.serviceAccountName", obj.Spec.ServiceAccountName != ""},
		fieldCheck{"spec.managedNamespaces", obj.Spec.ManagedNamespaces != nil},
		fieldCheck{"spec.artifacts[].namespace", slices.ContainsFunc(obj.Spec.OutputArtifacts, func(o swv1beta1.OutputArtifact) bool {
			return o.Namespace != "" && o.Namespace != obj.Namespace
		})},
		fieldCheck{"spec.artifacts[].inputsFrom", slices.ContainsFunc(obj.Spec.OutputArtifacts, func(o swv1beta1.OutputArtifact) bool {
			return o.InputsFrom != ""
		})},
		fieldCheck{"spec.artifacts[].copy[].optional", slices.ContainsFunc(obj.Spec.OutputArtifacts, func(o swv1beta1.OutputArtifact) bool {
			return slices.ContainsFunc(o.Copy, func(c swv1beta1.CopyOperation) bool { return c.Optional })
		})},
	)
}
