package engine_test

import (
	"context"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// In restricted mode a tenant cannot reach another namespace's source,
// and its objects are applied as the namespace's default ServiceAccount,
// so the API server enforces the tenant's RBAC.
func TestRestrictedMode(t *testing.T) {
	ctx := context.Background()
	platform := cp.Namespace(t)
	tenant := cp.Namespace(t)
	gitSource(t, platform, "shared", map[string]string{"cm.yaml": configMap("x", tenant)})
	gitSource(t, tenant, "own", map[string]string{
		"ok/cm.yaml":         configMap("allowed", tenant),
		"secret/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: denied, namespace: " + tenant + "}\n",
	})
	// The tenant's default account may manage ConfigMaps, nothing else.
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: tenant}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: tenant}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: tenant},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmaps"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: tenant}}},
	} {
		if err := cp.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, engine.Options{Restricted: true})

	cross := kustomization(tenant, "cross", "shared", "./")
	cross.Spec.SourceRef.Namespace = platform
	allowed := kustomization(tenant, "allowed", "own", "./ok")
	denied := kustomization(tenant, "denied", "own", "./secret")
	for _, k := range []*kustomizev1.Kustomization{cross, allowed, denied} {
		if err := cp.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, allowed, readyIs(allowed, true), "Ready=True as the tenant's account")
	waitFor(t, cross, func() bool {
		return readyIs(cross, false)() && strings.Contains(conditions.GetMessage(cross, meta.ReadyCondition), "cross-namespace")
	}, "Ready=False for the cross-namespace source")
	if msg := conditions.GetMessage(cross, meta.ReadyCondition); !strings.Contains(msg, "cross-namespace references are disabled") {
		t.Fatalf("cross-namespace source: message %q", msg)
	}
	waitFor(t, denied, func() bool {
		return readyIs(denied, false)() && strings.Contains(conditions.GetMessage(denied, meta.ReadyCondition), "forbidden")
	}, "Ready=False with the API server's Forbidden")
	if msg := conditions.GetMessage(denied, meta.ReadyCondition); !strings.Contains(msg, "forbidden") ||
		!strings.Contains(msg, "system:serviceaccount:"+tenant+":default") {
		t.Fatalf("applying outside the tenant's RBAC: message %q should be the API server's Forbidden for the account", msg)
	}
}
