package apply

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestApplyUnderFluxsFieldManagerWritesNothing: an object Flux's
// kustomize-controller applied is left untouched by an Applier with the
// same field manager and the same manifest (a switch from Flux rewrites
// nothing), and an Applier with another manager would have written it.
func TestApplyUnderFluxsFieldManagerWritesNothing(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	objs := objects(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: NS}\ndata: {a: \"1\"}\n")
	if _, err := newApplier(t, Options{FieldManager: "kustomize-controller"}).Apply(ctx, objs, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	rv := resourceVersion(t, ns, "cm")
	cs, err := newApplier(t, Options{FieldManager: "kustomize-controller", HandOver: []string{DefaultFieldManager}}).Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{"ConfigMap/" + ns + "/cm": Unchanged})
	if got := resourceVersion(t, ns, "cm"); got != rv {
		t.Fatalf("resourceVersion moved from %s to %s", rv, got)
	}
	cs, err = newApplier(t, Options{FieldManager: "someone-else"}).Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{"ConfigMap/" + ns + "/cm": Configured})
}

// TestApplyHandsOverAnEarlierFieldManager: an object an earlier field
// manager applied is handed over with one write that Change.Detail names;
// a field then removed from the manifest is removed from the object (it
// would stay, owned by the earlier manager, without the hand-over), and
// the next apply writes nothing.
func TestApplyHandsOverAnEarlierFieldManager(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	before := objects(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: NS}\ndata: {a: \"1\", b: \"2\"}\n")
	after := objects(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: NS}\ndata: {a: \"1\"}\n")
	if _, err := newApplier(t, Options{}).Apply(ctx, before, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, Options{FieldManager: "kustomize-controller", HandOver: []string{DefaultFieldManager}})
	cs, err := a.Apply(ctx, after, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{"ConfigMap/" + ns + "/cm": Configured})
	if d := cs.Changes[0].Detail; d != "fields of cozy-aio handed over to kustomize-controller" {
		t.Errorf("detail %q", d)
	}
	var cm corev1.ConfigMap
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, &cm); err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["b"]; ok {
		t.Errorf("data.b stayed after the hand-over: %v", cm.Data)
	}
	for _, e := range cm.ManagedFields {
		if e.Manager == DefaultFieldManager {
			t.Errorf("cozy-aio still manages fields: %+v", e)
		}
	}
	rv := cm.ResourceVersion
	cs, err = a.Apply(ctx, after, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{"ConfigMap/" + ns + "/cm": Unchanged})
	if got := resourceVersion(t, ns, "cm"); got != rv {
		t.Fatalf("resourceVersion moved from %s to %s", rv, got)
	}
}

func resourceVersion(t *testing.T, ns, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := cp.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}
