package engine_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
)

// A release helm-controller installed from an OCIRepository, with the
// status it wrote, is taken over as it is: cozy-aio finds it in sync by
// helm-controller's own rules (the snapshot's digest verifies the record,
// the chart version carries the artifact digest, the values digest
// matches), writes nothing to the release and leaves the history as
// helm-controller wrote it. New values upgrade it.
func TestHelmReleaseInstalledByHelmControllerIsAdoptedWithoutUpgrade(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	d := pushDemoChart(t)
	files, version, ociDigest := d.files, d.version, d.ociDigest
	values := map[string]any{"color": "green"}
	rel := installAsHelmController(t, ns, "app", files, version, values)

	src, hr := d.createGreenRelease(t, ns)
	hr.Status = helmControllerStatus(hr, rel, ociDigest, values)
	if err := cp.Client.Status().Update(ctx, hr); err != nil {
		t.Fatal(err)
	}
	before := hr.DeepCopy()
	records := releaseSecrets(t, ns, "app")
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-settings"}, cm); err != nil {
		t.Fatal(err)
	}

	startEngine(t, engine.Options{})
	waitFor(t, src, readyIs(src, true), "OCIRepository Ready=True")
	requestReconcile(t, hr)
	token := hr.Annotations[meta.ReconcileRequestAnnotation]
	waitFor(t, hr, func() bool { return hr.Status.LastHandledReconcileAt == token }, "lastHandledReconcileAt = requestedAt")

	if c := conditions.Get(hr, meta.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v, want True", c)
	}
	after := releaseSecrets(t, ns, "app")
	if len(after) != 1 || after[0].Name != records[0].Name || after[0].ResourceVersion != records[0].ResourceVersion {
		t.Fatalf("release Secrets after the takeover: %v, want %s at resourceVersion %s untouched", secretNames(after), records[0].Name, records[0].ResourceVersion)
	}
	for k := range after[0].Labels {
		if k == helm.LabelHolder || k == helm.LabelDigest {
			t.Fatalf("the takeover labelled helm-controller's record: %v", after[0].Labels)
		}
	}
	cmAfter := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(cm), cmAfter); err != nil {
		t.Fatal(err)
	}
	if cmAfter.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("the release's ConfigMap was applied again: resourceVersion %s → %s", cm.ResourceVersion, cmAfter.ResourceVersion)
	}
	if !apiequality.Semantic.DeepEqual(before.Status.History, hr.Status.History) {
		t.Fatalf("history rewritten:\n got %+v\nwant %+v", hr.Status.History[0], before.Status.History[0])
	}

	// New values: out of sync, cozy-aio upgrades.
	patch := client.MergeFrom(hr.DeepCopy())
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"color":"red"}`)}
	if err := cp.Client.Patch(ctx, hr, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgrade to revision 2")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(cm), cmAfter); err != nil || cmAfter.Data["color"] != "red" {
		t.Fatalf("after the upgrade the ConfigMap says %v (%v), want color red", cmAfter.Data, err)
	}
	if n := len(releaseSecrets(t, ns, "app")); n != 2 {
		t.Fatalf("%d release Secrets after the upgrade, want 2", n)
	}
}

// installAsHelmController installs chart files as helm-controller does:
// Helm's own install action and Secrets driver, no labels of cozy-aio's,
// the chart version replaced with version.
func installAsHelmController(t *testing.T, ns, name string, files map[string]string, version string, values map[string]any) *releasev1.Release {
	t.Helper()
	var bf []*archive.BufferedFile
	for n, data := range files {
		bf = append(bf, &archive.BufferedFile{Name: n, Data: []byte(data)})
	}
	ch, err := loader.LoadFiles(bf)
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version = version
	getter, err := newTestGetter(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	kc := kube.New(getter)
	kc.Namespace = ns
	cfg := action.NewConfiguration()
	cfg.RESTClientGetter = getter
	cfg.KubeClient = kc
	cfg.Releases = storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns)))
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = name, ns
	in.WaitStrategy = kube.HookOnlyStrategy
	in.Timeout = time.Minute
	r, err := in.RunWithContext(context.Background(), ch, values)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*releasev1.Release)
}

// helmControllerStatus is the status helm-controller writes after it
// installed rel.
func helmControllerStatus(hr *helmv2.HelmRelease, rel *releasev1.Release, ociDigest string, values map[string]any) helmv2.HelmReleaseStatus {
	s := helm.SnapshotOf(rel, "install", ociDigest)
	snap := &helmv2.Snapshot{
		APIVersion: s.APIVersion, Digest: s.Digest, Name: s.Name, Namespace: s.Namespace, Version: s.Version,
		Status: s.Status, Action: helmv2.ReleaseAction(s.Action), ChartName: s.ChartName, ChartVersion: s.ChartVersion,
		AppVersion: s.AppVersion, ConfigDigest: s.ConfigDigest, OCIDigest: s.OCIDigest,
		FirstDeployed: metav1.NewTime(s.FirstDeployed), LastDeployed: metav1.NewTime(s.LastDeployed),
	}
	msg := "Helm install succeeded for release " + s.Namespace + "/" + s.Name + ".v1 with chart " + s.ChartName + "@" + s.ChartVersion
	st := helmv2.HelmReleaseStatus{
		ObservedGeneration:                 hr.Generation,
		LastAttemptedGeneration:            hr.Generation,
		LastAttemptedRevision:              s.ChartVersion,
		LastAttemptedRevisionDigest:        ociDigest,
		LastAttemptedConfigDigest:          helm.ConfigDigest(values),
		LastAttemptedReleaseAction:         helmv2.ReleaseActionInstall,
		LastAttemptedReleaseActionDuration: &metav1.Duration{Duration: 2 * time.Second},
		StorageNamespace:                   hr.Namespace,
		History:                            helmv2.Snapshots{snap},
	}
	for _, c := range []string{helmv2.ReleasedCondition, meta.ReadyCondition} {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue,
			Reason: helmv2.InstallSucceededReason, Message: msg, ObservedGeneration: hr.Generation})
	}
	return st
}

func secretNames(l []corev1.Secret) []string {
	var out []string
	for _, s := range l {
		out = append(out, s.Name+"@"+s.ResourceVersion)
	}
	return out
}

// testGetter is a RESTClientGetter over the control plane's rest.Config,
// for Helm's actions run by a test as another controller would run them.
type testGetter struct {
	cfg *rest.Config
	dc  discovery.CachedDiscoveryInterface
}

func newTestGetter(cfg *rest.Config) (*testGetter, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &testGetter{cfg: cfg, dc: memory.NewMemCacheClient(dc)}, nil
}

func (g *testGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *testGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.dc, nil
}

func (g *testGetter) ToRESTMapper() (apimeta.RESTMapper, error) {
	return restmapper.NewDeferredDiscoveryRESTMapper(g.dc), nil
}

func (g *testGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{})
}
