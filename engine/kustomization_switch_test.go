package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa/normalize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/engine"
)

// switchManifests are objects whose applied form Flux normalises (a
// Service port and a container port without a protocol, a Secret with
// stringData) beside a ConfigMap.
const switchManifests = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: NS}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.org/web:1.0.0, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Secret
metadata: {name: web, namespace: NS}
stringData: {token: abc}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: NS}
data: {key: value}
`

// TestKustomizationTakesOverFluxsObjectsWithoutWriting: objects that
// kustomize-controller applied (as it applies them: normalised by Flux's
// ssa/normalize, owner labels, field manager kustomize-controller) are
// taken over by a Kustomization of the same manifests with no write: their
// resourceVersions stay.
func TestKustomizationTakesOverFluxsObjectsWithoutWriting(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	text := strings.ReplaceAll(switchManifests, "NS", ns)
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	if err := normalize.UnstructuredList(objs); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, u := range objs {
		u.SetLabels(map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": ns})
		if err := cp.Client.Patch(ctx, u, client.Apply, client.FieldOwner("kustomize-controller"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		versions[u.GetKind()] = u.GetResourceVersion()
	}
	gitSource(t, ns, "apps", map[string]string{"apps.yaml": text})
	startEngine(t, engine.Options{})
	ks := kustomization(ns, "apps", "apps", "./")
	create(t, ks)
	waitFor(t, ks, readyIs(ks, true), "Ready")
	for _, u := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
			t.Fatal(err)
		}
		if live.GetResourceVersion() != versions[u.GetKind()] {
			t.Errorf("%s %s rewritten (resourceVersion %s → %s); managed fields: %v", u.GetKind(), u.GetName(),
				versions[u.GetKind()], live.GetResourceVersion(), live.GetManagedFields())
		}
	}
}
