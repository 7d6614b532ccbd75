package apply

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestImpersonatedApplyOutsideRBACIsForbidden(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}},
	}
	for _, o := range []client.Object{sa, role, binding} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	a := newApplier(t, Options{Impersonate: ServiceAccount{Namespace: ns, Name: "tenant"}})

	allowed := objects(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: NS}\n")
	// The API server's authorizer learns of the new RoleBinding through
	// its own watch, a moment after the create returns.
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err = a.Apply(ctx, allowed, ApplyOptions{}); err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("apply within RBAC: %v", err)
	}

	denied := objects(t, ns, "apiVersion: v1\nkind: Secret\nmetadata: {name: nope, namespace: NS}\nstringData: {k: v}\n")
	_, err = a.Apply(ctx, denied, ApplyOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("error = %v, want Forbidden", err)
	}
	for _, want := range []string{"Secret/" + ns + "/nope", "forbidden by RBAC for impersonated system:serviceaccount:" + ns + ":tenant"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	otherNS := objects(t, "default", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: escape, namespace: NS}\n")
	if _, err := a.Apply(ctx, otherNS, ApplyOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("apply into another namespace: %v, want Forbidden", err)
	}
}
