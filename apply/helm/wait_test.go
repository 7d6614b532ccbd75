package helm

import (
	"testing"

	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

func TestNeedsWaitSkipsObjectsCurrentOnceApplied(t *testing.T) {
	obj := func(apiVersion, kind, svcType string) *resource.Info {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "x"}}}
		if svcType != "" {
			u.Object["spec"] = map[string]any{"type": svcType}
		}
		return &resource.Info{Object: u, Name: "x"}
	}
	rl := kube.ResourceList{
		obj("v1", "ConfigMap", ""), obj("v1", "Secret", ""), obj("rbac.authorization.k8s.io/v1", "RoleBinding", ""),
		obj("v1", "Service", "ClusterIP"), obj("v1", "Service", "LoadBalancer"),
		obj("apps/v1", "Deployment", ""), obj("example.com/v1", "Widget", ""),
	}
	got := needsWait(rl)
	var kinds []string
	for _, i := range got {
		kinds = append(kinds, i.Object.GetObjectKind().GroupVersionKind().Kind)
	}
	if len(got) != 3 || kinds[0] != "Service" || kinds[1] != "Deployment" || kinds[2] != "Widget" {
		t.Fatalf("waits for %v, want the LoadBalancer Service, the Deployment and the custom resource", kinds)
	}

	// Typed objects as Helm's builder decodes them: no TypeMeta, the kind
	// in the REST mapping.
	typed := func(obj runtime.Object, gvk schema.GroupVersionKind) *resource.Info {
		return &resource.Info{Object: obj, Name: "x", Namespace: "ns", Mapping: &meta.RESTMapping{GroupVersionKind: gvk}}
	}
	dep := typed(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	got = needsWait(kube.ResourceList{
		typed(&corev1.ConfigMap{}, corev1.SchemeGroupVersion.WithKind("ConfigMap")),
		typed(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}, corev1.SchemeGroupVersion.WithKind("Service")),
		dep,
	})
	if len(got) != 1 || got[0] != dep {
		t.Fatalf("typed objects: waits for %d objects, want the Deployment only", len(got))
	}
	u, err := asUnstructured(dep)
	if err != nil || u.GetKind() != "Deployment" || u.GetAPIVersion() != "apps/v1" || u.GetNamespace() != "ns" || u.GetName() != "x" {
		t.Fatalf("asUnstructured = %v (%s %s %s/%s)", err, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
	}
}
