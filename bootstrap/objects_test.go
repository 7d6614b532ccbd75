package bootstrap_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/bootstrap"
	"github.com/cozystack/cozy-aio/health"
)

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestApplyBootstrapObjects(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: net, namespace: `+ns+`}
data: {cni: cilium}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: apps, namespace: `+ns+`}
data: {x: "1"}
`)
	writeFile(t, dir, "b.yml", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"extra","namespace":"`+ns+`"}}`)
	writeFile(t, dir, "notes.txt", "ignored")

	a, err := apply.New(cp.Config, apply.Options{FieldManager: bootstrap.FieldManager})
	if err != nil {
		t.Fatal(err)
	}
	run := func(previous apply.Inventory, prune bool) bootstrap.ApplyResult {
		t.Helper()
		objs, err := bootstrap.LoadObjects(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := bootstrap.ApplyObjects(ctx, a, objs, previous, prune)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	get := func(name string) *corev1.ConfigMap {
		t.Helper()
		var cm corev1.ConfigMap
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			return nil
		}
		return &cm
	}

	first := run(apply.Inventory{}, false)
	if len(first.Applied.Changes) != 3 {
		t.Fatalf("applied %v, want 3 objects", first.Applied)
	}
	rv := get("net").ResourceVersion
	if get("net").Labels[bootstrap.BootstrapLabel] != "true" {
		t.Fatal("bootstrap objects must carry the bootstrap label")
	}

	run(first.Inventory, false)
	if got := get("net").ResourceVersion; got != rv {
		t.Fatalf("re-applying unchanged objects changed resourceVersion %s → %s", rv, got)
	}

	writeFile(t, dir, "a.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: net, namespace: `+ns+`}
data: {cni: kube-ovn}
`)
	os.Remove(filepath.Join(dir, "b.yml"))
	run(first.Inventory, false)
	if get("net").Data["cni"] != "kube-ovn" {
		t.Fatal("a changed file must be re-applied")
	}
	if get("apps") == nil || get("extra") == nil {
		t.Fatal("objects whose files disappeared must stay without Prune")
	}

	res := run(first.Inventory, true)
	if get("apps") != nil || get("extra") != nil {
		t.Fatal("Prune must delete objects that left the directory")
	}
	if res.Pruned.Count(apply.Deleted) != 2 {
		t.Fatalf("pruned %v, want 2", res.Pruned)
	}
}

func TestLoadObjectsNamesTheBrokenFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "good.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n")
	writeFile(t, dir, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\nkind: [unclosed\n")
	_, err := bootstrap.LoadObjects(dir)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 2") {
		t.Fatalf("want an error naming bad.yaml document 2, got %v", err)
	}
	writeFile(t, dir, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\n")
	_, err = bootstrap.LoadObjects(dir)
	if err == nil || !strings.Contains(err.Error(), "metadata.name are required") {
		t.Fatalf("want an error for a nameless object, got %v", err)
	}
}

// The inventory file is kept in the layout of a Kustomization's
// status.inventory; the list an older cozy-aio wrote is still read.
func TestReadInventoryMigratesTheOldFile(t *testing.T) {
	deploy := health.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	ns := health.ObjectRef{Version: "v1", Kind: "Namespace", Name: "ns"}
	want := apply.NewInventory(deploy, ns)
	tests := []struct{ name, content string }{
		{"current layout", `{"entries":[{"id":"ns_web_apps_Deployment","v":"v1"},{"id":"_ns__Namespace","v":"v1"}]}`},
		{"older list", `[{"APIVersion":"apps/v1","Kind":"Deployment","Namespace":"ns","Name":"web"},{"APIVersion":"v1","Kind":"Namespace","Namespace":"","Name":"ns"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "inventory.json", tt.content)
			if got := bootstrap.ReadInventory(filepath.Join(dir, "inventory.json")); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	if got := bootstrap.ReadInventory(filepath.Join(t.TempDir(), "missing.json")); len(got.Entries) != 0 {
		t.Fatalf("a missing file must be an empty inventory, got %v", got)
	}
}
