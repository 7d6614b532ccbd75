package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

const (
	holdAnnotation    = "cozy-aio.cozystack.io/upgrade-hold"
	approveAnnotation = "cozy-aio.cozystack.io/approve-plan"
)

// seaweedRegistry pushes the rebuilt SeaweedFS chart (apply/helm's
// testdata) at each version: from 4.31.0 on it names its workloads after
// the release.
func seaweedRegistry(t *testing.T, versions ...string) *testenv.Registry {
	t.Helper()
	files, err := testenv.ReadTree("../apply/helm/testdata/seaweedfs")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	for _, v := range versions {
		files["Chart.yaml"] = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAllString(files["Chart.yaml"], "version: "+v)
		if _, err := reg.PushChart(context.Background(), "charts/seaweedfs", files); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

var heldHash = regexp.MustCompile(`plan (sha256:[0-9a-f]{64}) held`)

// heldPlan returns the hash the Held condition names, "" when not held.
func heldPlan(obj conditions.Getter) string {
	c := conditions.Get(obj, "Held")
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	if m := heldHash.FindStringSubmatch(c.Message); m != nil {
		return m[1]
	}
	return ""
}

func latestVersion(hr *helmv2.HelmRelease) int {
	if l := hr.Status.History.Latest(); l != nil {
		return l.Version
	}
	return 0
}

func statefulSetPresent(t *testing.T, ns, name string) bool {
	return exists(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

// annotate sets annotations on hr and asks for a reconcile, as
// `cozy-aio plan approve` and `flux reconcile` do; it returns the request.
func annotate(t *testing.T, hr client.Object, kv ...string) string {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(hr.DeepCopyObject().(client.Object))
	a := hr.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		a[kv[i]] = kv[i+1]
	}
	req := time.Now().Format(time.RFC3339Nano)
	a[meta.ReconcileRequestAnnotation] = req
	hr.SetAnnotations(a)
	if err := cp.Client.Patch(ctx, hr, patch); err != nil {
		t.Fatal(err)
	}
	return req
}

func setTag(t *testing.T, src *sourcev1.OCIRepository, tag string) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	src.Spec.Reference.Tag = tag
	if err := cp.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
}

func eventReasons(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	var evs corev1.EventList
	if err := cp.Client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name {
			out[e.Reason] = e.Message
		}
	}
	return out
}

// The SeaweedFS case end to end under upgrade-hold: risky. The rename is
// held with its risk and hash named, nothing in the cluster changes; a
// newer revision before the approval makes a new plan, which the old
// approval does not let through; approving it applies it. A harmless
// change runs at once; a malformed annotation stalls the release.
func TestUpgradeHoldSeaweedFS(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := seaweedRegistry(t, "4.0.405", "4.31.0", "4.32.0")
	startEngine(t, engine.Options{})
	src := chartSource(ns, "seaweedfs", reg.Host(), "4.0.405")
	src.Spec.URL = "oci://" + reg.Host() + "/charts/seaweedfs"
	hr := helmRelease(ns, "rel", "seaweedfs")
	hr.Annotations = map[string]string{holdAnnotation: "risky"}
	hr.Spec.Install = &helmv2.Install{DisableWait: true}
	hr.Spec.Upgrade = &helmv2.Upgrade{DisableWait: true}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	if !statefulSetPresent(t, ns, "seaweedfs-filer") || heldPlan(hr) != "" {
		t.Fatalf("install: StatefulSet seaweedfs-filer missing or held: %+v", hr.Status.Conditions)
	}

	setTag(t, src, "4.31.0")
	waitFor(t, hr, func() bool { return heldPlan(hr) != "" }, "Held=True")
	first := heldPlan(hr)
	held := conditions.Get(hr, "Held")
	for _, want := range []string{"DuplicateWorkload", "StatefulSet/" + ns + "/rel-seaweedfs-filer", "data-rel-seaweedfs-filer-0", "Service/" + ns + "/seaweedfs-s3"} {
		if !strings.Contains(held.Message, want) {
			t.Fatalf("Held message lacks %q: %s", want, held.Message)
		}
	}
	if !conditions.IsReady(hr) || latestVersion(hr) != 1 {
		t.Fatalf("held: Ready %v, revision %d; want Ready kept, revision 1", conditions.IsReady(hr), latestVersion(hr))
	}
	if statefulSetPresent(t, ns, "rel-seaweedfs-filer") || !statefulSetPresent(t, ns, "seaweedfs-filer") {
		t.Fatal("the held upgrade changed the StatefulSets")
	}
	if msg, ok := eventReasons(t, ns, "rel")["UpgradeRisky"]; !ok || !strings.Contains(msg, first) {
		t.Fatalf("no Warning UpgradeRisky naming %s: %v", first, eventReasons(t, ns, "rel"))
	}

	// A newer revision before the approval: a new plan, held again.
	setTag(t, src, "4.32.0")
	waitFor(t, hr, func() bool { h := heldPlan(hr); return h != "" && h != first }, "a new held plan")
	second := heldPlan(hr)
	req := annotate(t, hr, approveAnnotation, first)
	waitFor(t, hr, func() bool { return hr.Status.LastHandledReconcileAt == req }, "the approval of the old plan handled")
	if heldPlan(hr) != second || statefulSetPresent(t, ns, "rel-seaweedfs-filer") {
		t.Fatalf("the old plan's approval let the new one through: held %q", heldPlan(hr))
	}

	annotate(t, hr, approveAnnotation, second)
	waitFor(t, hr, func() bool { return conditions.Get(hr, "Held") == nil && latestVersion(hr) == 2 }, "the approved upgrade")
	if !conditions.IsReady(hr) || !statefulSetPresent(t, ns, "rel-seaweedfs-filer") {
		t.Fatalf("approved upgrade: Ready %v, new StatefulSet %v", conditions.IsReady(hr), statefulSetPresent(t, ns, "rel-seaweedfs-filer"))
	}

	// A harmless change (an image tag) runs at once under risky.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"image":"registry.k8s.io/pause:3.9"}`)}
	if err := cp.Client.Update(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool { return latestVersion(hr) == 3 && conditions.IsReady(hr) }, "the image change applied")
	if heldPlan(hr) != "" {
		t.Fatalf("the image change was held: %+v", conditions.Get(hr, "Held"))
	}
	if msg := eventReasons(t, ns, "rel")["UpgradePlanned"]; !strings.Contains(msg, "update") {
		t.Fatalf("no Normal UpgradePlanned for the image change: %v", eventReasons(t, ns, "rel"))
	}

	// A malformed hold is reported, never ignored.
	annotate(t, hr, holdAnnotation, "riksy")
	waitFor(t, hr, func() bool {
		c := conditions.Get(hr, meta.ReadyCondition)
		return c != nil && c.Reason == "InvalidUpgradeHold" && strings.Contains(c.Message, `"riksy"`)
	}, "Ready=False InvalidUpgradeHold")
}

func pvc(name, ns string) string {
	return "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
		"\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n"
}

// A Kustomization under upgrade-hold: risky. A commit that drops a
// PersistentVolumeClaim is held (DataLoss), nothing is pruned, Ready
// keeps its value; approving the plan prunes it. A harmless change runs
// at once.
func TestUpgradeHoldKustomization(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	secret := func(v string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: " + ns + "\nstringData:\n  password: " + v + "\n"
	}
	repo, _ := gitSource(t, ns, "apps", map[string]string{
		"deploy/a.yaml":     configMap("a", ns),
		"deploy/data.yaml":  pvc("data", ns),
		"deploy/creds.yaml": secret("first-secret-value"),
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	health := l.Addr().String()
	l.Close()
	startEngine(t, engine.Options{UpgradeHold: "risky", HealthAddr: health})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	first := ks.Status.LastAppliedRevision

	// A harmless change: applied at once. The Secret's new value shows
	// nowhere.
	if _, err := repo.Commit("main", map[string]string{
		"deploy/a.yaml":     strings.Replace(configMap("a", ns), "value", "other", 1),
		"deploy/data.yaml":  pvc("data", ns),
		"deploy/creds.yaml": secret("second-secret-value"),
	}, "harmless"); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns}})
	waitFor(t, ks, func() bool { return ks.Status.LastAppliedRevision != first && conditions.IsReady(ks) }, "the harmless change applied")
	if c := conditions.Get(ks, "Held"); c != nil {
		t.Fatalf("the harmless change was held: %+v", c)
	}
	second := ks.Status.LastAppliedRevision
	plans, err := status.ReadPlans(ctx, health)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<redacted>" as written
	if err := enc.Encode(plans); err != nil {
		t.Fatal(err)
	}
	seen := buf.Bytes()
	var evs corev1.EventList
	if err := cp.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		seen = append(seen, e.Message...)
	}
	if !strings.Contains(string(seen), "data.password") || !strings.Contains(string(seen), "<redacted>") {
		t.Fatalf("the plan does not show the Secret's changed key, redacted: %s", seen)
	}
	for _, v := range []string{"second-secret-value", base64.StdEncoding.EncodeToString([]byte("second-secret-value")), "first-secret-value"} {
		if strings.Contains(string(seen), v) {
			t.Fatalf("a plan or an Event shows the Secret's value %q", v)
		}
	}

	// Dropping the claim: held.
	if _, err := repo.Commit("main", map[string]string{"deploy/a.yaml": configMap("a", ns), "deploy/creds.yaml": secret("second-secret-value")}, "drop the claim"); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns}})
	waitFor(t, ks, func() bool { return heldPlan(ks) != "" }, "Held=True")
	held := conditions.Get(ks, "Held")
	if !strings.Contains(held.Message, "DataLoss PersistentVolumeClaim/"+ns+"/data") {
		t.Fatalf("Held message: %s", held.Message)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns}}
	if !exists(t, claim) || !claim.DeletionTimestamp.IsZero() || !conditions.IsReady(ks) || ks.Status.LastAppliedRevision != second {
		t.Fatalf("held: claim deleted %v, Ready %v, applied %s", !claim.DeletionTimestamp.IsZero(), conditions.IsReady(ks), ks.Status.LastAppliedRevision)
	}

	// The held plan, as `cozy-aio status` reads it from the node.
	plans, err = status.ReadPlans(ctx, health)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(plans, func(p status.Plan) bool { return p.Kind == "Kustomization" && p.Namespace == ns && p.Name == "apps" })
	if i < 0 || !plans[i].Held || plans[i].Plan.Hash != heldPlan(ks) {
		t.Fatalf("/plans/: %+v, want the held plan %s", plans, heldPlan(ks))
	}

	annotate(t, ks, approveAnnotation, heldPlan(ks))
	waitFor(t, ks, func() bool { return conditions.Get(ks, "Held") == nil && ks.Status.LastAppliedRevision != second }, "the approved change")
	if exists(t, claim) && claim.DeletionTimestamp.IsZero() {
		t.Fatal("the approved change did not prune the claim")
	}
}

// A HelmRelease with spec.kubeConfig is planned against its own cluster:
// the object its install takes over exists in the tenant cluster only,
// and the plan names that cluster's owner.
func TestUpgradeHoldPlansARemoteCluster(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	tenant, kc := tenantCluster(t)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "addons"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cilium-settings", Namespace: "addons",
			Annotations: map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "addons"}}},
	} {
		if err := tenant.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	hr := remoteRelease(ns, "cilium", "tenant-admin-kubeconfig", "super-admin.svc")
	hr.Annotations = map[string]string{holdAnnotation: "risky"}
	createObjects(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-admin-kubeconfig", Namespace: ns},
			Data: map[string][]byte{"super-admin.svc": kc}},
		chartSource(ns, "demo", reg.Host(), "1.0.0"), hr)
	waitFor(t, hr, func() bool { return heldPlan(hr) != "" }, "Held=True")
	held := conditions.Get(hr, "Held")
	if !strings.Contains(held.Message, "OwnershipChange ConfigMap/addons/cilium-settings") || !strings.Contains(held.Message, "Helm release addons/other") {
		t.Fatalf("Held message: %s", held.Message)
	}
	cm := &corev1.ConfigMap{}
	if err := tenant.Client.Get(ctx, client.ObjectKey{Namespace: "addons", Name: "cilium-settings"}, cm); err != nil || cm.Annotations["meta.helm.sh/release-name"] != "other" {
		t.Fatalf("the held install took the tenant's ConfigMap over: %v %v", cm.Annotations, err)
	}
}
