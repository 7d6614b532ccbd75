package engine_test

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestHelmChartFromABucket packages a chart from a path in an S3 bucket
// (SeaweedFS), as Flux's source-controller does for a Bucket source, and
// with the Revision strategy upgrades the release when an object of the
// chart changes in the bucket.
func TestHelmChartFromABucket(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	s3 := startS3(t, ns)
	if err := s3.MakeBucket(ctx, "charts"); err != nil {
		t.Fatal(err)
	}
	for k, v := range prefixed("charts/demo/", demoChart("1.0.0")) {
		if err := s3.Put(ctx, "charts", k, v); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, engine.Options{})
	b := s3Bucket(ns, "charts", s3, "charts")
	hr := chartRelease(ns, "app", b.Name, "")
	hr.Spec.Chart.Spec.Chart = "./charts/demo"
	hr.Spec.Chart.Spec.SourceRef.Kind = sourcev1.BucketKind
	hr.Spec.Chart.Spec.ReconcileStrategy = sourcev1.ReconcileStrategyRevision
	for _, o := range []client.Object{b, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	waitFor(t, b, readyIs(b, true), "Ready=True")
	hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-app", Namespace: ns}}
	waitFor(t, hc, readyIs(hc, true), "Ready=True")
	if hc.Status.ObservedChartName != "demo" || hc.Status.ObservedSourceArtifactRevision != b.Status.Artifact.Revision ||
		conditions.GetReason(hc, meta.ReadyCondition) != sourcev1.ChartPackageSucceededReason ||
		!strings.HasPrefix(hc.Status.Artifact.Revision, "1.0.0+") {
		t.Fatalf("HelmChart status %+v, Ready reason %s", hc.Status, conditions.GetReason(hc, meta.ReadyCondition))
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["color"] != "blue" {
		t.Fatalf("installed ConfigMap = %v", cm.Data)
	}
	first := hr.Status.History[0].ChartVersion

	// A changed object in the bucket: a new Bucket revision, a new chart
	// version under the Revision strategy, and an upgrade.
	if err := s3.Put(ctx, "charts", "charts/demo/values.yaml", "color: orange\n"); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, b)
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].ChartVersion != first
	}, "upgrade to the chart of the new bucket revision")
	if !exists(t, cm) || cm.Data["color"] != "orange" {
		t.Fatalf("ConfigMap after the bucket changed: %v", cm.Data)
	}
	if hr.Status.History[0].Version != 2 || hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionUpgrade {
		t.Fatalf("history %+v, action %s", hr.Status.History[0], hr.Status.LastAttemptedReleaseAction)
	}
}
