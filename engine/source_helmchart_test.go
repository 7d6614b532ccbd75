package engine_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// helmRepo starts a chart repository for one test with the given charts.
func helmRepo(t *testing.T, opts testenv.HelmRepoOptions, charts ...map[string]string) *testenv.HelmRepo {
	t.Helper()
	r, err := testenv.StartHelmRepo(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	for _, c := range charts {
		if _, err := r.AddChart(c, ""); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func helmRepository(ns, name, url string) *sourcev1.HelmRepository {
	return &sourcev1.HelmRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       sourcev1.HelmRepositorySpec{URL: url, Interval: metav1.Duration{Duration: time.Hour}},
	}
}

// chartRelease is a HelmRelease with spec.chart from a HelmRepository.
func chartRelease(ns, name, repo, version string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "demo", Version: version,
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repo},
			}},
		},
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHelmReleaseChartFromHTTPRepositoryUpgradesOnNewVersion(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	hrepo := helmRepository(ns, "charts", repo.URL())
	hrepo.Spec.SecretRef = &meta.LocalObjectReference{Name: "repo-auth"}
	hr := chartRelease(ns, "app", "charts", "1.x")
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-auth", Namespace: ns},
		Data:       map[string][]byte{"username": []byte("u"), "password": []byte("p")},
	}, hrepo, hr)

	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["chart"] != "1.0.0" {
		t.Fatalf("installed ConfigMap = %v, want chart 1.0.0", cm.Data)
	}
	if want := ns + "/" + ns + "-app"; hr.Status.HelmChart != want {
		t.Fatalf("status.helmChart = %q, want %q", hr.Status.HelmChart, want)
	}
	hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-app", Namespace: ns}}
	waitFor(t, hc, readyIs(hc, true), "Ready=True")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hrepo), hrepo); err != nil {
		t.Fatal(err)
	}
	if hc.Status.Artifact == nil || hc.Status.Artifact.Revision != "1.0.0" || hc.Status.ObservedChartName != "demo" ||
		hrepo.Status.Artifact == nil || hc.Status.ObservedSourceArtifactRevision != hrepo.Status.Artifact.Revision ||
		hc.Labels["helm.toolkit.fluxcd.io/name"] != "app" || hc.Spec.Version != "1.x" {
		t.Fatalf("HelmChart status %+v labels %v; HelmRepository artifact %+v", hc.Status, hc.Labels, hrepo.Status.Artifact)
	}
	if c := conditions.Get(hc, meta.ReadyCondition); c.Reason != sourcev1.ChartPullSucceededReason ||
		c.Message != "pulled 'demo' chart with version '1.0.0'" {
		t.Fatalf("HelmChart Ready = %s %q", c.Reason, c.Message)
	}

	// A new version in the index is picked up on request and upgrades the
	// release.
	if _, err := repo.AddChart(demoChart("1.1.0"), ""); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, hrepo)
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].ChartVersion == "1.1.0"
	}, "upgrade to chart 1.1.0")
	if !exists(t, cm) || cm.Data["chart"] != "1.1.0" {
		t.Fatalf("after upgrade the ConfigMap says chart %q, want 1.1.0", cm.Data["chart"])
	}

	// Deleting the HelmRelease deletes its HelmChart.
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "HelmChart and release gone after the HelmRelease", func() bool { return !exists(t, hc) && !exists(t, cm) })
}
