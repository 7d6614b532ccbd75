package engine_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// A ConfigMap or Secret labelled reconcile.fluxcd.io/watch: Enabled that a
// HelmRelease names in valuesFrom, or a Kustomization in
// postBuild.substituteFrom, reconciles them when it changes, as Flux 2.5+
// does; an unlabelled one waits for the next interval (an hour here).
func TestWatchedConfigsReconcileTheirUsers(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	watched := map[string]string{"reconcile.fluxcd.io/watch": "Enabled"}
	values := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Data: map[string]string{"values.yaml": "color: green\n"}}
	}
	vars := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vars", Namespace: ns, Labels: watched},
		StringData: map[string]string{"color": "green"}}
	_, gr := gitSource(t, ns, "app", map[string]string{
		"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: substituted\n  namespace: " + ns + "\ndata:\n  color: ${color}\n",
	})
	ks := kustomization(ns, "app", gr.Name, "./deploy")
	ks.Spec.PostBuild = &kustomizev1.PostBuild{SubstituteFrom: []kustomizev1.SubstituteReference{{Kind: "Secret", Name: "vars"}}}
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hrWatched := helmRelease(ns, "watched", "demo")
	hrWatched.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "watched-values"}}
	hrPlain := helmRelease(ns, "plain", "demo")
	hrPlain.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "plain-values"}}
	for _, o := range []client.Object{values("watched-values", watched), values("plain-values", nil), vars, src, hrWatched, hrPlain, ks} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hrWatched, readyIs(hrWatched, true), "Ready=True")
	waitFor(t, hrPlain, readyIs(hrPlain, true), "Ready=True")
	waitFor(t, ks, readyIs(ks, true), "Ready=True")

	for _, name := range []string{"watched-values", "plain-values"} {
		cm := &corev1.ConfigMap{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["values.yaml"] = "color: red\n"
		if err := cp.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(vars), vars); err != nil {
		t.Fatal(err)
	}
	vars.Data["color"] = []byte("red")
	if err := cp.Client.Update(ctx, vars); err != nil {
		t.Fatal(err)
	}

	waitFor(t, hrWatched, func() bool {
		return conditions.IsReady(hrWatched) && len(hrWatched.Status.History) > 0 && hrWatched.Status.History[0].Version == 2
	}, "upgrade to revision 2 after its labelled values ConfigMap changed")
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched-settings", Namespace: ns}}
	if !exists(t, settings) || settings.Data["color"] != "red" {
		t.Fatalf("watched-settings = %v, want color red", settings.Data)
	}
	substituted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "substituted", Namespace: ns}}
	deadline := time.Now().Add(60 * time.Second)
	for !exists(t, substituted) || substituted.Data["color"] != "red" {
		if time.Now().After(deadline) {
			t.Fatalf("the Kustomization did not apply the labelled Secret's new value: %v", substituted.Data)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The unlabelled ConfigMap's change reconciled nothing: its release is
	// at revision 1 with the old value a while after the others moved.
	time.Sleep(3 * time.Second)
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hrPlain), hrPlain); err != nil {
		t.Fatal(err)
	}
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain-settings", Namespace: ns}}
	if len(hrPlain.Status.History) != 1 || !exists(t, plain) || plain.Data["color"] != "green" {
		t.Fatalf("the release of the unlabelled ConfigMap moved: history %d, color %q", len(hrPlain.Status.History), plain.Data["color"])
	}
}
