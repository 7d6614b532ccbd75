package engine_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// A Kustomization waits for a HelmRelease through the cross-kind
// dependsOn annotation, and applies only once the release is Ready.
func TestCrossKindDependsOn(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	gitSource(t, ns, "apps", map[string]string{"deploy/after.yaml": configMap("after", ns)})
	startEngine(t, engine.Options{})

	ks := kustomization(ns, "after-release", "apps", "./deploy")
	ks.Annotations = map[string]string{engine.DependsOnAnnotation: "HelmRelease/db"}
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, func() bool { return conditions.GetReason(ks, meta.ReadyCondition) == meta.DependencyNotReadyReason }, "DependencyNotReady")
	if msg := conditions.GetMessage(ks, meta.ReadyCondition); !strings.Contains(msg, "HelmRelease/"+ns+"/db") {
		t.Fatalf("message %q should name the HelmRelease it waits for", msg)
	}
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns}}
	if exists(t, after) {
		t.Fatal("applied before its dependency exists")
	}

	hr := helmRelease(ns, "db", "demo")
	for _, o := range []client.Object{chartSource(ns, "demo", reg.Host(), "1.0.0"), hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True after the HelmRelease")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	release := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-settings", Namespace: ns}}
	if !exists(t, release) || !exists(t, after) {
		t.Fatal("both the release's and the Kustomization's objects should exist")
	}
	if after.CreationTimestamp.Before(&release.CreationTimestamp) {
		t.Fatalf("the Kustomization applied at %v, before the release at %v", after.CreationTimestamp, release.CreationTimestamp)
	}
	hrReady := conditions.Get(hr, meta.ReadyCondition).LastTransitionTime
	if after.CreationTimestamp.Before(&hrReady) {
		t.Fatalf("the Kustomization applied at %v, before the HelmRelease was Ready at %v", after.CreationTimestamp, hrReady)
	}
}

// suspend stops reconciling; requestedAt forces a reconcile and is
// recorded; a drifted object is corrected only when not suspended.
func TestSuspendAndRequestedAt(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "apps", map[string]string{
		"deploy/a.yaml": configMap("a", ns),
		"later/b.yaml":  configMap("b", ns),
	})
	// One worker takes the Kustomizations' requests in the order they come.
	startEngine(t, engine.Options{Concurrency: 1})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")

	setSuspend := func(v bool) {
		t.Helper()
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(ks.DeepCopy())
		ks.Spec.Suspend = v
		if err := cp.Client.Patch(ctx, ks, patch); err != nil {
			t.Fatal(err)
		}
	}
	setSuspend(true)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	if !exists(t, cm) {
		t.Fatal("missing ConfigMap")
	}
	cm.Data = map[string]string{"key": "edited"}
	if err := cp.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Every ConfigMap write in the namespace from the edit on, in order.
	w, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	requestReconcile(t, ks)
	// A Kustomization created after the request is reconciled after it, by
	// the one worker: its ConfigMap b is the later event, and the watch
	// must stay silent about a until then.
	if err := cp.Client.Create(ctx, kustomization(ns, "later", "apps", "./later")); err != nil {
		t.Fatal(err)
	}
	watchUntil(t, w, "b", func(ev watch.Event, name string) {
		if name == "a" {
			t.Fatalf("a suspended Kustomization must not reconcile, even on request: ConfigMap a %s", ev.Type)
		}
	})
	if exists(t, cm); cm.Data["key"] != "edited" {
		t.Fatal("a suspended Kustomization must not reconcile, even on request")
	}
	setSuspend(false)
	requestReconcile(t, ks)
	token := ks.Annotations[meta.ReconcileRequestAnnotation]
	waitFor(t, ks, func() bool { return ks.Status.LastHandledReconcileAt == token }, "lastHandledReconcileAt = requestedAt")
	if exists(t, cm); cm.Data["key"] != "value" {
		t.Fatalf("resuming and requesting a reconcile must correct drift, got %v", cm.Data)
	}
}

// watchUntil passes each event of w to seen until one names the object
// until, or fails the test when none comes.
func watchUntil(t *testing.T, w watch.Interface, until string, seen func(ev watch.Event, name string)) {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch: %v", ev.Object)
			}
			o, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			seen(ev, o.GetName())
			if o.GetName() == until {
				return
			}
		case <-timeout:
			t.Fatalf("no event on %s", until)
		}
	}
}

// resetAt clears a HelmRelease's failure counts, as in Flux, so a release
// whose retries are exhausted tries again without a suspend/resume.
func TestResetAtClearsFailureCounts(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	failing := demoChart("1.0.0")
	failing["templates/fail.yaml"] = "{{ fail \"boom\" }}\n"
	reg := chartRegistry(t, failing)
	startEngine(t, engine.Options{})
	hr := helmRelease(ns, "app", "demo")
	for _, o := range []client.Object{chartSource(ns, "demo", reg.Host(), "1.0.0"), hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, func() bool { return conditions.IsStalled(hr) && hr.Status.InstallFailures >= 1 }, "install failure exhausts retries (Stalled)")
	if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "boom") {
		t.Fatalf("message %q should carry the chart's failure", msg)
	}
	patch := client.MergeFrom(hr.DeepCopy())
	hr.Annotations = map[string]string{helmv2.ResetRequestAnnotation: "r1", meta.ReconcileRequestAnnotation: "r1"}
	if err := cp.Client.Patch(ctx, hr, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool { return hr.Status.LastHandledResetAt == "r1" }, "lastHandledResetAt = r1")
	if hr.Status.InstallFailures != 1 {
		t.Fatalf("after a reset the count starts again: one new failure, got %d", hr.Status.InstallFailures)
	}
}

// /metrics shows Flux's reconcile metrics per kind.
func TestMetricsEndpoint(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	startEngine(t, engine.Options{HealthAddr: addr})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`gotk_reconcile_duration_seconds_count{kind="Kustomization",name="apps",namespace="` + ns + `"}`,
		`gotk_reconcile_duration_seconds_count{kind="GitRepository",name="apps",namespace="` + ns + `"}`,
		`gotk_reconcile_condition{kind="Kustomization",name="apps",namespace="` + ns + `",status="True",type="Ready"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A deleted object's series go with it, as in Flux.
	if err := cp.Client.Delete(ctx, ks); err != nil {
		t.Fatal(err)
	}
	gone := `gotk_reconcile_condition{kind="Kustomization",name="apps",namespace="` + ns + `"`
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), gone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics still shows %s a minute after the Kustomization was deleted", gone)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var _ = kustomizev1.KustomizationKind
