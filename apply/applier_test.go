package apply

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/health"
)

const crdAndCR = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.NS.example.com
spec:
  group: NS.example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
---
apiVersion: NS.example.com/v1
kind: Widget
metadata: {name: w1, namespace: NS}
spec: {size: 3}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: NS}
data: {k: v}
`

func TestApplyCRDAndCustomResourceInOneCall(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	objs := objects(t, ns, crdAndCR)
	cs, err := a.Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{
		"CustomResourceDefinition/widgets." + ns + ".example.com": Created,
		"Widget/" + ns + "/w1":    Created,
		"ConfigMap/" + ns + "/cm": Created,
	})
	if cs.Changes[0].Object.Kind != "CustomResourceDefinition" {
		t.Errorf("the CRD was not applied first:\n%s", cs)
	}
	cs, err = a.Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Count(Unchanged) != 3 {
		t.Errorf("re-apply changed objects:\n%s", cs)
	}
}

func TestApplyUnknownKindNamesTheMissingCRD(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	objs := objects(t, ns, "apiVersion: nope.example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: NS}\n")
	_, err := a.Apply(ctx, objs, ApplyOptions{})
	var uk *UnknownKindError
	if !errors.As(err, &uk) || !strings.Contains(err.Error(), "Gadget/"+ns+"/g: kind Gadget (nope.example.com/v1) is not served") ||
		!strings.Contains(err.Error(), "CustomResourceDefinition is missing") {
		t.Fatalf("error = %v", err)
	}
}

func TestApplyInvalidObjectNamesIt(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	objs := objects(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: good, namespace: NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad, namespace: NS}
spec: {replicas: "three"}
`)
	cs, err := a.Apply(ctx, objs, ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "Deployment/"+ns+"/bad: apply failed") {
		t.Fatalf("error = %v", err)
	}
	wantActions(t, cs, map[string]Action{"ConfigMap/" + ns + "/good": Created})
}

const pruneSet = `
apiVersion: v1
kind: ConfigMap
metadata: {name: keep, namespace: NS}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: drop, namespace: NS}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: protected
  namespace: NS
  annotations: {kustomize.toolkit.fluxcd.io/prune: disabled}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: NS}
spec: {ports: [{port: 80}]}
`

func TestPrune(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	owner := Owner{Name: "app", Namespace: ns}
	first, err := a.Apply(ctx, objects(t, ns, pruneSet), ApplyOptions{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	// Another inventory owns "theirs".
	other := Owner{Name: "other", Namespace: ns}
	theirs := objects(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, namespace: NS}\n")
	if _, err := a.Apply(ctx, theirs, ApplyOptions{Owner: other}); err != nil {
		t.Fatal(err)
	}

	second, err := a.Apply(ctx, objects(t, ns, pruneSet)[:1], ApplyOptions{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	stale := first.Inventory().Stale(second.Inventory())
	// A bogus previous inventory that claims the other owner's object.
	stale = append(stale, health.RefOf(theirs[0]))
	cs, err := a.Prune(ctx, stale, PruneOptions{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{
		"ConfigMap/" + ns + "/drop":      Deleted,
		"Service/" + ns + "/svc":         Deleted,
		"ConfigMap/" + ns + "/protected": Skipped,
		"ConfigMap/" + ns + "/theirs":    Skipped,
	})
	for name, want := range map[string]bool{"keep": true, "drop": false, "protected": true, "theirs": true} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
		exists := err == nil
		if !exists && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if exists != want && u.GetDeletionTimestamp() == nil {
			t.Errorf("ConfigMap %s exists=%v, want %v", name, exists, want)
		}
	}
	// Pruning again is idempotent.
	cs, err = a.Prune(ctx, stale[:1], PruneOptions{Owner: owner})
	if err != nil || cs.Changes[0].Action != Deleted {
		t.Fatalf("second prune: %v %v", cs, err)
	}
}
