package helm_test

import (
	"context"
	"testing"

	"github.com/cozystack/cozy-aio/apply/helm"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestDriftDetectionAndCorrection(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "drift", Namespace: ns}
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}, Drift: helm.DriftDetect}
	out, err := m.Reconcile(ctx, rel, opts, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := m.Drift(ctx, rel, helm.DriftOptions{}); err != nil || len(d) != 0 {
		t.Fatalf("fresh release drifted: %v %v", d, err)
	}
	// Someone edits the ConfigMap by hand.
	var cm corev1.ConfigMap
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "drift"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["message"] = "edited"
	if err := cp.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	out, err = m.Reconcile(ctx, rel, opts, out.State)
	if err != nil || len(out.Drift) != 1 || out.Drift[0].String() != "ConfigMap/"+ns+"/drift" || len(out.Steps) != 0 {
		t.Fatalf("detect: %+v %v", out, err)
	}
	if msg, _ := configMapMessage(t, ns, "drift"); msg != "edited" {
		t.Fatal("DriftDetect changed the object")
	}
	opts.Drift = helm.DriftCorrect
	out, err = m.Reconcile(ctx, rel, opts, out.State)
	if err != nil || len(out.Drift) != 1 || len(out.Steps) != 1 || out.Steps[0].Action != helm.ActionCorrectDrift {
		t.Fatalf("correct: %+v %v", out, err)
	}
	if msg, _ := configMapMessage(t, ns, "drift"); msg != "hello" {
		t.Fatalf("message %q after correction", msg)
	}
	// A deleted object is drift too.
	if err := cp.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drift"}}); err != nil {
		t.Fatal(err)
	}
	d, err := m.Drift(ctx, rel, helm.DriftOptions{Correct: true})
	if err != nil || len(d) != 1 || !d[0].Missing {
		t.Fatalf("missing: %v %v", d, err)
	}
	if msg, ok := configMapMessage(t, ns, "drift"); !ok || msg != "hello" {
		t.Fatal("missing object not recreated")
	}
}

func TestCRDPolicies(t *testing.T) {
	ctx := testContext(t)
	m := newManager(t, helm.Options{})
	const crdName = "widgets.example.cozystack.io"
	getCRD := func() *apiextensionsv1.CustomResourceDefinition {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := cp.Client.Get(ctx, types.NamespacedName{Name: crdName}, &crd); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			t.Fatal(err)
		}
		return &crd
	}
	t.Cleanup(func() {
		_ = cp.Client.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}})
	})

	// Skip: the CRD is not created, so the chart's Widget cannot map.
	ns := cp.Namespace(t)
	_, err := m.Install(ctx, helm.Release{Name: "skip", Namespace: ns}, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("crds")}, CRDs: helm.CRDSkip})
	mustContain(t, err, "helm install "+ns+"/skip", "Widget")
	if getCRD() != nil {
		t.Fatal("CRDSkip created the CRD")
	}
	// Create (the install default): created, then the Widget installs.
	if _, err := m.Install(ctx, helm.Release{Name: "create", Namespace: ns}, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("crds")}}); err != nil {
		t.Fatal(err)
	}
	crd := getCRD()
	if crd == nil {
		t.Fatal("CRD not created")
	}
	// Somebody changes the CRD; Create leaves it, CreateReplace restores it.
	crd.Spec.Names.ShortNames = []string{"wd"}
	if err := cp.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	rel := helm.Release{Name: "create", Namespace: ns}
	if _, err := m.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: helm.Spec{Chart: ociChart("crds"), Values: []map[string]any{{"x": 1}}}, CRDs: helm.CRDCreate}); err != nil {
		t.Fatal(err)
	}
	if len(getCRD().Spec.Names.ShortNames) != 1 {
		t.Fatal("CRDCreate replaced an existing CRD")
	}
	// CreateReplace applies the chart's CRD with force-conflicts: fields
	// the chart sets win; fields it does not set are left to their owner.
	crd = getCRD()
	crd.Spec.Names.Singular = "gadget"
	if err := cp.Client.Update(ctx, crd, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: helm.Spec{Chart: ociChart("crds"), Values: []map[string]any{{"x": 2}}}, CRDs: helm.CRDCreateReplace}); err != nil {
		t.Fatal(err)
	}
	if s := getCRD().Spec.Names.Singular; s != "widget" {
		t.Fatalf("CRDCreateReplace left singular %q", s)
	}
}

func TestImpersonatedServiceAccount(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	// The ServiceAccount has no RBAC: every request is refused, which shows
	// the action runs as it, storage included.
	rel := helm.Release{Name: "imp", Namespace: ns, ServiceAccount: "tenant"}
	_, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("demo")}})
	mustContain(t, err, ns+"/imp", "system:serviceaccount:"+ns+":tenant", "forbidden")
}

func TestTestAction(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "tested", Namespace: ns}
	if _, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("demo")}}); err != nil {
		t.Fatal(err)
	}
	// The demo chart has no test hooks: the test passes trivially.
	res, err := m.Test(ctx, rel, helm.TestOptions{})
	if err != nil || res.Action != helm.ActionTest || res.Revision != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = m.Test(ctx, helm.Release{Name: "absent", Namespace: ns}, helm.TestOptions{})
	mustContain(t, err, "helm test "+ns+"/absent")
}
