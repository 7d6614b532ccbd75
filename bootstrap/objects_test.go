package bootstrap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/bootstrap"
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

	apply := func(opts bootstrap.ApplyOptions) bootstrap.ApplyResult {
		t.Helper()
		objs, err := bootstrap.LoadObjects(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := bootstrap.ApplyObjects(ctx, cp.Client, objs, opts)
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

	first := apply(bootstrap.ApplyOptions{})
	if len(first.Applied) != 3 {
		t.Fatalf("applied %v, want 3 objects", first.Applied)
	}
	rv := get("net").ResourceVersion
	if get("net").Labels[bootstrap.BootstrapLabel] != "true" {
		t.Fatal("bootstrap objects must carry the bootstrap label")
	}

	apply(bootstrap.ApplyOptions{})
	if got := get("net").ResourceVersion; got != rv {
		t.Fatalf("re-applying unchanged objects changed resourceVersion %s → %s", rv, got)
	}

	writeFile(t, dir, "a.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: net, namespace: `+ns+`}
data: {cni: kube-ovn}
`)
	os.Remove(filepath.Join(dir, "b.yml"))
	apply(bootstrap.ApplyOptions{Previous: first.Applied})
	if get("net").Data["cni"] != "kube-ovn" {
		t.Fatal("a changed file must be re-applied")
	}
	if get("apps") == nil || get("extra") == nil {
		t.Fatal("objects whose files disappeared must stay without Prune")
	}

	res := apply(bootstrap.ApplyOptions{Prune: true, Previous: first.Applied})
	if get("apps") != nil || get("extra") != nil {
		t.Fatal("Prune must delete objects that left the directory")
	}
	if len(res.Pruned) != 2 {
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
