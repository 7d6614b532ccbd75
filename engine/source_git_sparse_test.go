package engine_test

import (
	"context"
	"slices"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestGitRepositorySparseCheckout builds the artifact of the listed
// directories only, records them in status.observedSparseCheckout, and
// rebuilds the artifact at the same revision when the list changes.
func TestGitRepositorySparseCheckout(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	_, gr := gitSource(t, ns, "mono", map[string]string{
		"apps/kustomization.yaml": "resources: [cm.yaml]\n",
		"apps/cm.yaml":            configMap("in-apps", ns),
		"infra/cm.yaml":           configMap("in-infra", ns),
	})
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(gr), gr); err != nil {
		t.Fatal(err)
	}
	gr.Spec.SparseCheckout = []string{"apps"}
	if err := cp.Client.Update(ctx, gr); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	waitFor(t, gr, func() bool {
		return readyIs(gr, true)() && slices.Equal(gr.Status.ObservedSparseCheckout, []string{"apps"})
	}, "Ready=True with observedSparseCheckout [apps]")
	sparse := *gr.Status.Artifact

	// The whole tree is not in the artifact: a Kustomization of ./infra
	// finds no such path.
	apps := kustomization(ns, "apps", "mono", "./apps")
	infra := kustomization(ns, "infra", "mono", "./infra")
	for _, o := range []*kustomizev1.Kustomization{apps, infra} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, apps, readyIs(apps, true), "Ready=True")
	waitFor(t, infra, readyIs(infra, false), "Ready=False: ./infra is not in the sparse artifact")
	if exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-infra", Namespace: ns}}) {
		t.Fatal("an object outside the sparse directories was applied")
	}

	// Widening the checkout rebuilds the artifact at the same revision.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(gr), gr); err != nil {
		t.Fatal(err)
	}
	gr.Spec.SparseCheckout = []string{"apps", "infra"}
	if err := cp.Client.Update(ctx, gr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gr, func() bool {
		return len(gr.Status.ObservedSparseCheckout) == 2 && gr.Status.Artifact.Digest != sparse.Digest
	}, "a new artifact with both directories")
	if gr.Status.Artifact.Revision != sparse.Revision {
		t.Fatalf("revision moved from %s to %s", sparse.Revision, gr.Status.Artifact.Revision)
	}
	requestReconcile(t, infra)
	waitFor(t, infra, readyIs(infra, true), "Ready=True once ./infra is in the artifact")
}

// TestOCIRepositoryRebuildsWhenTheLayerSelectorChanges pulls the same
// digest again when only spec.layerSelector changed: the artifact follows
// the spec, not the last revision.
func TestOCIRepositoryRebuildsWhenTheLayerSelectorChanges(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	if err := cp.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, src, readyIs(src, true), "Ready=True")
	copied := *src.Status.Artifact
	src.Spec.LayerSelector.Operation = "extract"
	if err := cp.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, src, func() bool {
		return src.Status.ObservedLayerSelector != nil && src.Status.ObservedLayerSelector.Operation == "extract" &&
			src.Status.Artifact.Digest != copied.Digest
	}, "a new artifact with the layer extracted")
	if src.Status.Artifact.Revision != copied.Revision {
		t.Fatalf("revision moved from %s to %s", copied.Revision, src.Status.Artifact.Revision)
	}
}
