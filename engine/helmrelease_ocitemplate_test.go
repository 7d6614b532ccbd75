package engine_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// TestHelmReleaseChartTemplateOfKindOCIRepository: spec.chart with kind
// OCIRepository (Flux 2.10) generates the OCIRepository
// <namespace>-<name> from the template's OCIRepository spec, as
// helm-controller does (its interval the release's, the chart layer
// copied when the template selects none, the template's labels and
// helm-controller's owner labels), records it in status.helmChart as
// OCIRepository/<namespace>/<name>, installs from it with the chart
// version helm-controller records for an OCI chart, follows a change of
// the template, and deletes it with the release.
func TestHelmReleaseChartTemplateOfKindOCIRepository(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"), demoChart("1.1.0"))
	startEngine(t, engine.Options{})
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Chart: &helmv2.HelmChartTemplate{
				Kind:       sourcev1.OCIRepositoryKind,
				ObjectMeta: &helmv2.HelmChartTemplateObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: helmv2.HelmChartTemplateSpec{OCIRepositorySpec: sourcev1.OCIRepositorySpec{
					URL: "oci://" + reg.Host() + "/charts/demo", Insecure: true,
					Reference: &sourcev1.OCIRepositoryRef{Tag: "1.0.0"},
				}},
			},
		},
	}
	create(t, hr)
	waitFor(t, hr, func() bool { return conditions.IsReady(hr) && len(hr.Status.History) > 0 }, "installed")
	if want := "OCIRepository/" + ns + "/" + ns + "-app"; hr.Status.HelmChart != want {
		t.Fatalf("status.helmChart = %q, want %q", hr.Status.HelmChart, want)
	}
	or := &sourcev1.OCIRepository{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-app"}, or); err != nil {
		t.Fatal(err)
	}
	if or.Labels["helm.toolkit.fluxcd.io/name"] != "app" || or.Labels["helm.toolkit.fluxcd.io/namespace"] != ns || or.Labels["team"] != "a" ||
		or.Spec.Interval == nil || or.Spec.Interval.Duration != time.Hour ||
		or.Spec.LayerSelector == nil || or.Spec.LayerSelector.MediaType != testenv.HelmChartMediaType || or.Spec.LayerSelector.Operation != sourcev1.OCILayerCopy {
		t.Fatalf("generated OCIRepository: labels %v, spec %+v", or.Labels, or.Spec)
	}
	if or.Status.Artifact == nil {
		t.Fatal("generated OCIRepository has no artifact")
	}
	version, _, err := helm.ChartVersionWithDigest("1.0.0", or.Status.Artifact.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if got := hr.Status.History[0].ChartVersion; got != version {
		t.Fatalf("history chart version %q, want %q", got, version)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["chart"] != version {
		t.Fatalf("installed ConfigMap %v, want chart %s", cm.Data, version)
	}

	// The template moves to 1.1.0: the OCIRepository follows, the
	// release upgrades.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
			return err
		}
		hr.Spec.Chart.Spec.Reference.Tag = "1.1.0"
		return cp.Client.Update(ctx, hr)
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgraded to revision 2")
	if !exists(t, cm) || len(cm.Data["chart"]) < 6 || cm.Data["chart"][:6] != "1.1.0+" {
		t.Fatalf("upgraded ConfigMap %v, want chart 1.1.0+<digest>", cm.Data)
	}

	// Deleted with the release.
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitGone(t, or)
}
