package testenv_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

func TestServerSideApplyNamespaceAndConfigMap(t *testing.T) {
	ctx := testContext(t)
	c := cp.Client
	const manager = "cozy-aio-test"
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "ssa-" + cp.Namespace(t)},
	}
	if err := c.Patch(ctx, ns, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
		t.Fatalf("applying namespace: %v", err)
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns.Name},
		Data:       map[string]string{"color": "blue"},
	}
	if err := c.Patch(ctx, cm, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
		t.Fatalf("applying configmap: %v", err)
	}

	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "settings"}, &got); err != nil {
		t.Fatalf("reading configmap back: %v", err)
	}
	if got.Data["color"] != "blue" {
		t.Fatalf("data = %v, want color=blue", got.Data)
	}
	var applied bool
	for _, mf := range got.ManagedFields {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			applied = true
		}
	}
	if !applied {
		t.Fatalf("no Apply managed fields entry for %q: %+v", manager, got.ManagedFields)
	}
	var gotNS corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns.Name}, &gotNS); err != nil {
		t.Fatalf("reading namespace back: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, &gotNS) })
}

// The apiserver must report the version it was built as: Helm charts with a
// kubeVersion constraint reject v0.0.0-master.
func TestAPIServerReportsStampedVersion(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != testenv.KubeVersion {
		t.Fatalf("server version %q, want %q", v.GitVersion, testenv.KubeVersion)
	}
}
