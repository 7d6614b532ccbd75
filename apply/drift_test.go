package apply

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/health"
)

const driftSet = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS, labels: {app: demo}}
data: {mode: safe, level: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.27"}]
`

// editConfigMap changes the ConfigMap as a person with kubectl edit would.
func editConfigMap(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["mode"] = "unsafe"
	cm.Labels["app"] = "hacked"
	if err := cp.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}

func TestDriftDetectedAndCorrected(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	objs := objects(t, ns, driftSet)
	if _, err := a.Apply(ctx, objs, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Diff(ctx, objs, DiffOptions{})
	if err != nil || len(res.Drifted) != 0 {
		t.Fatalf("drift right after apply: %+v %v", res, err)
	}

	editConfigMap(t, ctx, ns)
	res, err = a.Diff(ctx, objs, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Drift{{
		Object: health.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"},
		Fields: []string{"data.mode", "metadata.labels.app"},
	}}
	if !reflect.DeepEqual(res.Drifted, want) {
		t.Fatalf("drift = %+v, want %+v", res.Drifted, want)
	}

	cs, err := a.Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{
		"ConfigMap/" + ns + "/settings": Configured,
		"Deployment/" + ns + "/web":     Unchanged,
	})
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["mode"] != "safe" || cm.Labels["app"] != "demo" {
		t.Fatalf("drift not corrected: %v %v", cm.Data, cm.Labels)
	}
	if res, _ := a.Diff(ctx, objs, DiffOptions{}); len(res.Drifted) != 0 {
		t.Fatalf("drift after correction: %+v", res)
	}
}

func TestDiffReportsMissingObjects(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	a := newApplier(t, Options{})
	res, err := a.Diff(ctx, objects(t, ns, driftSet), DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Drifted) != 2 || !res.Drifted[0].Missing || !res.Drifted[1].Missing {
		t.Fatalf("drift = %+v", res)
	}
}

// TestCacheSkipsWritesButNotDrift checks that the Cache makes a no-op
// re-apply write nothing, and still lets a manual edit be corrected.
func TestCacheSkipsWritesButNotDrift(t *testing.T) {
	ctx, ns := testContext(t), cp.Namespace(t)
	c, err := NewCache(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = c.Start(cctx) }()
	a := newApplier(t, Options{Cache: c})
	objs := objects(t, ns, driftSet)
	if _, err := a.Apply(ctx, objs, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	waitForCache(t, ctx, c, cmGVR, ns, "settings")
	waitForCache(t, ctx, c, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ns, "web")

	cs, err := a.Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Count(Unchanged) != 2 {
		t.Fatalf("re-apply:\n%s", cs)
	}

	editConfigMap(t, ctx, ns)
	waitForCache(t, ctx, c, cmGVR, ns, "settings")
	cs, err = a.Apply(ctx, objs, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantActions(t, cs, map[string]Action{
		"ConfigMap/" + ns + "/settings": Configured,
		"Deployment/" + ns + "/web":     Unchanged,
	})
}

// waitForCache waits until the cache's watch has caught up with the live
// resourceVersion of one object.
func waitForCache(t *testing.T, ctx context.Context, c *Cache, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: map[string]string{"configmaps": "ConfigMap", "deployments": "Deployment", "secrets": "Secret"}[gvr.Resource]})
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, live); err != nil {
			return false, err
		}
		inf := c.informer(gvr)
		if inf == nil {
			return false, nil
		}
		item, ok, _ := inf.GetStore().GetByKey(ns + "/" + name)
		return ok && item.(*metav1.PartialObjectMetadata).ResourceVersion == live.ResourceVersion, nil
	})
	if err != nil {
		t.Fatalf("cache did not catch up with %s/%s: %v", ns, name, err)
	}
}
