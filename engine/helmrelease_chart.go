package engine

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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
		ObjectMeta: metav1.ObjectMeta{
			Name: ref.Name, Namespace: ref.Namespace,
			Labels: map[string]string{
				helmv2.GroupVersion.Group + "/name":      obj.Name,
				helmv2.GroupVersion.Group + "/namespace": obj.Namespace,
			},
		},
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
	if m := tpl.ObjectMeta; m != nil {
		hc.Annotations = maps.Clone(m.Annotations)
		labels := maps.Clone(m.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, hc.Labels)
		hc.Labels = labels
	}
	return hc
}

// helmChartChanged reports whether the HelmChart in the cluster differs
// from the one the template gives, in what the template sets.
func helmChartChanged(have, want *sourcev1.HelmChart) bool {
	hs, ws := have.Spec, want.Spec
	return hs.Chart != ws.Chart || hs.Version != ws.Version || hs.SourceRef != ws.SourceRef ||
		hs.Interval != ws.Interval || hs.ReconcileStrategy != ws.ReconcileStrategy ||
		!slices.Equal(hs.ValuesFiles, ws.ValuesFiles) || hs.IgnoreMissingValuesFiles != ws.IgnoreMissingValuesFiles ||
		(hs.Verify == nil) != (ws.Verify == nil) || (hs.Verify != nil && !equality.Semantic.DeepEqual(hs.Verify, ws.Verify)) ||
		!subset(want.Labels, have.Labels) || !subset(want.Annotations, have.Annotations)
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// reconcileHelmChart creates or updates the HelmChart of spec.chart and
// records it in status.helmChart; for a release that moved to chartRef,
// it deletes the HelmChart it had. It writes only when something
// changed.
func (e *Engine) reconcileHelmChart(ctx context.Context, obj *helmv2.HelmRelease, self nodeRef) (outcome, bool) {
	if obj.Spec.Chart == nil {
		if obj.Status.HelmChart != "" {
			if err := e.deleteHelmChart(ctx, obj); err != nil {
				return failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)), false
			}
			obj.Status.HelmChart = ""
		}
		return outcome{}, true
	}
	want := helmChartFor(obj)
	if e.opts.Restricted && want.Namespace != obj.Namespace {
		return stalled(meta.ArtifactFailedReason, fmt.Errorf("%s: spec.chart.spec.sourceRef in namespace %s: %w", self, want.Namespace, ErrCrossNamespace)), false
	}
	if old := obj.Status.HelmChart; old != "" && old != want.Namespace+"/"+want.Name {
		if err := e.deleteHelmChart(ctx, obj); err != nil {
			return failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)), false
		}
	}
	obj.Status.HelmChart = want.Namespace + "/" + want.Name
	// Until the HelmChart has reconciled its latest spec, its artifact may
	// be another version's: wait, as Flux does; its readiness wakes the
	// release.
	pending := waiting(meta.DependencyNotReadyReason, fmt.Sprintf("HelmChart '%s/%s' is not ready: its latest generation is not reconciled yet", want.Namespace, want.Name), 0)
	have := &sourcev1.HelmChart{}
	err := e.mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		// Create first: the cache has not seen the HelmChart, and asking
		// the API server before every creation would cost a request more.
		err = e.mgr.GetClient().Create(ctx, want.DeepCopy())
		if err == nil {
			return pending, false
		}
		if apierrors.IsAlreadyExists(err) {
			err = e.mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(want), have)
		}
	}
	switch {
	case err != nil:
		return failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: creating or reading HelmChart %s/%s: %w", self, want.Namespace, want.Name, err)), false
	case helmChartChanged(have, want):
		patch := client.MergeFrom(have.DeepCopy())
		have.Spec = want.Spec
		have.Labels = mergeStrings(have.Labels, want.Labels)
		have.Annotations = mergeStrings(have.Annotations, want.Annotations)
		if err := e.mgr.GetClient().Patch(ctx, have, patch); err != nil {
			return failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: updating HelmChart %s/%s: %w", self, want.Namespace, want.Name, err)), false
		}
		return pending, false
	case have.Status.ObservedGeneration != have.Generation:
		return pending, false
	case have.Status.Artifact == nil:
		// Say why the chart is missing: the HelmChart's own failure. Its
		// readiness wakes the release when it turns Ready; a failure that
		// only changes its cause does not, hence the retry.
		if c := conditions.Get(have, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionFalse {
			return waiting(meta.ArtifactFailedReason, fmt.Sprintf("HelmChart '%s/%s' is not ready: %s", want.Namespace, want.Name, c.Message), chartFailureRetry), false
		}
	}
	return outcome{}, true
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

// deleteHelmChart deletes the HelmChart status.helmChart names, when it
// is one this release owns (Flux's labels say so).
func (e *Engine) deleteHelmChart(ctx context.Context, obj *helmv2.HelmRelease) error {
	ref := obj.Status.GetHelmChartReference()
	if ref == nil {
		ref = obj.GetHelmChartTemplateReference()
	}
	if ref == nil || ref.Kind != sourcev1.HelmChartKind {
		return nil
	}
	ns, name := ref.Namespace, ref.Name
	hc := &sourcev1.HelmChart{}
	if err := e.mgr.GetAPIReader().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, hc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if hc.Labels[helmv2.GroupVersion.Group+"/name"] != obj.Name || hc.Labels[helmv2.GroupVersion.Group+"/namespace"] != obj.Namespace {
		return nil
	}
	if err := e.mgr.GetClient().Delete(ctx, hc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting HelmChart %s/%s: %w", ns, name, err)
	}
	return nil
}
