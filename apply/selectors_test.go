package apply

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const ssaSet = `
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: NS
  annotations: {kustomize.toolkit.fluxcd.io/ssa: IfNotPresent}
stringData: {password: initial}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ignored
  namespace: NS
  annotations: {kustomize.toolkit.fluxcd.io/ssa: ignore}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
  namespace: NS
  labels: {kustomize.toolkit.fluxcd.io/ssa: Merge}
data: {k: v}
`

// TestSSAAnnotations checks Flux's kustomize.toolkit.fluxcd.io/ssa values
// on a real API server, with and without the Cache: an IfNotPresent
// Secret a tenant edited is not overwritten (and costs no write), an
// Ignore object is never created, and a live object annotated Ignore is
// left alone.
func TestSSAAnnotations(t *testing.T) {
	for _, withCache := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "cache"}[withCache], func(t *testing.T) {
			ctx, ns := testContext(t), cp.Namespace(t)
			opts := Options{}
			var c *Cache
			if withCache {
				var err error
				if c, err = NewCache(cp.Config); err != nil {
					t.Fatal(err)
				}
				cctx, stop := context.WithCancel(ctx)
				defer stop()
				go func() { _ = c.Start(cctx) }()
				opts.Cache = c
			}
			a := newApplier(t, opts)
			objs := objects(t, ns, ssaSet)
			cs, err := a.Apply(ctx, objs, ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, map[string]Action{
				"Secret/" + ns + "/creds":      Created,
				"ConfigMap/" + ns + "/ignored": Skipped,
				"ConfigMap/" + ns + "/plain":   Created,
			})
			if exists := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ignored"}, &corev1.ConfigMap{}); exists == nil {
				t.Fatal("an object annotated ssa: Ignore was created")
			}
			first := cs.Inventory()

			// The tenant edits the Secret; the live Secret keeps the annotation.
			sec := &corev1.Secret{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, sec); err != nil {
				t.Fatal(err)
			}
			sec.Data["password"] = []byte("tenant")
			if err := cp.Client.Update(ctx, sec); err != nil {
				t.Fatal(err)
			}
			// The owner of "plain" hands it over: live annotation Ignore.
			plain := &corev1.ConfigMap{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, plain); err != nil {
				t.Fatal(err)
			}
			plain.Annotations = map[string]string{SSAAnnotation: SSAIgnore}
			plain.Data["k"] = "edited"
			if err := cp.Client.Update(ctx, plain); err != nil {
				t.Fatal(err)
			}
			if withCache {
				waitForCache(t, ctx, c, schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, ns, "creds")
				waitForCache(t, ctx, c, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, ns, "plain")
			}

			cs, err = a.Apply(ctx, objs, ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantActions(t, cs, map[string]Action{
				"Secret/" + ns + "/creds":      Skipped,
				"ConfigMap/" + ns + "/ignored": Skipped,
				"ConfigMap/" + ns + "/plain":   Skipped,
			})
			after := &corev1.Secret{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, after); err != nil {
				t.Fatal(err)
			}
			if string(after.Data["password"]) != "tenant" || after.ResourceVersion != sec.ResourceVersion {
				t.Fatalf("the IfNotPresent Secret was written: password %q, resourceVersion %s -> %s",
					after.Data["password"], sec.ResourceVersion, after.ResourceVersion)
			}
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, plain); err != nil {
				t.Fatal(err)
			}
			if plain.Data["k"] != "edited" {
				t.Fatalf("a live object annotated Ignore was written: %v", plain.Data)
			}
			// Skipped objects leave the inventory, but are not stale: never pruned.
			if len(cs.Inventory().Entries) != 0 || len(cs.Stale(first)) != 0 {
				t.Fatalf("inventory %v, stale %v", cs.Inventory().Entries, cs.Stale(first))
			}
		})
	}
}

const immutableCM = `
apiVersion: v1
kind: ConfigMap
metadata: {name: frozen, namespace: NS}
immutable: true
data: {k: VALUE}
`

// TestForceAnnotationOnLiveObject checks kustomize.toolkit.fluxcd.io/force:
// Enabled set on the live object (not the manifest) re-creates the object
// on an immutable change, as Flux's ForceSelector.
func TestForceAnnotationOnLiveObject(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	if _, err := a.Apply(ctx, objects(t, ns, strings.ReplaceAll(immutableCM, "VALUE", "one")), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, objects(t, ns, strings.ReplaceAll(immutableCM, "VALUE", "two")), ApplyOptions{}); err == nil {
		t.Fatal("changing an immutable ConfigMap without force must fail")
	}
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "frozen"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{ForceAnnotation: "enabled"}
	if err := cp.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cs, err := a.Apply(ctx, objects(t, ns, strings.ReplaceAll(immutableCM, "VALUE", "two")), ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := cs.Changes[0]; !strings.Contains(c.Detail, "re-created") {
		t.Fatalf("change = %v", c)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "frozen"}, cm); err != nil || cm.Data["k"] != "two" {
		t.Fatalf("data = %v, %v", cm.Data, err)
	}
}

// TestApplyIgnoreKeepsLiveValues checks ApplyOptions.Ignore (Flux's
// Kustomization spec.ignore): an ignored pointer keeps its live value, the
// rest of the object is still corrected, and other objects are untouched
// by the rule.
func TestApplyIgnoreKeepsLiveValues(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	set := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: target, namespace: NS}\ndata: {k: v, j: v}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: NS}\ndata: {k: v}\n"
	objs := objects(t, ns, set)
	opts := ApplyOptions{Ignore: []jsondiff.IgnoreRule{{Paths: []string{"/data/k"}, Selector: &jsondiff.Selector{Kind: "ConfigMap", Name: "target"}}}}
	if _, err := a.Apply(ctx, objs, opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"target", "other"} {
		cm := &corev1.ConfigMap{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["k"], cm.Data["j"] = "edited", "edited"
		if err := cp.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Apply(ctx, objs, opts); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"target": {"k": "edited", "j": "v"}, "other": {"k": "v", "j": "edited"}}
	for name, data := range want {
		cm := &corev1.ConfigMap{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		for k, v := range data {
			if cm.Data[k] != v {
				t.Errorf("%s: data.%s = %q, want %q", name, k, cm.Data[k], v)
			}
		}
	}
}
