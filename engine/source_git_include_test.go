package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestGitRepositoryInclude checks spec.include with source-controller's
// semantics, against real Git servers: a missing include fails the
// GitRepository naming it (IncludeUnavailable); once it has an artifact,
// its fromPath lands at toPath in the including artifact (a Kustomization
// applies from there), status.includedArtifacts records it, and a new
// commit of the included repository rebuilds the including artifact at
// the same revision.
func TestGitRepositoryInclude(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	_, app := gitSource(t, ns, "app", map[string]string{"README.md": "app\n"})
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Include = []sourcev1.GitRepositoryInclude{{
		GitRepositoryRef: meta.LocalObjectReference{Name: "shared"}, FromPath: "base", ToPath: "vendor/shared",
	}}
	if err := cp.Client.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	waitFor(t, app, func() bool {
		return readyIs(app, false)() && conditions.IsTrue(app, sourcev1.IncludeUnavailableCondition)
	}, "Ready=False with IncludeUnavailable")
	if msg := conditions.GetMessage(app, meta.ReadyCondition); !strings.Contains(msg, "'shared'") || !strings.Contains(msg, "GitRepository/"+ns+"/app") {
		t.Fatalf("message %q does not name the object and the include", msg)
	}

	sharedRepo, shared := gitSource(t, ns, "shared", map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\n",
		"base/cm.yaml":            configMap("from-shared", ns),
		"elsewhere.txt":           "not included\n",
	})
	waitFor(t, shared, readyIs(shared, true), "Ready=True")
	waitFor(t, app, func() bool {
		return readyIs(app, true)() && len(app.Status.IncludedArtifacts) == 1
	}, "Ready=True with the include")
	if got, want := app.Status.IncludedArtifacts[0], shared.Status.Artifact; got.Revision != want.Revision || got.Digest != want.Digest {
		t.Fatalf("includedArtifacts %+v, want %+v", got, want)
	}
	if conditions.Has(app, sourcev1.IncludeUnavailableCondition) {
		t.Fatal("IncludeUnavailable stays after the include became available")
	}
	first, firstIncluded := *app.Status.Artifact, app.Status.IncludedArtifacts[0].Revision
	ks := kustomization(ns, "vendored", "app", "./vendor/shared")
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-shared", Namespace: ns}}) {
		t.Fatal("the included ConfigMap was not applied from vendor/shared")
	}

	if _, err := sharedRepo.Commit("main", map[string]string{"base/cm.yaml": configMap("from-shared-2", ns)}, "two"); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, shared)
	waitFor(t, app, func() bool {
		return len(app.Status.IncludedArtifacts) == 1 && app.Status.IncludedArtifacts[0].Revision != firstIncluded &&
			app.Status.Artifact.Digest != first.Digest
	}, "a rebuilt artifact with the new include")
	waitFor(t, shared, readyIs(shared, true), "Ready=True")
	if app.Status.Artifact.Revision != first.Revision || app.Status.IncludedArtifacts[0].Revision != shared.Status.Artifact.Revision {
		t.Fatalf("artifact %s (was %s), included %s, shared %s", app.Status.Artifact.Revision, first.Revision,
			app.Status.IncludedArtifacts[0].Revision, shared.Status.Artifact.Revision)
	}
}
