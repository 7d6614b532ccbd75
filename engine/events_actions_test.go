package engine_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine"
)

// TestEventsNameFluxStages: the events an Alert forwards carry the stage
// of the reconcile as Flux 2.10's controllers name it (the Action
// constants of helm-controller/api and kustomize-controller/api): a
// release installed is HelmInstall, one waiting for its dependency
// CheckDependencies, one whose values are missing ResolveValues, a
// Kustomization applied Reconcile.
func TestEventsNameFluxStages(t *testing.T) {
	ns := cp.Namespace(t)
	hook := newHookServer(t, "", http.StatusOK)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	alertTo(t, ns, hook, "HelmRelease", "Kustomization")
	installed := helmRelease(ns, "app", "demo")
	waits := helmRelease(ns, "waits", "demo")
	waits.Spec.DependsOn = []helmv2.DependencyReference{{Name: "absent"}}
	noValues := helmRelease(ns, "no-values", "demo")
	noValues.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "nowhere"}}
	createObjects(t, chartSource(ns, "demo", reg.Host(), "1.0.0"), installed, waits, noValues)
	gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns)})
	createObjects(t, kustomization(ns, "apps", "apps", "./deploy"))

	for _, c := range []struct {
		kind, name, action string
	}{
		{helmv2.HelmReleaseKind, "app", string(helmv2.ActionHelmInstall)},
		{helmv2.HelmReleaseKind, "waits", string(helmv2.ActionCheckDependencies)},
		{helmv2.HelmReleaseKind, "no-values", string(helmv2.ActionResolveValues)},
		{kustomizev1.KustomizationKind, "apps", string(kustomizev1.ActionReconcile)},
	} {
		eventually(t, 90*time.Second, c.kind+"/"+c.name+": an event with action "+c.action, func() bool {
			return hook.find(func(e eventv1.Event) bool {
				return e.InvolvedObject.Kind == c.kind && e.InvolvedObject.Name == c.name && e.Action == c.action
			}) != nil
		})
	}
	if e := hook.find(func(e eventv1.Event) bool { return e.Action == "" }); e != nil {
		t.Errorf("an event without an action: %+v", e)
	}
}

// TestKustomizationEventsListTheChangeSet: as kustomize-controller, a
// Kustomization reports what an apply changed (action Apply) and what a
// prune deleted (action Prune), one "Kind/namespace/name action" line per
// object, reason Progressing; an apply that changes nothing reports
// nothing.
func TestKustomizationEventsListTheChangeSet(t *testing.T) {
	ns := cp.Namespace(t)
	hook := newHookServer(t, "", http.StatusOK)
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	alertTo(t, ns, hook, "Kustomization")
	repo, gr := gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns), "deploy/b.yaml": configMap("b", ns)})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	createObjects(t, ks)
	event := func(action, msg string) {
		t.Helper()
		eventually(t, 90*time.Second, "an event "+action+" "+msg, func() bool {
			return hook.find(func(e eventv1.Event) bool {
				return e.InvolvedObject.Name == "apps" && e.Action == action && e.Message == msg &&
					e.Reason == meta.ProgressingReason && e.Severity == eventv1.EventSeverityInfo
			}) != nil
		})
	}
	event(string(kustomizev1.ActionApply), "ConfigMap/"+ns+"/a created\nConfigMap/"+ns+"/b created")

	changed := strings.Replace(configMap("b", ns), "value", "changed", 1)
	if _, err := repo.Commit("main", map[string]string{"deploy/b.yaml": changed}, "b changed, a gone"); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, gr)
	event(string(kustomizev1.ActionApply), "ConfigMap/"+ns+"/b configured")
	event(string(kustomizev1.ActionPrune), "ConfigMap/"+ns+"/a deleted")

	// Applied again unchanged: no change set to report.
	before := len(hook.all())
	requestReconcile(t, ks)
	waitFor(t, ks, func() bool { return ks.Status.LastHandledReconcileAt != "" && readyIs(ks, true)() }, "the request handled")
	time.Sleep(2 * time.Second) // events are delivered asynchronously
	for _, e := range hook.all()[before:] {
		if e.Action == string(kustomizev1.ActionApply) || e.Action == string(kustomizev1.ActionPrune) {
			t.Fatalf("an apply that changed nothing reported %s %q", e.Action, e.Message)
		}
	}
}

// all returns the events received so far.
func (h *hookServer) all() []eventv1.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]eventv1.Event(nil), h.events...)
}

// alertTo creates a generic Provider posting to hook and an Alert that
// sends it every event, info included, of the objects of kinds in ns.
func alertTo(t *testing.T, ns string, hook *hookServer, kinds ...string) {
	t.Helper()
	var sources []notifyv1.CrossNamespaceObjectReference
	for _, k := range kinds {
		sources = append(sources, notifyv1.CrossNamespaceObjectReference{Kind: k, Name: "*"})
	}
	createObjects(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns}, StringData: map[string]string{"address": hook.URL}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "generic", SecretRef: &meta.LocalObjectReference{Name: "hook"}}},
		&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "hook"}, EventSeverity: "info", EventSources: sources}},
	)
}
