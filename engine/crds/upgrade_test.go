package crds_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/engine/crds"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// cp is a control plane whose Flux CRDs are Flux 2.9's, as cozy-aio
// installed them before it moved to Flux 2.10.
var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	old, err := flux29CRDs()
	if err != nil {
		panic(err)
	}
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{CRDs: old, Scheme: engine.NewScheme()}))
}

func flux29CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crds.Load(os.DirFS("testdata/flux-2.9"))
}

// Objects stored under the Flux 2.9 CRDs keep working when cozy-aio
// upgrades its CRDs in place to Flux 2.10's: every object is reconciled
// again, nothing is reinstalled or rewritten, Alerts and Providers stored
// as v1beta3 read as v1 (now the storage version) and still deliver.
func TestObjectsStoredUnderFlux29CRDsSurviveTheUpgrade(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if _, err := reg.PushChart(ctx, "charts/demo", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: demo\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  chart: {{ .Chart.Version | quote }}\n",
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: " + ns + "\ndata:\n  key: value\n",
	}, nil); err != nil {
		t.Fatal(err)
	}
	hook := newHook(t)
	hour := &metav1.Duration{Duration: time.Hour}
	chart := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "chart", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{URL: "oci://" + reg.Host() + "/charts/demo", Insecure: true, Interval: hour,
			Reference:     &sourcev1.OCIRepositoryRef{Tag: "1.0.0"},
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: sourcev1.OCILayerCopy}}}
	manifests := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "manifests", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{URL: "oci://" + reg.Host() + "/manifests/app", Insecure: true, Interval: hour,
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"}}}
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{Interval: *hour,
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "chart"}}}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{Interval: *hour, Path: "./", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "manifests"}}}
	provider := &notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
		Spec: notifyv1beta3.ProviderSpec{Type: "generic", Address: hook.URL}}
	alert := &notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
		Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "hook"}, Summary: "stored as v1beta3",
			EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: kustomizev1.KustomizationKind, Name: "*"}}}}
	for _, o := range []client.Object{chart, manifests, hr, ks, provider, alert} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// Before: the engine reconciles under the Flux 2.9 CRDs.
	stop := start(t, false)
	for _, o := range []readyObject{chart, manifests, hr, ks} {
		waitFor(t, o, func() bool { return conditions.IsReady(o) }, "Ready=True")
	}
	helmCM := &corev1.ConfigMap{}
	appliedCM := &corev1.ConfigMap{}
	get(t, client.ObjectKey{Namespace: ns, Name: "app-settings"}, helmCM)
	get(t, client.ObjectKey{Namespace: ns, Name: "applied"}, appliedCM)
	if len(hr.Status.History) != 1 || hr.Status.History[0].Version != 1 {
		t.Fatalf("history before the upgrade: %+v", hr.Status.History)
	}
	stop()

	// The engine of Flux 2.10 installs its CRDs in place.
	start(t, true)
	alerts := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "alerts.notification.toolkit.fluxcd.io"}}
	waitFor(t, alerts, func() bool { return storageVersion(alerts) == "v1" && established(alerts) }, "the Flux 2.10 Alert CRD (storage version v1) installed")
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range all {
		live := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: want.Name}}
		waitFor(t, live, func() bool { return live.Annotations[engine.CRDDigestAnnotation] != "" && established(live) }, "upgraded in place")
	}
	requested := time.Now().Format(time.RFC3339Nano)
	for _, o := range []readyObject{chart, manifests, hr, ks} {
		patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
		o.SetAnnotations(map[string]string{meta.ReconcileRequestAnnotation: requested})
		if err := cp.Client.Patch(ctx, o, patch); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []readyObject{chart, manifests, hr, ks} {
		waitFor(t, o, func() bool {
			return conditions.IsReady(o) && lastHandled(t, o) == requested
		}, "reconciled again and Ready=True")
	}
	if len(hr.Status.History) != 1 || hr.Status.History[0].Version != 1 {
		t.Fatalf("the release was reinstalled or upgraded by the CRD upgrade: history %+v", hr.Status.History)
	}
	var secrets corev1.SecretList
	if err := cp.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "app"}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("release Secrets after the upgrade: %d (%v), want 1", len(secrets.Items), err)
	}
	for _, cm := range []*corev1.ConfigMap{helmCM, appliedCM} {
		now := &corev1.ConfigMap{}
		get(t, client.ObjectKeyFromObject(cm), now)
		if now.ResourceVersion != cm.ResourceVersion {
			t.Errorf("ConfigMap %s rewritten by the upgrade (resourceVersion %s -> %s)", cm.Name, cm.ResourceVersion, now.ResourceVersion)
		}
	}

	// The Alert stored as v1beta3 reads as v1, keeps its v1beta3 fields
	// there, and still delivers.
	get(t, client.ObjectKeyFromObject(alert), &notifyv1.Alert{})
	old := &notifyv1beta3.Alert{}
	get(t, client.ObjectKeyFromObject(alert), old)
	if old.Spec.Summary != "stored as v1beta3" {
		t.Fatalf("v1beta3 Alert summary %q after the upgrade", old.Spec.Summary)
	}
	patch := client.MergeFrom(ks.DeepCopy())
	ks.Spec.Path = "./nowhere"
	if err := cp.Client.Patch(ctx, ks, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, func() bool { return !conditions.IsReady(ks) && ks.Status.ObservedGeneration == ks.Generation }, "Ready=False")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return hook.has(func(e eventv1.Event) bool {
			return e.InvolvedObject.Name == "app" && e.Severity == eventv1.EventSeverityError
		}), nil
	}); err != nil {
		t.Fatal("the Alert stored as v1beta3 did not deliver the Kustomization's error after the upgrade")
	}
}

type readyObject interface {
	client.Object
	conditions.Getter
}

// lastHandled returns status.lastHandledReconcileAt, which every Flux
// kind has but not every kind has a getter for.
func lastHandled(t *testing.T, obj client.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedString(u, "status", "lastHandledReconcileAt")
	return s
}

// start runs an engine until the test ends, or until the returned
// function stops it.
func start(t *testing.T, installCRDs bool) func() {
	t.Helper()
	e, err := engine.New(cp.Config, engine.Options{DataDir: t.TempDir(), ArtifactAddr: "127.0.0.1:0",
		Registry: prometheus.NewRegistry(), InstallCRDs: installCRDs,
		// The test's Provider listens on loopback, which the destination
		// policy refuses for Providers by default.
		Destinations: engine.DestinationOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("engine: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, obj client.Object, check func() bool, what string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return check(), nil
	})
	if err != nil {
		t.Fatalf("%T %s/%s: %s never happened", obj, obj.GetNamespace(), obj.GetName(), what)
	}
}

func get(t *testing.T, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := cp.Client.Get(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// hook records the Flux events a generic Provider posts to it.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	events []eventv1.Event
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev eventv1.Event
		if json.Unmarshal(body, &ev) == nil {
			h.mu.Lock()
			h.events = append(h.events, ev)
			h.mu.Unlock()
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) has(match func(eventv1.Event) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if match(e) {
			return true
		}
	}
	return false
}
