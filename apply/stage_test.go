package apply

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/cozy-aio/health"
)

const mixedYAML = `
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: ns}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: ns}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: x
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
`

func TestStages(t *testing.T) {
	objs, err := ReadObjects(strings.NewReader(mixedYAML), "inline")
	if err != nil {
		t.Fatal(err)
	}
	var got [3][]string
	for i, s := range Stages(objs) {
		for _, o := range s {
			got[i] = append(got[i], o.GetKind())
		}
	}
	want := [3][]string{
		{"CustomResourceDefinition", "Namespace"},
		{"StorageClass", "IngressClass"},
		{"ConfigMap", "Widget"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stages = %v, want %v", got, want)
	}
	for _, o := range objs {
		if s := stageOfRef(health.RefOf(o)); s != stageOf(o) {
			t.Errorf("%s: stageOfRef = %d, stageOf = %d", health.RefOf(o), s, stageOf(o))
		}
	}
}

func TestValidateObjects(t *testing.T) {
	objs, _ := ReadObjects(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: x}\n"), "inline")
	err := validateObjects(objs)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/a: the object appears twice") || !strings.Contains(err.Error(), "object 2 (ConfigMap/x/): metadata.name is required") {
		t.Fatalf("error = %v", err)
	}
}

func TestImmutableClassification(t *testing.T) {
	sts := schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	immutable := apierrors.NewInvalid(sts, "web", field.ErrorList{
		field.Invalid(field.NewPath("spec", "serviceName"), "b", "field is immutable"),
	})
	other := apierrors.NewInvalid(sts, "web", field.ErrorList{
		field.Required(field.NewPath("spec", "selector"), ""),
	})
	webhook := &apierrors.StatusError{ErrStatus: metav1.Status{Status: "Failure", Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: `admission webhook "x" denied the request: the IAMPolicyMember's spec is immutable`}}
	if !isImmutable(immutable) || isImmutable(other) || !isImmutable(webhook) || isImmutable(errors.New("immutable")) {
		t.Fatal("misclassified")
	}
	if got := immutableFields(immutable); !reflect.DeepEqual(got, []string{"spec.serviceName"}) {
		t.Fatalf("fields = %v", got)
	}
}

func TestDiffFields(t *testing.T) {
	objs, _ := ReadObjects(strings.NewReader(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, labels: {a: "1"}, resourceVersion: "5"}
spec:
  replicas: 1
  template:
    spec:
      containers: [{name: c, image: nginx:1}]
status: {replicas: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, labels: {a: "2"}, resourceVersion: "9"}
spec:
  replicas: 3
  template:
    spec:
      containers: [{name: c, image: nginx:2}]
status: {replicas: 3}
`), "inline")
	got := DiffFields(objs[0], objs[1])
	want := []string{"metadata.labels.a", "spec.replicas", "spec.template.spec.containers[0].image"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
