package helmrelease

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"helm.sh/helm/v4/pkg/registry"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
)

// chartFailureRetry is how soon a release whose HelmChart failed before
// it had any artifact looks at it again.
const chartFailureRetry = 15 * time.Second

// chartSourceOf returns the source a HelmRelease installs from: its
// chartRef, or for spec.chart the HelmChart the engine keeps for it,
// <release-namespace>-<release-name> in the source's namespace, as Flux
// names it.
func chartSourceOf(obj *helmv2.HelmRelease) (kind, namespace, name string, ok bool) {
	switch {
	case obj.Spec.ChartRef != nil:
		cr := obj.Spec.ChartRef
		return cr.Kind, cr.Namespace, cr.Name, true
	case obj.Spec.Chart != nil:
		ref := obj.GetHelmChartTemplateReference()
		return ref.Kind, ref.Namespace, ref.Name, true
	}
	return "", "", "", false
}

// helmChartFor builds the HelmChart of a HelmRelease's spec.chart, as
// Flux's helm-controller does.
func helmChartFor(obj *helmv2.HelmRelease) *sourcev1.HelmChart {
	tpl := obj.Spec.Chart
	ref := obj.GetHelmChartTemplateReference()
	var sourceRef sourcev1.LocalHelmChartSourceReference
	if sr := tpl.Spec.SourceRef; sr != nil {
		sourceRef = sourcev1.LocalHelmChartSourceReference{Kind: sr.Kind, Name: sr.Name}
	}
	hc := &sourcev1.HelmChart{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace},
		Spec: sourcev1.HelmChartSpec{
			Chart:                    tpl.Spec.Chart,
			Version:                  tpl.Spec.GetVersion(),
			SourceRef:                sourceRef,
			Interval:                 obj.GetTemplateInterval(),
			ReconcileStrategy:        tpl.Spec.GetReconcileStrategy(),
			ValuesFiles:              tpl.Spec.ValuesFiles,
			IgnoreMissingValuesFiles: tpl.Spec.IgnoreMissingValuesFiles,
		},
	}
	if v := tpl.Spec.Verify; v != nil {
		hc.Spec.Verify = &sourcev1.HelmChartVerification{Provider: v.Provider, SecretRef: v.SecretRef, MatchOIDCIdentity: v.MatchOIDCIdentity}
	}
	hc.Labels, hc.Annotations = templateMetadata(obj)
	return hc
}

// templateMetadata is the labels and annotations of the object spec.chart
// generates: the template's, and helm-controller's owner labels.
func templateMetadata(obj *helmv2.HelmRelease) (labels, annotations map[string]string) {
	labels = map[string]string{}
	if m := obj.Spec.Chart.ObjectMeta; m != nil {
		maps.Copy(labels, m.Labels)
		annotations = maps.Clone(m.Annotations)
	}
	labels[helmv2.GroupVersion.Group+"/name"] = obj.Name
	labels[helmv2.GroupVersion.Group+"/namespace"] = obj.Namespace
	return labels, annotations
}

// ociRepositoryFor builds the OCIRepository of a HelmRelease's spec.chart
// of kind OCIRepository, as helm-controller does: the template's
// OCIRepository spec, its interval the template's or else the release's,
// its layer selector, when it sets none, the Helm chart layer copied as
// it is.
func ociRepositoryFor(obj *helmv2.HelmRelease) *sourcev1.OCIRepository {
	ref := obj.GetHelmChartTemplateReference()
	spec := obj.Spec.Chart.Spec.OCIRepositorySpec.DeepCopy()
	interval := obj.GetTemplateInterval()
	spec.Interval = &interval
	if spec.LayerSelector == nil {
		spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: registry.ChartLayerMediaType, Operation: sourcev1.OCILayerCopy}
	}
	if spec.Verify != nil && spec.Verify.Provider == "" {
		spec.Verify.Provider = "cosign" // the CRD's default
	}
	or := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}, Spec: *spec}
	or.Labels, or.Annotations = templateMetadata(obj)
	return or
}

// chartTemplateFor builds the source object of a HelmRelease's
// spec.chart: a HelmChart, or for kind OCIRepository an OCIRepository.
func chartTemplateFor(obj *helmv2.HelmRelease) client.Object {
	if obj.GetHelmChartTemplateReference().Kind == sourcev1.OCIRepositoryKind {
		return ociRepositoryFor(obj)
	}
	return helmChartFor(obj)
}

// newGenerated is an empty object of a kind spec.chart generates.
func newGenerated(kind string) client.Object {
	if kind == sourcev1.OCIRepositoryKind {
		return &sourcev1.OCIRepository{}
	}
	return &sourcev1.HelmChart{}
}

// generatedChanged reports whether a generated object in the cluster
// differs from the one the template gives, in what the template sets.
func generatedChanged(have, want client.Object) bool {
	if !subset(want.GetLabels(), have.GetLabels()) || !subset(want.GetAnnotations(), have.GetAnnotations()) {
		return true
	}
	switch w := want.(type) {
	case *sourcev1.OCIRepository:
		return !equality.Semantic.DeepEqual(have.(*sourcev1.OCIRepository).Spec, w.Spec)
	case *sourcev1.HelmChart:
		return helmChartChanged(have.(*sourcev1.HelmChart), w)
	}
	return false
}

// setGeneratedSpec gives have want's spec, labels and annotations.
func setGeneratedSpec(have, want client.Object) {
	switch w := want.(type) {
	case *sourcev1.OCIRepository:
		have.(*sourcev1.OCIRepository).Spec = w.Spec
	case *sourcev1.HelmChart:
		have.(*sourcev1.HelmChart).Spec = w.Spec
	}
	have.SetLabels(mergeStrings(have.GetLabels(), want.GetLabels()))
	have.SetAnnotations(mergeStrings(have.GetAnnotations(), want.GetAnnotations()))
}

// generatedStatus is what the engine reads of a generated object's
// status: the generation it observed and its artifact.
func generatedStatus(o client.Object) (observed int64, artifact *meta.Artifact) {
	k, _ := kinds.Of(o)
	s := k.Status(o)
	return s.ObservedGeneration, s.Artifact
}

// helmChartChanged reports whether the HelmChart in the cluster differs
// from the one the template gives, in what the template sets.
func helmChartChanged(have, want *sourcev1.HelmChart) bool {
	hs, ws := have.Spec, want.Spec
	return hs.Chart != ws.Chart || hs.Version != ws.Version || hs.SourceRef != ws.SourceRef ||
		hs.Interval != ws.Interval || hs.ReconcileStrategy != ws.ReconcileStrategy ||
		!slices.Equal(hs.ValuesFiles, ws.ValuesFiles) || hs.IgnoreMissingValuesFiles != ws.IgnoreMissingValuesFiles ||
		(hs.Verify == nil) != (ws.Verify == nil) || (hs.Verify != nil && !equality.Semantic.DeepEqual(hs.Verify, ws.Verify))
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// reconcileHelmChart creates or updates the object spec.chart generates
// (a HelmChart, or an OCIRepository for kind OCIRepository) and records it
// in status.helmChart as helm-controller does (<namespace>/<name> for a
// HelmChart, <kind>/<namespace>/<name> otherwise); the one it had before,
// when the template now gives another, and the one of a release that moved
// to chartRef, it deletes. It writes only when something changed.
func (r *Reconciler) reconcileHelmChart(ctx context.Context, obj *helmv2.HelmRelease, self frame.Ref) (frame.Outcome, bool) {
	if obj.Spec.Chart == nil {
		if obj.Status.HelmChart != "" {
			if err := r.deleteHelmChart(ctx, obj); err != nil {
				return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)), false
			}
			obj.Status.HelmChart = ""
		}
		return frame.Outcome{}, true
	}
	ref := obj.GetHelmChartTemplateReference()
	want := chartTemplateFor(obj)
	if r.opts.Restricted && ref.Namespace != obj.Namespace {
		return frame.Stalled(meta.ArtifactFailedReason, fmt.Errorf("%s: spec.chart.spec.sourceRef in namespace %s: %w", self, ref.Namespace, frame.ErrCrossNamespace)), false
	}
	if old := obj.Status.GetHelmChartReference(); old != nil && !old.Matches(ref) {
		if err := r.deleteHelmChart(ctx, obj); err != nil {
			return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)), false
		}
	}
	obj.Status.SetChart(ref)
	// Until the object has reconciled its latest spec, its artifact may
	// be another version's: wait, as Flux does; its readiness wakes the
	// release.
	pending := frame.Waiting(meta.DependencyNotReadyReason, fmt.Sprintf("%s '%s/%s' is not ready: its latest generation is not reconciled yet", ref.Kind, ref.Namespace, ref.Name), frame.DependencyRequeue)
	have := newGenerated(ref.Kind)
	err := r.deps.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		// Create first: the cache has not seen the object, and asking
		// the API server before every creation would cost a request more.
		err = r.deps.Client.Create(ctx, want.DeepCopyObject().(client.Object))
		if err == nil {
			return pending, false
		}
		if apierrors.IsAlreadyExists(err) {
			err = r.deps.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
		}
	}
	observed, artifact := generatedStatus(have)
	switch {
	case err != nil:
		return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: creating or reading %s %s/%s: %w", self, ref.Kind, ref.Namespace, ref.Name, err)), false
	case generatedChanged(have, want):
		patch := client.MergeFrom(have.DeepCopyObject().(client.Object))
		setGeneratedSpec(have, want)
		if err := r.deps.Client.Patch(ctx, have, patch); err != nil {
			return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: updating %s %s/%s: %w", self, ref.Kind, ref.Namespace, ref.Name, err)), false
		}
		return pending, false
	case observed != have.GetGeneration():
		return pending, false
	case artifact == nil:
		// Say why the chart is missing: the object's own failure. Its
		// readiness wakes the release when it turns Ready; a failure that
		// only changes its cause does not, hence the retry.
		if c := conditions.Get(have.(conditions.Getter), meta.ReadyCondition); c != nil && c.Status == metav1.ConditionFalse {
			return frame.Waiting(meta.ArtifactFailedReason, fmt.Sprintf("%s '%s/%s' is not ready: %s", ref.Kind, ref.Namespace, ref.Name, c.Message), chartFailureRetry), false
		}
	}
	return frame.Outcome{}, true
}

func mergeStrings(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// deleteHelmChart deletes the object status.helmChart names (a HelmChart
// or an OCIRepository spec.chart generated), when it is one this release
// owns (helm-controller's owner labels say so).
func (r *Reconciler) deleteHelmChart(ctx context.Context, obj *helmv2.HelmRelease) error {
	ref := obj.Status.GetHelmChartReference()
	if ref == nil {
		ref = obj.GetHelmChartTemplateReference()
	}
	if ref == nil || (ref.Kind != sourcev1.HelmChartKind && ref.Kind != sourcev1.OCIRepositoryKind) {
		return nil
	}
	o := newGenerated(ref.Kind)
	if err := r.deps.APIReader.Get(ctx, ref.GetObjectKey(), o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if o.GetLabels()[helmv2.GroupVersion.Group+"/name"] != obj.Name || o.GetLabels()[helmv2.GroupVersion.Group+"/namespace"] != obj.Namespace {
		return nil
	}
	if err := r.deps.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", ref, err)
	}
	return nil
}
